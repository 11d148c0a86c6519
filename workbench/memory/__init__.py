"""Trajectory memory: the data model, ETO import/export, canonical rendering, token accounting, a versioned
memory base and retrieval (MiniLM cosine, BM25).

Importing this package is light: sentence-transformers and the MiniLM weights load on first MiniLM retrieval.
"""

from workbench.memory.base import (
    ENTRIES_FILE,
    HISTORY_FILE,
    HistoryRecord,
    MemoryBase,
    StaleEntryError,
    entry_diff,
)
from workbench.memory.embeddings import (
    MINILM_NAME,
    EmbeddingCache,
    encode_texts,
    load_minilm,
    minilm_path,
)
from workbench.memory.eto import (
    ETO_ALFWORLD_INSTRUCTION,
    EtoStyle,
    eto_to_trajectory,
    export_eto,
    import_eto,
    trajectory_to_eto,
)
from workbench.memory.render import (
    GOAL_PREFIX,
    Piece,
    PieceKind,
    render_memory,
    render_pieces,
    segment_char_spans,
)
from workbench.memory.retrieval import (
    BM25Retriever,
    MiniLMRetriever,
    Retriever,
    RetrieverConfig,
    bm25_tokens,
    get_retriever,
    list_retrievers,
    register_retriever,
)
from workbench.memory.task_info import (
    ALFRED_TASK_TYPES,
    TASK_TYPES,
    GameRef,
    game_key,
    infer_task_type,
    parse_game_ref,
    task_type_from_goal,
    task_type_from_id,
)
from workbench.memory.tokens import (
    count_o200k,
    count_tokens,
    memory_token_breakdown,
    memory_tokens,
    o200k_encoding,
    piece_token_counts,
)
from workbench.memory.trajectory import (
    MemoryEntry,
    Segment,
    Step,
    Trajectory,
    TrajectoryFormatError,
    append_jsonl,
    atomic_write_text,
    iter_jsonl_dicts,
    read_jsonl,
    write_jsonl,
)

__all__ = [
    # data model and JSONL I/O
    "Step", "Trajectory", "Segment", "MemoryEntry", "TrajectoryFormatError",
    "read_jsonl", "write_jsonl", "append_jsonl", "atomic_write_text", "iter_jsonl_dicts",
    # task identity
    "ALFRED_TASK_TYPES", "TASK_TYPES", "GameRef", "parse_game_ref", "game_key",
    "task_type_from_id", "task_type_from_goal", "infer_task_type",
    # ETO conversations
    "ETO_ALFWORLD_INSTRUCTION", "EtoStyle", "import_eto", "export_eto", "trajectory_to_eto", "eto_to_trajectory",
    # rendering and tokens
    "GOAL_PREFIX", "Piece", "PieceKind", "render_memory", "render_pieces", "segment_char_spans",
    "o200k_encoding", "count_o200k", "count_tokens", "memory_tokens", "piece_token_counts", "memory_token_breakdown",
    # memory base
    "MemoryBase", "HistoryRecord", "entry_diff", "StaleEntryError", "ENTRIES_FILE", "HISTORY_FILE",
    # retrieval
    "Retriever", "RetrieverConfig", "MiniLMRetriever", "BM25Retriever",
    "register_retriever", "get_retriever", "list_retrievers", "bm25_tokens",
    "MINILM_NAME", "minilm_path", "load_minilm", "encode_texts", "EmbeddingCache",
]
