"""`pagedlab grade`'s end-to-end test: a submission's parts that pass their unit tests are plugged into the
real engine, serve real prompts, and must produce the kit's tokens exactly (pagedlab.grading.e2e).

One grading run (module fixture, e2e seed 1: prompts of 43, 37 and 37 tokens) covers: the solutions of
every bridged exercise (passes, in all three configurations), the wrong versions of
tests/grading/engine_wrong_versions/ (each passes its unit tests and is caught here, with the component
named), a part that fails its unit tests (not plugged: no end-to-end run) and a submission that forges
its process's reply (earns nothing). The pure functions are tested without the model.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from pagedlab.grading import e2e, e2e_driver, registry
from pagedlab.grading.grade import E2EOptions, grade
from pagedlab.grading.plug import BRIDGES
from tests.grading.helpers import variant, write_notebook

WRONG_DIR = Path(__file__).resolve().parent / "engine_wrong_versions"
WRONG = sorted(WRONG_DIR.glob("*.py"))
POINTS = 2.0
PARTS = [eid for eid in BRIDGES if eid in {ex.id for ex in registry.all_exercises()}]

FORGED = """# EXERCISE 02.slot_mapping
from pagedlab.grading import e2e_learner as _e2e

def _forged(self, eids, prompt_ids, max_tokens, engine_kwargs, limit):
    return {"tokens": [[0] * max_tokens for _ in prompt_ids], "table": "all mine", "error": None, "passed": True}

_e2e.EngineServer.serve = _forged

