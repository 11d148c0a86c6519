"""The working-memory layout: P_t in place of the history, one exact span per item, the shared prefix first."""

import pytest

from workbench.agents.loop import Agent
from workbench.agents.policy import MemoryBlock
from workbench.memory.trajectory import Step
from workbench.prompts.layout import PromptBuilder, PromptTooLongError
from workbench.prompts.working_memory import (
    WMPiece,
    build_working_memory_prompt,
    item_spans,
)

BLOCK = (
    WMPiece("wm_open", "Working memory:\n"),
    WMPiece("wm_bank", "Goal:\n", bank="goal"),
    WMPiece("wm_item", "- Task goal: put a pen in shelf.\n", item="G1", bank="goal", band="F"),
    WMPiece("wm_bank", "Reference:\n", bank="reference"),
    WMPiece("wm_item", "- pen 1 @ desk 1\n", item="R3", bank="reference", band="A"),
    WMPiece("wm_close", "(End of working memory.)\n"),
)
GOAL = "put a pen in shelf."


@pytest.fixture(scope="module")
def builder(tiny_lm):
    return PromptBuilder(tiny_lm.tokenizer, max_tokens=4096)


def test_item_spans_decode_to_their_text_and_carry_id_bank_band(builder):
    p = build_working_memory_prompt(builder, GOAL, "On the desk 1, you see a pen 1.", BLOCK, reminder="look on desk 1")
    tok, toks = builder.tokenizer, p.tokens
    spans = item_spans(p)
    assert set(spans) == {"G1", "R3"}
    assert tok.decode(toks[spans["R3"].start:spans["R3"].end]) == "- pen 1 @ desk 1\n"
    assert (spans["G1"].bank, spans["G1"].band, spans["R3"].bank, spans["R3"].band) == ("goal", "F", "reference", "A")
    mem = p.memory_span
    assert tok.decode(toks[mem[0]:mem[1]]) == "".join(x.text for x in BLOCK)
    kinds = [s.kind for s in p.spans]
    assert kinds.index("task") < kinds.index("wm_open") < kinds.index("current_observation") < kinds.index("reminder")
    assert p.history_span is None and "current_observation" not in [s.kind for s in p.spans if mem[0] <= s.start < mem[1]]
    text = tok.decode(toks)
    assert text.endswith("Current observation: On the desk 1, you see a pen 1.\nReminder: look on desk 1\n"
                         "<|im_end|>\n<|im_start|>assistant\n")


def test_agent_builds_the_layout_the_block_asks_for(tiny_lm):
    agent = Agent.from_model(tiny_lm)
    hist = [Step(observation="You are in the middle of a room.", action="go to desk 1")]
    wm = agent.build_prompt(MemoryBlock(layout="working_memory", working_memory=BLOCK), "ROOM TEXT", GOAL, hist,
                            "On the desk 1, you see a pen 1.")
    assert "> go to desk 1" not in tiny_lm.tokenizer.decode(wm.tokens)  # no raw history
    first = agent.build_prompt(MemoryBlock(layout="working_memory", working_memory=BLOCK), "ROOM TEXT", GOAL, [], "ignored")
    assert "Current observation: ROOM TEXT" in tiny_lm.tokenizer.decode(first.tokens)
    react = agent.build_prompt(MemoryBlock(), "ROOM TEXT", GOAL, hist, "On the desk 1, you see a pen 1.")
    assert "> go to desk 1" in tiny_lm.tokenizer.decode(react.tokens)
    # header + task are shared by consecutive working-memory prompts: the KV cache prefix
    task_end = [s for s in wm.spans if s.kind == "task"][0].end
    assert wm.prefix[:task_end] == first.prefix[:task_end]


def test_pieces_are_checked_and_too_long_is_an_error(tiny_lm):
    with pytest.raises(ValueError, match="kind"):
        WMPiece("memory", "x\n")
    with pytest.raises(ValueError, match="newline"):
        WMPiece("wm_item", "x")
    small = PromptBuilder(tiny_lm.tokenizer, max_tokens=60)
    with pytest.raises(PromptTooLongError, match="lower the memory budget"):
        build_working_memory_prompt(small, GOAL, "obs " * 40, BLOCK)
