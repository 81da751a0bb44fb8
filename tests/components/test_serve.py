"""``pagedlab.grading.serve`` is the one serve-and-compare and the one table of what makes a part run:
``serve_with``, ``my_engine``, the capstone and ``pagedlab grade``'s end-to-end test all go through it,
so one changed row (or a changed base engine) changes what all four serve - checked here without the
model, on a recording stand-in for the engine run."""

from __future__ import annotations

from types import MappingProxyType, SimpleNamespace
from typing import Any

import pytest

from pagedlab.grading import serve
from pagedlab.grading.checking import check
from pagedlab.grading.serve import PartRun, Served
from tests.components.helpers import solution

PROMPT = [1] * 30  # 30 token ids: 8 blocks of 4


class _FakeLLM:
    """The engine ``my_engine`` and the capstone build, recording its settings (no model)."""

    made: list[dict[str, Any]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _FakeLLM.made.append(kwargs)
        self.llm_engine = SimpleNamespace(components=kwargs.get("components"))

    def apply_chat_template(self, conversation: Any) -> list[int]:
        return list(PROMPT)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every ``serve.serve`` call's settings (and its parts), answered with the same tokens for all; the
    base engine and three rows of the table changed."""
    calls: list[dict[str, Any]] = []

    def fake_serve(components: Any, prompt_ids: list[list[int]], max_tokens: int, **kw: Any) -> Served:
        kw = {k: v for k, v in kw.items() if k != "model"}  # the e2e test names its model file, the rest do not
        calls.append({**kw, "kit": components is None})
        return Served([[7] * max_tokens for _ in prompt_ids], None, preempted=1, prefill_chunks=1)

    monkeypatch.setattr(serve, "serve", fake_serve)
    monkeypatch.setattr(serve, "generate_ids", lambda llm, ids, n_tokens, n=1: ([[7] * n_tokens for _ in ids], 0.1))
    monkeypatch.setattr(serve, "chat_ids", lambda prompts: [list(PROMPT) for _ in prompts])
    monkeypatch.setattr(serve, "_KIT", {})  # the fake runs must not stay in the kit's cache
    monkeypatch.setattr(serve, "BASE", MappingProxyType({**serve.BASE, "num_gpu_blocks": 77, "seed": 5}))
    rows = dict(serve.PART_RUNS)
    rows["slot_mapping"] = PartRun(needs={"max_num_seqs": 3}, serve={"max_num_seqs": 3})
    rows["prefix_lookup"] = PartRun(needs={"enable_prefix_caching": True}, serve={"prefix_cache": "row-changed"})
    rows["04.schedule_step"] = PartRun(preempts=True)  # as if lab 04's step could preempt
    monkeypatch.setattr(serve, "PART_RUNS", MappingProxyType(rows))
    _FakeLLM.made = []
    monkeypatch.setattr("pagedlab.engine.llm.LLM", _FakeLLM)
    monkeypatch.setattr("pagedlab.LLM", _FakeLLM)
    return calls


def test_serve_with_and_my_engine_take_the_table_and_the_base(recorded: list[dict[str, Any]], capsys: Any) -> None:
    from pagedlab.grading.plug import my_engine, serve_with

    sm = solution("02.slot_mapping")
    assert check(sm, show=False).passed
    res = serve_with(sm)
    assert res is not None and res.same and "✅" in capsys.readouterr().out
    mine, kit = [c for c in recorded if not c["kit"]], [c for c in recorded if c["kit"]]
    assert len(mine) == 1 and len(kit) == 1 and mine[0] == {**kit[0], "kit": False}  # same settings for both
    assert mine[0]["max_num_seqs"] == 3 and mine[0]["num_gpu_blocks"] == 77 and mine[0]["seed"] == 5
    my_engine({"slot_mapping": sm}, show=False)
    assert _FakeLLM.made[-1]["num_gpu_blocks"] == 77 and _FakeLLM.made[-1]["seed"] == 5


def test_serve_with_forces_preemption_with_the_one_search(recorded: list[dict[str, Any]], capsys: Any) -> None:
    """A part whose row preempts is served on the searched pool: blocks of 4, the first two prompts admitted."""
    from pagedlab.grading.plug import serve_with

    pv = solution("06.pick_victim")
    assert check(pv, show=False).passed
    res = serve_with(pv)
    assert res is not None and res.same and res.preempted == 1
    want = serve.forced_preemption([list(PROMPT)] * 3, 8, {**serve.BASE, **serve.PART_RUNS["pick_victim"].serve})[0]
    assert want["block_size"] == 4 and want["num_gpu_blocks"] == 16  # 2 x ceil(30 / 4)
    assert all({k: v for k, v in c.items() if k not in ("kit", "n")} == want for c in recorded)
    assert "(1 preemptions, 1 extra prefill chunks)" in capsys.readouterr().out


def test_the_capstone_takes_the_table_the_base_and_the_preemption_search(recorded: list[dict[str, Any]]) -> None:
    from pagedlab.course import capstone as cap

    sm = solution("02.slot_mapping")
    assert check(sm, show=False).passed
    hf = [[7] * cap.MAX_TOKENS for _ in cap.CAPSTONE_PROMPTS]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cap, "hf_reference", lambda: hf)
        report = cap.capstone(namespace={"slot_mapping": sm}, show=False)
    assert report.passed, report.text()
    rows = {r.check: r for r in report.rows}
    assert all(r.yours == [] for r in rows.values())  # the changed row: slot_mapping needs max_num_seqs 3
    runs = [c for c in recorded if not c["kit"]]
    assert runs[1]["num_gpu_blocks"] == 77 and runs[1]["seed"] == 5  # "block_size 16, caching off": the base
    pools = {c["num_gpu_blocks"] for c in runs if "preemption_mode" in c}
    searched = serve.forced_preemption([list(PROMPT)] * 8, cap.MAX_TOKENS, {**cap._engine()})[0]["num_gpu_blocks"]
    assert pools == {searched} and all(c["block_size"] == 4 for c in runs if "preemption_mode" in c)


def test_the_end_to_end_test_takes_the_table_the_base_and_the_preemption_search(
    recorded: list[dict[str, Any]], tmp_path: Any
) -> None:
    from pagedlab.grading import e2e, e2e_driver, e2e_learner

    model = tmp_path / "m.gguf"
    model.write_bytes(b"")
    plan = e2e.plan(seed=1, num_prompts=3, max_tokens=8, model=str(model))
    by = {c.name: c.engine_kwargs for c in plan.configs}
    assert by["default"]["num_gpu_blocks"] == 77 and by["default"]["seed"] == 5
    assert by["prefix caching"]["prefix_cache"] == "row-changed"  # the prefix_lookup row's serve settings
    pre = serve.forced_preemption([list(PROMPT)] * 3, 8, dict(serve.BASE), model=str(model))[0]
    assert by["forced preemption"] == pre and pre["block_size"] == 4
    configs = [{"name": c.name} for c in plan.configs]
    assert "forced preemption" in [c["name"] for c, _ in e2e_driver.configs_for(["04.schedule_step"], configs)]
    server = e2e_learner.EngineServer(str(model))
    server.objects = {"02.slot_mapping": solution("02.slot_mapping")}
    got = server.serve(["02.slot_mapping"], [PROMPT], 3, by["default"], 30.0)
    assert got["tokens"] == [[7, 7, 7]] and got["error"] is None and recorded[-1]["num_gpu_blocks"] == 77


def test_a_comparison_shows_as_one_line_under_the_serve_with_verdict() -> None:
    """``serve_with(...)`` ends the labs' cells, so Jupyter shows its return value under the verdict line. Found
    by solving lab 02 as a learner: the dataclass repr printed every prompt and every token id of both runs."""
    same = serve.Comparison(
        ["What is 2 + 2?", "Hi"], [[504, 2988] * 4, [1, 2]], [[504, 2988] * 4, [1, 2]], seconds=0.5766
    )
    assert repr(same) == "Comparison(2 prompts, 10 tokens, same, 0.58 s)"
    differ = serve.Comparison(["a", "b"], [[1, 2], [3, 4]], [[1, 2], [3, 5]])
    assert repr(differ) == "Comparison(2 prompts, 4 tokens, differ at (1, 1), 0.00 s)"
    stopped = serve.Comparison(["a"], [], [[1]], error="invariant broken")
    assert repr(stopped) == "Comparison(1 prompt, 0 tokens, error='invariant broken', 0.00 s)"
    assert same.mine == [[504, 2988] * 4, [1, 2]] and same.same  # the data stays there for whoever asks