def slot_mapping(block_table, positions, block_size):
    return [block_table[pos // block_size] * block_size + pos % block_size for pos in positions]
"""


def _meta(path: Path) -> dict[str, str]:
    """``component``, ``exercise`` and the first line (``mistake``) of an engine wrong version's docstring."""
    doc = path.read_text().split('"""')[1]
    out = {"mistake": doc.strip().splitlines()[0], "exercise": path.read_text().split("# EXERCISE ")[1].split()[0]}
    for line in doc.splitlines():
        if line.startswith("component:"):
            out["component"] = line.split(":", 1)[1].strip()
    return out


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    subs = root / "subs"
    write_notebook(subs / "solution.ipynb", [registry.snippet_source(eid) for eid in PARTS])
    for path in WRONG:
        write_notebook(subs / f"wrong_{path.stem}.ipynb", [path.read_text()])
    bad = variant("02.slot_mapping", ("pos // block_size] * block_size", "pos % block_size] * block_size"))
    write_notebook(subs / "fails_its_unit_tests.ipynb", [bad])
    write_notebook(subs / "forges_the_reply.ipynb", [FORGED])
    out = root / "out"
    results = grade([subs], out, timeout=240, quiet=True, e2e=E2EOptions(seed=1, points=POINTS))
    return {"out": out, "by": {r.learner.name: r for r in results}}


def test_the_solutions_serve_identically_in_every_configuration(graded):
    r = graded["by"]["solution"]
    assert r.e2e is not None and r.e2e.status == "passed", r.e2e
    configs = ["default", "prefix caching", "forced preemption", "triton kernel"]
    assert [d.split(":")[0] for d in r.e2e.details] == configs
    assert all("3 prompts identical" in d for d in r.e2e.details[:3]) and "1 prompts identical" in r.e2e.details[3]
    slots = ("free_queue", "slot_mapping", "schedule_step", "pick_victim", "prefix_lookup", "kv_tile_load")
    for slot in (*slots, "triton_tile_load"):
        assert slot in r.e2e.line
    exercises = sum(er.score for er in r.exercises.values())
    assert exercises == sum(registry.get(e).points for e in PARTS)
    assert r.score == exercises + POINTS and r.max_score == exercises + POINTS


@pytest.mark.parametrize("path", WRONG, ids=[p.stem for p in WRONG])
def test_a_wrong_part_that_passes_its_unit_tests_is_caught_with_its_component(graded, path):
    r, meta = graded["by"][f"wrong_{path.stem}"], _meta(path)
    er = r.exercises[meta["exercise"]]
    assert er.found and er.score == er.max_score, [o.title for o in er.outcomes if not o.passed]  # slipped past
    assert r.e2e is not None and r.e2e.status == "failed", r.e2e
    assert f"in component {meta['component']} at engine step" in r.e2e.line, r.e2e.line
    assert r.e2e.score == 0.0 and r.max_score == sum(x.max_score for x in r.exercises.values()) + POINTS


def test_a_hang_and_an_exception_in_the_engine_are_rows_that_say_so(graded):
    hang = graded["by"]["wrong_slot_mapping_hangs_on_a_long_prefill"].e2e
    raised = graded["by"]["wrong_load_kv_tile_raises_on_wide_tiles"].e2e
    assert hang is not None and "did not return within" in hang.line, hang
    # the learner's own text from the end-to-end run stays out of learner-facing lines; the instructor's log has it
    assert raised is not None and "it raised AssertionError (its message is kept out" in raised.line, raised
    assert "tiles of at most 8 lanes" not in raised.line
    log = (graded["out"] / "logs" / "wrong_load_kv_tile_raises_on_wide_tiles.txt").read_text()
    assert "tiles of at most 8 lanes" in log


def test_a_part_that_fails_its_unit_tests_is_not_plugged(graded):
    r = graded["by"]["fails_its_unit_tests"]
    assert r.exercises["02.slot_mapping"].score < r.exercises["02.slot_mapping"].max_score
    assert r.e2e is not None and r.e2e.status == "not run"
    assert "no part of labs 02-08 passed its unit tests" in r.e2e.line
    assert r.max_score == sum(x.max_score for x in r.exercises.values()) + POINTS and r.e2e.score == 0.0


def test_a_forged_reply_earns_nothing(graded):
    r = graded["by"]["forges_the_reply"]
    assert r.exercises["02.slot_mapping"].score == r.exercises["02.slot_mapping"].max_score
    assert r.e2e is not None and r.e2e.status == "failed" and r.e2e.score == 0.0, r.e2e
    assert "first mismatch at prompt 0, token 0" in r.e2e.line, r.e2e.line
    assert any(
        "imports the grader's internals (pagedlab.grading.e2e_learner)" in f
        for f in r.exercises["02.slot_mapping"].flags
    )


def test_the_reports_show_the_end_to_end_row(graded):
    out = graded["out"]
    rows = {row["learner"]: row for row in csv.DictReader((out / "grades.csv").read_text().splitlines())}
    assert rows["solution"]["end-to-end"].startswith("end-to-end: 3 prompts identical in 4 configuration(s)")
    assert "in component slot_mapping" in rows["wrong_slot_mapping_memo_ignores_the_block_table"]["end-to-end"]
    html = (out / "feedback" / "wrong_load_kv_tile_memo_ignores_the_block_table.html").read_text()
    assert "data-e2e='failed'" in html and "in component kv_tile_load" in html
    gs = json.loads((out / "gradescope" / "solution" / "results.json").read_text())
    (test,) = [t for t in gs["tests"] if t["name"].startswith("end-to-end")]
    assert test["max_score"] == POINTS and test["score"] == POINTS and test["status"] == "passed"
    assert gs["score"] == graded["by"]["solution"].score


# --- the pure parts, without the model ---------------------------------------------------------------------
def _plan(reference: list[list[int]]) -> e2e.E2EPlan:
    return e2e.E2EPlan(1, ["a", "b"], [[1], [2]], 3, [e2e.Config("default", {}, reference)], "m", "c")


START = {"type": "e2e_start", "configs": ["default"]}


def test_the_verdict_compares_tokens_and_ignores_any_passed_claim():
    ref = [[5, 6, 7], [8, 9, 10]]
    line = {"type": "e2e", "config": "default", "parts": {"slot_mapping": "02.slot_mapping"}, "blame": "slot_mapping"}
    ok = e2e.judge_e2e([START, {**line, "tokens": ref, "error": None}], _plan(ref))
    assert ok.status == "passed" and ok.details == ["default: 2 prompts identical"]
    forged = e2e.judge_e2e(
        [START, {**line, "tokens": [[5, 6, 7], [8, 1, 10]], "error": None, "passed": True}], _plan(ref), 1.0
    )
    assert forged.status == "failed" and forged.score == 0.0
    assert forged.line == (
        "end-to-end: default: first mismatch at prompt 1, token 1 (1 vs the kit's 9) (component slot_mapping)"
    )
    short = e2e.judge_e2e([START, {**line, "tokens": [[5, 6, 7], [8, 9]], "error": None}], _plan(ref))
    assert "token 2 (end vs the kit's 10)" in short.line
    err = {"component": "kv_tile_load", "step": 4, "invariant": "a lane read the wrong slot", "message": "m"}
    stopped = e2e.judge_e2e([START, {**line, "tokens": None, "error": err}], _plan(ref))
    assert (
        stopped.line
        == "end-to-end: default: stopped in component kv_tile_load at engine step 4: a lane read the wrong slot"
    )
    assert e2e.judge_e2e([], _plan(ref)).status == "not run"
    assert e2e.judge_e2e([{**line, "tokens": ref, "error": None}], _plan(ref)).status == "not run"  # no start line


def test_a_run_cut_by_the_time_limit_fails_and_says_so():
    ref = [[5], [6]]
    cut = e2e.judge_e2e([START], _plan(ref), 1.0)
    assert cut.status == "failed" and cut.score == 0.0
    assert (
        cut.line
        == "end-to-end: default: did not finish before the grading time ran out (an endless loop in the engine?)"
    )
    died = {"type": "e2e", "config": "default", "tokens": None, "error": {"message": "the process ended", "fatal": 1}}
    assert e2e.judge_e2e([START, died], _plan(ref)).line == "end-to-end: default: stopped: the process ended"
    assert e2e.judge_e2e([], None, note="turned off (--no-e2e)").line == "end-to-end: not run (turned off (--no-e2e))"


@pytest.mark.parametrize(
    "got",
    [
        [],
        {"tokens": [[1, 2]], "table": "t", "error": None},  # one prompt short
        {"tokens": [[1, 2], [3, "4"]], "table": "t", "error": None},
        {"tokens": [[1, 2], [3, True]], "table": "t", "error": None},
        {"tokens": [[1], [2]], "table": 5, "error": None},
        {"tokens": None, "table": "t", "error": None},
        {"tokens": None, "table": "t", "error": {"message": ["not", "a", "str"]}},
    ],
)
def test_the_driver_accepts_only_a_plain_reply(got):
    with pytest.raises(ValueError):
        e2e_driver._reply(got, 2)


def test_the_reply_keeps_only_known_keys():
    assert e2e_driver._reply({"tokens": [[1], [2]], "table": "t", "error": None, "passed": True}, 2) == {
        "tokens": [[1], [2]],
        "table": "t",
        "error": None,
    }


def test_configurations_follow_the_plugged_parts():
    configs = [{"name": "default"}, {"name": "prefix caching"}, {"name": "forced preemption"}]

    def run(eids):
        return [(c["name"], used) for c, used in e2e_driver.configs_for(eids, configs)]

    assert run(["02.slot_mapping"]) == [("default", ["02.slot_mapping"])]
    assert run(["07.get_computed_blocks"])[1] == ("prefix caching", ["07.get_computed_blocks"])
    # a lab 05 step cannot preempt: the forced-preemption run uses the kit's scheduler with the learner's victim
    both = run(["05.schedule_with_budget", "06.pick_victim"])
    assert both[-1] == ("forced preemption", ["06.pick_victim"])
    assert [n for n, _ in run(["05.schedule_with_budget"])] == ["default"]


def test_prompts_are_drawn_from_the_pool_by_the_seed():
    pool = e2e.prompt_pool()
    a, b = e2e.choose_prompts(1, 3), e2e.choose_prompts(2, 3)
    assert a == e2e.choose_prompts(1, 3) and a != b and set(a) <= set(pool) and len(set(a)) == 3
    with pytest.raises(ValueError, match="--e2e-prompts"):
        e2e.choose_prompts(1, len(pool) + 1)


def test_a_triton_configuration_that_cannot_run_is_said_not_dropped(monkeypatch):
    """Where Triton cannot run (not installed, or no interpreter on a CPU machine) the plan says so in its
    line, instead of leaving the "triton kernel" configuration out silently."""

    def no_triton(components, prompt_ids, max_tokens, **kwargs):
        assert components is None and kwargs["attention_backend"] == "triton"  # the kit's parts
        raise ImportError("No module named 'triton'")

    monkeypatch.setattr(e2e.serve, "serve", no_triton)
    assert e2e._triton_config("m", [[1, 2]], {}) == "triton kernel (Triton cannot run here: No module named 'triton')"
    plan = e2e.E2EPlan(1, ["a"], [[1]], 3, [e2e.Config("default", {}, [[5]])], "m", "c", ("triton kernel (why)",))
    assert plan.describe().endswith("configurations: default; not run: triton kernel (why)")
    assert [c["name"] for c in plan.job()["configs"]] == ["default"]
    assert "not run" not in _plan([[5], [6]]).describe()
