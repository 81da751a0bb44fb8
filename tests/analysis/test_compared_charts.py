"""Charts drawn to be compared share a scale, and a player's slider never calls a frame index a step.

``side_by_side`` (labs 04 and 05) draws one batch Gantt per run in each frame: the tokens-per-step bars of
all of them use one scale (a whole prefill of 64 tokens next to chunks of 8 must not look the same
height), and the caption names each run's own engine step. Players count frames; where the frames are
engine steps that do not start at 0 (lab 09 skips the engine's warm-up steps), a slider labelled
"step" said "step 0" beside panels saying "step 2".
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pagedlab.viz
from pagedlab.analysis.lab04 import side_by_side

ROOT = Path(__file__).resolve().parents[2]


def _steps(tokens: list[list[tuple[str, int, bool]]], first: int = 0) -> list[dict[str, Any]]:
    return [{"step": first + k, "scheduled": sched} for k, sched in enumerate(tokens)]


def _player(monkeypatch: pytest.MonkeyPatch, *args: Any, **kw: Any) -> dict[str, Any]:
    """What ``side_by_side`` hands its Player (frames, render, caption, description)."""
    got: dict[str, Any] = {}

    def fake(frames: Any, **kwargs: Any) -> dict[str, Any]:
        got.update(kwargs, frames=list(frames))
        return got

    monkeypatch.setattr(pagedlab.viz, "Player", fake)
    side_by_side(*args, **kw)
    return got


def _bars(svg: str) -> list[tuple[int, int, float]]:
    """(prefill, decode, decode bar height) of every tokens-per-step bar, chart by chart in order."""
    rects = re.findall(r"<rect [^>]*class=\"pl-tokens\"[^>]*>", svg)
    out = []
    for r in rects:
        attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', r))
        out.append((int(attrs["data-prefill"]), int(attrs["data-decode"]), float(attrs["height"])))
    return out


@settings(max_examples=25, deadline=None)
@given(
    a=st.lists(st.tuples(st.integers(0, 300), st.integers(1, 16)), min_size=1, max_size=6),
    b=st.lists(st.tuples(st.integers(0, 300), st.integers(1, 16)), min_size=1, max_size=6),
    budgets=st.sampled_from([None, [64, 8], 512]),
)
def test_side_by_side_draws_every_run_on_one_token_scale(a: Any, b: Any, budgets: Any) -> None:
    def run(pairs: list[tuple[int, int]]) -> list[dict[str, Any]]:
        return _steps([[("p", p, True)] * bool(p) + [(f"d{j}", 1, False) for j in range(d)] for p, d in pairs])

    with pytest.MonkeyPatch.context() as mp:
        got = _player(mp, [run(a), run(b)], ["whole", "chunked"], max_num_batched_tokens=budgets)
    svg = got["render"](max(len(a), len(b)) - 1)
    bars = _bars(svg)
    assert len(bars) == 2 * max(len(a), len(b))  # every step of both runs (the shorter padded with empty steps)
    assert [(p, d) for p, d, _ in bars if d] == a + b
    bars = [bar for bar in bars if bar[1]]
    # one scale: a decode bar's height per token is the same in both charts (heights are written to 0.1)
    for _, d1, h1 in bars:
        for _, d2, h2 in bars:
            assert abs(h1 / d1 - h2 / d2) <= 0.05 / d1 + 0.05 / d2, bars


def test_side_by_side_scale_fails_for_charts_scaled_alone() -> None:
    """The check above tells the two apart: charts of 64-token and 8-token steps scaled alone differ."""
    from pagedlab.viz import render_batch_gantt

    big = _bars(render_batch_gantt(_steps([[("p", 60, True), ("d", 4, False)]])))
    small = _bars(render_batch_gantt(_steps([[("p", 4, True), ("d", 4, False)]])))
    shared = _bars(render_batch_gantt(_steps([[("p", 4, True), ("d", 4, False)]]), token_scale=64))
    assert big[0][2] / 4 != small[0][2] / 4 and big[0][2] / 4 == pytest.approx(shared[0][2] / 4)


def test_side_by_side_caption_names_each_runs_engine_step(monkeypatch: pytest.MonkeyPatch) -> None:
    warm = _steps([[("a", 5, True)], [("a", 1, False)]], first=2)  # an engine that ran 2 warm-up steps
    fresh = _steps([[("b", 3, True)], [("b", 1, False)], [("b", 1, False)]])
    got = _player(monkeypatch, [warm, fresh], ["warm", "fresh"])
    assert got["description"] == "frame"
    cap = got["caption"](0, 0)
    assert cap.startswith("frame 0  |  ") and "warm: step 2," in cap and "fresh: step 0," in cap
    assert "warm: done" in got["caption"](2, 2) and "fresh: step 2," in got["caption"](2, 2)
    assert 'data-step="2"' in got["render"](0)


def _player_calls(tree: ast.AST) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == "Player"
    ]


def _sources() -> list[tuple[str, str]]:
    out = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in (ROOT / "pagedlab").rglob("*.py")]
    for nb in sorted((ROOT / "solutions").glob("*.ipynb")):
        for k, cell in enumerate(json.loads(nb.read_text(encoding="utf-8"))["cells"]):
            if cell["cell_type"] == "code":
                src = "\n".join(
                    ln for ln in "".join(cell["source"]).splitlines() if not ln.lstrip().startswith(("%", "!"))
                )
                out.append((f"{nb.name} cell {k}", src))
    return out


def test_no_player_slider_calls_its_frame_index_a_step() -> None:
    """No Player's slider is labelled "step": it counts frames ("frame", the default, or what a frame is, e.g.
    "operation"); the engine step is in the frame and its caption."""
    found, bad = 0, []
    for where, src in _sources():
        for call in _player_calls(ast.parse(src)):
            found += 1
            for kw in call.keywords:
                if kw.arg == "description" and isinstance(kw.value, ast.Constant) and "step" in kw.value.value:
                    bad.append(f"{where}: description={kw.value.value!r}")
    assert found >= 6, found  # the labs' and the analysis modules' players were seen
    assert not bad, bad
