"""Papermill runner over notebooks/ -> reports/ (figures, tables, metrics.json, index.md), and the one table
renderer (memory conditions, by task type, paired exact McNemar, model-card sections) from run folders."""

from workbench.reporting.cards import CARD_INTRO, card_section, write_card
from workbench.reporting.outcomes import (
                                          DEFAULT_DTYPE,
                                          PAIRS,
                                          Outcomes,
                                          band_accuracy,
                                          band_pairs_from,
                                          decode_outcomes,
                                          encode_outcomes,
                                          folder_dtype,
                                          folder_outcomes,
                                          folder_table,
                                          model_pairs_from,
                                          paired_table,
                                          pairs_from,
                                          parse_step_bands,
                                          read_table,
)
from workbench.reporting.profiles import PROFILES, notebook_parameters
from workbench.reporting.reproduce import reproduce
from workbench.reporting.save import Reports
from workbench.reporting.tables import (
                                          carry_over,
                                          check_dtypes,
                                          rows_markdown,
                                          table_markdown,
                                          write_table,
)

__all__ = ["CARD_INTRO", "DEFAULT_DTYPE", "PAIRS", "PROFILES", "Outcomes", "Reports", "band_accuracy", "band_pairs_from",
           "card_section", "carry_over", "check_dtypes", "decode_outcomes", "encode_outcomes", "folder_dtype",
           "folder_outcomes", "folder_table", "model_pairs_from", "notebook_parameters", "paired_table", "pairs_from",
           "parse_step_bands", "read_table", "reproduce", "rows_markdown", "table_markdown", "write_card", "write_table"]
