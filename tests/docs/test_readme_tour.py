"""The README's quick tour runs as written: the default agent plays six steps of a real game with Traj memory, and
C of those steps is drawn."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def tour() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md has no ```python block (the quick tour)"
    return blocks[0]


def test_the_tour_is_at_most_ten_lines():
    assert len(tour().strip().splitlines()) <= 10


@pytest.mark.integration
@pytest.mark.game
def test_the_tour_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(tour(), str(README), "exec"), scope)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 7 and out[0].startswith("0 ")  # six steps, then the next decision's top candidates
    C = scope["C"].C  # a UtilizationMatrix: segments x the six steps played
    assert C.shape[1] == 6 and C.shape[0] >= 1 and (C > 0).any()
    assert (tmp_path / "c.png").stat().st_size > 0
    mass, pieces, steps = scope["s"].memory_attention()  # the player's raw per-piece mass, the same segments
    assert mass.shape == (len(pieces), 6) and steps == list(range(6)) and all(p.startswith("s") for p in pieces)
