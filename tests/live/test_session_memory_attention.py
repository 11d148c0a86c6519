"""memory_mass: one column of the player's memory attention from a step's span rows."""

from workbench.live import memory_mass


def test_memory_mass_sums_thought_and_action_tokens_of_a_segment_and_items():
    spans = [{"kind": "thought", "segment": 0, "item": None, "mass": 0.1},
             {"kind": "action", "segment": 0, "item": None, "mass": 0.2},
             {"kind": "observation", "segment": 0, "item": None, "mass": 0.4},  # observations are not C's
             {"kind": "item", "segment": None, "item": "goal", "mass": 0.05},
             {"kind": "history", "segment": None, "item": None, "mass": 0.3}]  # the episode's own steps
    col = memory_mass(spans)
    assert col.keys() == {"s0", "goal"} and abs(col["s0"] - 0.3) < 1e-12 and col["goal"] == 0.05
