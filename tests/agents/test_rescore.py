"""The re-score primitive on a tiny random model with a planted memory-copying head (``rescore_tiny``): the factual
state reproduced exactly, the answer item's effect, the planted head carrying it, the placebo's length, and edits
that name what the state does not hold."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # rescore_tiny

from rescore_tiny import (
    ANSWER,
    GOAL,
    PLACES,
    PLANTED,
    ROOM,
    TASK,
    KeyRoom,
    Shows,
    ToyWorkingMemory,
    build_copy_lm,
    episode,
)

from workbench.agents.edits import (
    ClearMemory,
    DropBank,
    DropItem,
    EditError,
    MaskHeads,
    MaskSegments,
    PlaceboReminder,
    RemoveReminder,
    ReplaceReminder,
    RewriteItem,
    SetBand,
    ShowOnly,
)
from workbench.agents.loop import Agent
from workbench.agents.policy import MemoryBlock
from workbench.agents.rescore import (
    State,
    apply_edits,
    rescore,
    rescore_many,
    state_at,
    states_at,
)
from workbench.memory.render import render_pieces
from workbench.memory.trajectory import MemoryEntry, Segment
from workbench.models.scoring import ActionScorer

REMINDER = "Look in the safe first."


@pytest.fixture(scope="module")
def agent():
    return Agent.from_model(build_copy_lm(), keep_prompts=True)


def _state(policy=None, step: int = 1) -> State:
    return state_at(policy or ToyWorkingMemory(), TASK, episode(), step, PLACES)


def _forwards(agent, monkeypatch) -> list:
    """The ScoreResult of every scoring forward of ``agent`` from now on is appended to the returned list."""
    calls: list = []
    score = agent.scorer.score

    def counted(*a, **kw):
        calls.append(score(*a, **kw))
        return calls[-1]

    monkeypatch.setattr(agent.scorer, "score", counted)
    return calls


# (1) the factual state, exactly ----------------------------------------------------------------------------------

def test_the_replayed_prompt_is_the_one_the_agent_saw_and_no_edit_reproduces_its_distribution(agent):
    played = agent.run(KeyRoom(max_steps=3), TASK, ToyWorkingMemory())
    traj = played.trajectory
    for state in states_at(ToyWorkingMemory(), TASK, traj, range(traj.n_steps), [PLACES] * traj.n_steps):
        assert state.prompt(agent).tokens == played.prompts[state.step].tokens  # byte-identical
        r = rescore(agent, state, [])
        assert r.p_edited == r.p  # exactly, not to a tolerance
        assert r.noop and r.tv == 0.0 and not r.flipped
        assert r.choice == state.action == traj.steps[state.step].action
        assert r.p_chosen == pytest.approx(state.record["p_action"], abs=1e-5)  # the loop reused its KV cache


def test_an_empty_edit_list_is_exact_whatever_the_cache_held_before(agent):
    state = _state()
    first = rescore(agent, state, [])
    other = state_at(ToyWorkingMemory(reminder=REMINDER), TASK, episode(), 2, PLACES)
    agent.decide(other.prompt(agent), list(PLACES))  # leave another prefix in the scorer's cache
    again = rescore(agent, state, [])
    assert again.p == again.p_edited == first.p
    assert agent.scorer.cache is None  # nothing edited stays for the agent's next decision


# (2) the answer item's effect ------------------------------------------------------------------------------------

def test_hiding_the_focal_answer_item_lowers_p_answer_and_an_irrelevant_item_barely_matters(agent):
    rs = rescore_many(agent, _state(), {"hide answer": [SetBand("R1", "hidden")], "ambient answer": [SetBand("R1", "A")],
                                        "drop answer": [DropItem("R1")], "drop irrelevant": [DropItem("E1")],
                                        "irrelevant ambient": [SetBand("R2", "H")]})
    before = rs["hide answer"].p_of(ANSWER)[0]
    assert rs["hide answer"].choice == ANSWER and before > 0.5
    for name in ("hide answer", "ambient answer", "drop answer"):
        after = rs[name].p_of(ANSWER)[1]
        assert before - after > 0.3, name
        assert rs[name].flipped and rs[name].delta_p == pytest.approx(after - before)
    effect = before - rs["hide answer"].p_of(ANSWER)[1]
    for name in ("drop irrelevant", "irrelevant ambient"):
        assert not rs[name].noop  # the prompt did change
        assert abs(rs[name].p_of(ANSWER)[1] - before) < 0.05 * effect, name
        assert not rs[name].flipped


def test_band_edits_run_first_and_block_edits_then_act_on_the_reassembled_block(agent):
    ed = apply_edits(agent, _state(), [DropItem("E1"), SetBand("R1", "A")])
    items = {p.item: p for p in ed.block.working_memory if p.kind == "wm_item"}
    assert set(items) == {"R1", "R2"} and items["R1"].text == "- The key is hidden somewhere.\n"
    assert [p.kind for p in ed.block.working_memory].count("wm_bank") == 1  # the emptied Episodic header went too
    shown = apply_edits(agent, _state(), [SetBand("E2", "F")]).block  # a hidden item brought back
    assert "E2" in {p.item for p in shown.working_memory}


# (3) the planted head carries the item's effect -------------------------------------------------------------------

def test_masking_the_planted_head_removes_most_of_the_items_effect(agent):
    rs = rescore_many(agent, _state(), {"hide": [SetBand("R1", "H")], "mask": [MaskHeads(PLANTED)],
                                        "mask+hide": [MaskHeads(PLANTED), SetBand("R1", "H")],
                                        "other": [MaskHeads((0, 1))], "other+hide": [MaskHeads((0, 1)), SetBand("R1", "H")]})
    effect = rs["hide"].p_of(ANSWER)[0] - rs["hide"].p_of(ANSWER)[1]
    masked = rs["mask"].p_of(ANSWER)[1] - rs["mask+hide"].p_of(ANSWER)[1]
    control = rs["other"].p_of(ANSWER)[1] - rs["other+hide"].p_of(ANSWER)[1]
    assert effect > 0.3
    assert abs(masked) < 0.1 * effect  # without the head the item hardly moves the choice
    assert control > 0.8 * effect  # masking another head of the same layer leaves the effect
    assert not rs["mask"].noop  # a forward edit is never a no-op, even on the factual prompt


# (4) the placebo reminder -----------------------------------------------------------------------------------------

def test_a_placebo_reminder_has_the_reminders_token_length_and_positions(agent):
    policy = ToyWorkingMemory(reminder=REMINDER)
    state = state_at(policy, TASK, episode(), 1, PLACES)
    rs = rescore_many(agent, state, {"placebo": [SetBand("R1", "H"), PlaceboReminder()],
                                     "played": [SetBand("R1", "H")], "without": [SetBand("R1", "H"), RemoveReminder()]})
    real, fake = rs["played"].edited_prompt, rs["placebo"].edited_prompt
    s, e = real.kind_span("reminder")
    assert fake.kind_span("reminder") == (s, e) and fake.n_tokens == real.n_tokens and fake.spans == real.spans
    assert len(fake.prefix) == len(real.prefix)
    tok = agent.builder.tokenizer
    label = len(tok("Reminder:", add_special_tokens=False).input_ids)
    assert fake.tokens[:s + label] == real.tokens[:s + label] and fake.tokens[e - 1:] == real.tokens[e - 1:]
    assert fake.tokens[s + label:e - 1] != real.tokens[s + label:e - 1]
    assert tok.decode(fake.tokens[s + label:e - 1]).strip() in "Keep working on the task one step at a time." * 2
    # the reminder names the answer (its only mention once R1 is hidden): the placebo takes that away
    p_real, p_fake = rs["played"].p_of(ANSWER)[1], rs["placebo"].p_of(ANSWER)[1]
    assert p_real - p_fake > 0.3
    assert abs(p_fake - rs["without"].p_of(ANSWER)[1]) < 0.1


def test_replacing_or_removing_the_reminder_edits_the_block_line(agent):
    state = state_at(ToyWorkingMemory(reminder=REMINDER), TASK, episode(), 1, PLACES)
    assert apply_edits(agent, state, [ReplaceReminder("Try the box.")]).block.reminder == "Try the box."
    assert apply_edits(agent, state, [RemoveReminder()]).prompt.kind_span("reminder") is None
    with pytest.raises(EditError, match="shows no reminder"):
        apply_edits(agent, _state(), [PlaceboReminder()])


# (5) edits that name what the state does not hold ------------------------------------------------------------------

def test_an_unknown_item_id_is_a_value_error_naming_it_before_any_forward(agent, monkeypatch):
    forwards = _forwards(agent, monkeypatch)
    state = _state()
    with pytest.raises(ValueError, match="'R9'"):
        rescore(agent, state, [DropItem("R9")])
    with pytest.raises(ValueError, match="R9"):
        rescore_many(agent, state, {"fine": [], "bad": [SetBand("R9", "F")]})
    with pytest.raises(ValueError, match="'X7'"):
        rescore(agent, state, [ShowOnly(("R1", "X7"))])
    with pytest.raises(ValueError, match="no bank 'constraint'.*shown: reference, episodic"):
        rescore(agent, state, [DropBank("constraint")])
    with pytest.raises(ValueError, match="'R9'"):
        rescore(agent, state, [RewriteItem("R9", "- nothing")])
    assert forwards == []  # every edited prompt is made before the first forward


def test_a_band_edit_on_a_policy_that_cannot_reassemble_names_the_edit_and_the_policy(agent):
    block = ToyWorkingMemory().memory(0, [])
    state = state_at(Shows(block), TASK, episode(), 1, PLACES)
    with pytest.raises(EditError, match=r"SetBand\(item='R1', band='H'\).*policy 'shows' \(Shows\).*reassemble"):
        apply_edits(agent, state, [SetBand("R1", "H")])
    assert apply_edits(agent, state, [DropItem("R1")]).block != block  # the block edits need no policy
    with pytest.raises(EditError, match="band 'X'"):
        SetBand("R1", "X")
    with pytest.raises(EditError, match="also put in band"):
        apply_edits(agent, _state(), [SetBand("R1", "H"), SetBand("R1", "F")])
    with pytest.raises(EditError, match=r"\(9, 0\)"):
        apply_edits(agent, _state(), [MaskHeads((9, 0))])


# the block edits ------------------------------------------------------------------------------------------------------

def test_show_only_drop_bank_rewrite_and_clear(agent):
    state = _state()
    assert state.item_ids == ("R1", "R2", "E1") and state.banks == ("reference", "episodic")
    only = apply_edits(agent, state, [ShowOnly("E1")]).block.working_memory
    assert [p.item for p in only if p.kind == "wm_item"] == ["E1"] and [p.bank for p in only if p.kind == "wm_bank"] == ["episodic"]
    frame = apply_edits(agent, state, [ShowOnly(())]).block.working_memory
    assert [p.kind for p in frame] == ["wm_open", "wm_close"]
    no_ref = apply_edits(agent, state, [DropBank("reference")]).block.working_memory
    assert all(p.bank != "reference" for p in no_ref)
    rewritten = rescore(agent, state, [RewriteItem("R1", "- The key is in the box.")])
    assert rewritten.edited_command == "box"  # the head copies whatever place the item names now
    cleared = apply_edits(agent, state, [ClearMemory()])
    assert cleared.block.layout == "react" and cleared.prompt.memory_span is None


def test_mask_segments_goes_through_drop_segments_on_a_react_block(agent):
    entry = MemoryEntry(entry_id="m1", task_id="train/x/t1", task_type="find", goal="find the coin.",
                        initial_observation="You are in a hall.",
                        segments=(Segment(thought="Look around first.", action="look"),
                                  Segment(observation="You see a desk 1.", action="go to desk 1"),
                                  Segment(observation="On the desk 1 you see a coin 1.", action="take coin 1")))
    block = MemoryBlock(pieces=tuple(render_pieces(entry)), entry=entry)
    state = State(task=TASK, step=0, room=ROOM, goal=GOAL, history=(), observation=ROOM, block=block,
                  candidates=PLACES)
    ed = apply_edits(agent, state, [MaskSegments(1)])
    assert state.prompt(agent).n_segments == 3 and ed.prompt.n_segments == 2
    assert [p[2] for p in ed.block.pieces if p[1] is not None] == \
        [p[2] for p in block.pieces if p[1] not in (None, 1)]
    assert ed.block.meta["dropped_segments"] == [1]
    with pytest.raises(EditError, match="no memory segment 5"):
        apply_edits(agent, state, [MaskSegments(5)])
    with pytest.raises(EditError, match="use DropItem"):
        apply_edits(agent, _state(), [MaskSegments(0)])
    with pytest.raises(EditError, match="use MaskSegments"):
        apply_edits(agent, state, [DropItem("R1")])


def test_rescore_many_scores_the_factual_state_once(agent, monkeypatch):
    forwards = _forwards(agent, monkeypatch)
    rs = rescore_many(agent, _state(), {"a": [DropItem("E1")], "b": [SetBand("R1", "H")], "c": []})
    assert len(forwards) == 4 and list(rs) == ["a", "b", "c"]
    assert rs["a"].p is rs["b"].p is rs["c"].p
    # each forward from an empty KV cache: no edited (or head-masked) prefix is ever reused by the next one
    assert [f.reused_tokens for f in forwards] == [0, 0, 0, 0]


def test_a_state_outside_the_episode_or_without_candidates_is_refused():
    with pytest.raises(ValueError, match="step 7 is outside"):
        _state(step=7)
    with pytest.raises(ValueError, match="empty"):
        state_at(ToyWorkingMemory(), TASK, episode(), 1, [])


# (6) through the agent's cached prefix (reuse_prefix: the recorded studies, bit for bit) --------------------------

def _decide_in_turn(agent, state, prompts) -> list[tuple[float, ...]]:
    """What the studies did before the primitive: ``agent.decide`` on each prompt in turn, the cache carried."""
    return [tuple(ActionScorer.normalise(agent.decide(p, list(state.candidates)).scores)) for p in prompts]


def _leave_another_prefix(agent) -> None:
    agent.scorer.reset()
    agent.decide(state_at(ToyWorkingMemory(reminder=REMINDER), TASK, episode(), 2, PLACES).prompt(agent), list(PLACES))


def test_reuse_prefix_scores_what_the_hand_written_studies_scored_through_the_same_cache(agent, monkeypatch):
    state = _state()
    sets = {"hide": [SetBand("R1", "H")], "same": [], "drop": [DropItem("E1")]}
    prompts = [state.prompt(agent), apply_edits(agent, state, sets["hide"]).prompt,
               apply_edits(agent, state, sets["drop"]).prompt]
    _leave_another_prefix(agent)
    p, hide, drop = _decide_in_turn(agent, state, prompts)
    _leave_another_prefix(agent)
    forwards = _forwards(agent, monkeypatch)
    rs = rescore_many(agent, state, sets, reuse_prefix=True)
    assert (rs["hide"].p, rs["hide"].p_edited, rs["drop"].p_edited) == (p, hide, drop)  # bit for bit
    # the factual forward reused the prefix left before the call, each edited one the prefix before it; the noop
    # set is not scored again (a second forward of the same tokens would only re-chunk the cache)
    assert len(forwards) == 3 and all(f.reused_tokens > 0 for f in forwards)
    assert rs["same"].noop and rs["same"].p_edited is rs["same"].p
    assert agent.scorer.cache is not None  # left for the next state, as the studies left it
    assert rs["hide"].choice == ANSWER and rs["hide"].delta_p < -0.3  # the same measurement as from an empty cache


def test_reuse_prefix_can_score_the_edit_sets_before_the_factual_prompt(agent, monkeypatch):
    from workbench.attention.instrument import CaptureInstrument

    state = _state(ToyWorkingMemory(reminder=REMINDER))
    placebo = apply_edits(agent, state, [PlaceboReminder()]).prompt
    _leave_another_prefix(agent)
    fake, real = _decide_in_turn(agent, state, [placebo, state.prompt(agent)])
    _leave_another_prefix(agent)
    forwards = _forwards(agent, monkeypatch)
    capture = CaptureInstrument(agent, [PLANTED])  # read-only: allowed to watch the cached forwards
    capture.reset()
    r = rescore(agent, state, [PlaceboReminder()], [capture], reuse_prefix=True, factual_first=False)
    assert (r.p_edited, r.p) == (fake, real)
    assert [len(f.layout.candidate_paths) for f in forwards] == [len(PLACES)] * 2
    assert [s.prompt_len for s in capture.capture.steps] == [placebo.n_tokens, state.prompt(agent).n_tokens]


def test_reuse_prefix_refuses_what_would_leave_its_effect_in_the_cached_prefix(agent, monkeypatch):
    from workbench.attention.instrument import HeadMaskInstrument

    forwards = _forwards(agent, monkeypatch)
    with pytest.raises(EditError, match=r"MaskHeads.*reuse_prefix=True.*reuse_prefix=False"):
        rescore_many(agent, _state(), {"fine": [DropItem("E1")], "masked": [MaskHeads(PLANTED)]}, reuse_prefix=True)
    with pytest.raises(EditError, match="HeadMaskInstrument.*only a read-only capture"):
        rescore(agent, _state(), [DropItem("E1")], [HeadMaskInstrument([PLANTED], 4)], reuse_prefix=True)
    assert forwards == []  # refused before any forward
    assert not rescore(agent, _state(), [MaskHeads(PLANTED)]).noop  # from an empty cache (the default) it is scored


def test_a_compiled_scorer_is_refused_a_rescore(monkeypatch):
    """A compiled step's scores are not eager's, and a forward edit or an instrument runs eager: the re-score would
    compare two arithmetics."""
    monkeypatch.setenv("WORKBENCH_FORWARD", "compiled")
    agent = Agent.from_model(build_copy_lm())
    assert agent.scorer.forward == "compiled"
    with pytest.raises(ValueError, match="forward='auto'"):
        rescore(agent, _state())
