"""`pagedlab grade` end to end on crafted submissions, hostile ones included.

One grading run (module fixture) covers a class of learners; each test checks one of them, and
that the others were not influenced. The notebooks are generated with nbformat.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import textwrap

import pytest

from pagedlab.grading import registry
from pagedlab.grading.grade import GradeError, add_arguments, discover, grade, main
from tests.grading.helpers import variant, write_notebook

SLOT = registry.snippet_source("02.slot_mapping")
QUEUE = registry.snippet_source("02.free_queue")
SETUP = "from pagedlab.grading import check, use_reference\nimport math"
SECRET = "ALICE-SECRET-7731"


def slot_with_body(body: str) -> str:
    """An exercise cell for 02.slot_mapping whose function runs ``body`` first."""
    return (
        "# EXERCISE 02.slot_mapping\nimport os, sys, shutil, signal\n"
        "def slot_mapping(block_table, positions, block_size):\n"
        + textwrap.indent(textwrap.dedent(body), "    ")
        + "    return [block_table[p // block_size] * block_size + p % block_size for p in positions]\n"
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("grade")
    subs = root / "submissions"
    hidden = root / "hidden"
    hidden.mkdir()
    (hidden / "extra.py").write_text(
        textwrap.dedent("""
        from pagedlab.grading import hidden_test

        @hidden_test("02.slot_mapping", "HIDDEN-TITLE-4242 huge block size")
        def _(fn, rec):
            rec.step("slot_mapping([3, 9], [70, 127], 64)  # HIDDEN-STEP-4242")
            rec.observe("slots HIDDEN-OBS-4242", fn([3, 9], [70, 127], 64))
    """)
    )
    alice = write_notebook(subs / "alice.ipynb", [SETUP, QUEUE, "check(FreeKVCacheBlockQueue)", SLOT, f"# {SECRET}"])
    write_notebook(
        subs / "bob.ipynb",
        [
            variant(
                "02.slot_mapping",
                (
                    "block_table[pos // block_size] * block_size + pos % block_size",
                    "block_table[pos % block_size] * block_size + pos // block_size",
                ),
            )
        ],
    )
    write_notebook(subs / "carol_loop.ipynb", [QUEUE, slot_with_body("while True:\n    pass\n")])
    write_notebook(subs / "dan_exit.ipynb", [QUEUE, "# EXERCISE 02.slot_mapping\nimport sys\nraise SystemExit(1)\n"])
    write_notebook(subs / "erin_os_exit.ipynb", [slot_with_body("os._exit(0)\n")])
    write_notebook(subs / "frank_memory.ipynb", [QUEUE, slot_with_body("hog = bytearray(8 * 1024 ** 3)\n")])
    write_notebook(subs / "gina_crash.ipynb", [slot_with_body("os.kill(os.getpid(), signal.SIGSEGV)\n")])
    attacks = f"""
        results = []
        for name, attack in [
            ("read-other", lambda: open({str(alice)!r}).read()),
            ("list-submissions", lambda: os.listdir({str(subs)!r})),
            ("read-hidden", lambda: open({str(hidden / "extra.py")!r}).read()),
            ("list-hidden", lambda: os.listdir({str(hidden)!r})),
            ("delete-other", lambda: os.remove({str(alice)!r})),
            ("delete-hidden", lambda: shutil.rmtree({str(hidden)!r})),
            ("write-outside", lambda: open({str(root / "planted.txt")!r}, "w").write("x")),
            ("spawn", lambda: os.system("touch {root / "spawned.txt"}")),
            ("kill-grader", lambda: os.kill(os.getppid(), signal.SIGTERM)),
        ]:
            try:
                got = attack()
                results.append(name + ": SUCCEEDED " + repr(got)[:80])
            except PermissionError as e:
                results.append(name + ": blocked")
            except Exception as e:
                results.append(name + ": failed " + type(e).__name__)
        print("ATTACKS", results, flush=True)
    """
    write_notebook(subs / "hank_snoop.ipynb", [QUEUE, slot_with_body(attacks)])
    (subs / "ivy_not_json.ipynb").write_text("{this is not json")
    write_notebook(
        subs / "jack_other_course.ipynb",
        [("md", "# Linear regression"), "import math\nx = 1", "def fit(x):\n    return x"],
    )
    write_notebook(subs / "kim_missing.ipynb", [SETUP, QUEUE])
    write_notebook(subs / "leo_renamed.ipynb", [SLOT.replace("def slot_mapping(", "def slot_map("), QUEUE])
    mia = subs / "mia"
    write_notebook(mia / "labs" / "02_block_pool.ipynb", [SLOT])
    write_notebook(mia / "extra" / "queue.ipynb", [QUEUE])
    write_notebook(mia / ".ipynb_checkpoints" / "02-checkpoint.ipynb", ["raise SystemExit"])
    (mia / "notes.txt").write_text("my notes")
    write_notebook(
        subs / "ned_eq.ipynb",
        [
            "# EXERCISE 02.slot_mapping\nclass Yes(list):\n    def __eq__(self, o):\n"
            "        return True\n"
            "def slot_mapping(block_table, positions, block_size):\n"
            "    return Yes()\n"
        ],
    )
    write_notebook(
        subs / "olga_ref.ipynb",
        [
            "# EXERCISE 02.slot_mapping\nfrom pagedlab.grading import use_reference\n"
            "slot_mapping = use_reference('slot_mapping', quiet=True)\n"
        ],
    )
    add_gaming_submissions(subs)
    (subs / "README.txt").write_text("submissions of the workshop")
    out = root / "out"
    # timeout 20: each test may take 5 s (supervisor: a quarter of the learner's total). 02.free_queue's random
    # cases (60 cases, ~400 calls through the pipe, the learner process under the reference watch) took over 3 s
    # on a 2-core machine busy with the course site's build, and cost right submissions their point.
    results = grade([subs], out, hidden_tests=hidden, timeout=20, memory_mb=1024, jobs=2, quiet=True)
    return {
        "root": root,
        "subs": subs,
        "hidden": hidden,
        "out": out,
        "alice": alice,
        "res": {r.learner.name: r for r in results},
    }


WRONG = "def slot_mapping(block_table, positions, block_size):\n    return [0 for p in positions]\n"

#: Submissions that try to change how they are tested; each has a WRONG slot_mapping.
GAMING = {
    # make every driver run on the kit's reference instead of the learner's function
    "quinn_drivers": (
        "# EXERCISE 02.slot_mapping\nfrom pagedlab.grading import registry\n"
        "_ex = registry.get('02.slot_mapping')\n"
        "for _t in _ex.tests:\n"
        "    _t.drive = (lambda d: (lambda obj, rec: d(_ex.get_reference(), rec)))(_t.drive)\n" + WRONG
    ),
    # replace the runner, the judge and the recorder by assignment
    "ruth_patch": (
        "# EXERCISE 02.slot_mapping\nimport pagedlab.grading.runner as R\n"
        "import pagedlab.grading.judge as J\nfrom pagedlab.grading.recorder import Recorder\n"
        "R.run_driver = lambda test, obj, **kw: R.reference_transcript(J, test)\n"
        "J.judge = lambda *a, **k: None\n"
        "Recorder.observe = lambda self, what, value, **kw: None\n" + WRONG
    ),
    # import-time trick: a fake module in sys.modules
    "sam_modules": (
        "# EXERCISE 02.slot_mapping\nimport sys, types\n"
        "_fake = types.ModuleType('pagedlab.grading.judge')\n"
        "_fake.judge = lambda *a, **k: None\n"
        "sys.modules['pagedlab.grading.judge'] = _fake\n" + WRONG
    ),
    # the same through importlib and setattr
    "xena_importlib": (
        "# EXERCISE 02.slot_mapping\nimport importlib\n"
        "_runner = importlib.import_module('pagedlab.grading.runner')\n"
        "_done = setattr(_runner, 'run_driver', lambda test, obj, **kw: [])\n" + WRONG
    ),
    # forge transcripts of the reference into the results file (old and new places)
    "tess_forge": (
        "# EXERCISE 02.slot_mapping\nimport json\nfrom pagedlab.grading import registry\n"
        "from pagedlab.grading.runner import run_driver\n"
        "_ex = registry.get('02.slot_mapping')\n"
        "_lines = [json.dumps({'type': 'transcript', 'exercise': _ex.id, 'test': t.title, 'hidden': False,\n"
        "          'entries': run_driver(t, _ex.get_reference(), plain=True)}) for t in _ex.tests]\n"
        "for _path in ('../result.jsonl', 'result.jsonl'):\n"
        "    try:\n"
        "        with open(_path, 'a') as _f:\n"
        "            _f.write('\\n'.join(_lines) + '\\n')\n"
        "        print('FORGE', _path, 'written', flush=True)\n"
        "    except PermissionError:\n"
        "        print('FORGE', _path, 'blocked', flush=True)\n" + WRONG
    ),
    # reach the grader's objects through the pipe: handles it never exported, dunder attributes
    "uma_channel": (
        "# EXERCISE 02.slot_mapping\n"
        "def slot_mapping(block_table, positions, block_size):\n"
        "    chan = object.__getattribute__(block_table, '_pl_chan')\n"
        "    got = []\n"
        "    for h in range(1, 30):\n"
        "        for name in ('__globals__', '__class__', '__dict__', '__init__'):\n"
        "            try:\n"
        "                v = chan.request('getattr', h, name=name)\n"
        "                got.append(f'{h}.{name}: GOT {type(v).__name__}')\n"
        "            except Exception:\n"
        "                pass\n"
        "    for op in ('call', 'plain', 'iter'):\n"
        "        try:\n"
        "            chan.request(op, 10 ** 6)\n"
        "            got.append(op + ': GOT')\n"
        "        except Exception:\n"
        "            pass\n"
        "    print('CHANNEL', got, flush=True)\n"
        "    return [0 for p in positions]\n"
    ),
    # look for the hidden tests in memory, remember every input, and show it all in an error message
    "vic_leak": (
        "# EXERCISE 02.slot_mapping\nimport sys, linecache\n_seen = []\n"
        "def slot_mapping(block_table, positions, block_size):\n"
        "    _seen.append(repr((list(block_table), list(positions), block_size)))\n"
        "    found = [m for m in sys.modules if 'hidden' in m] + [str(k) for k in linecache.cache if 'hidden' in str(k)]\n"
        "    raise ValueError('LEAK ' + ' | '.join(found + _seen))\n"
    ),
}


def add_gaming_submissions(subs):
    for name, cell in GAMING.items():
        write_notebook(subs / f"{name}.ipynb", [QUEUE, cell])


def ex(run, learner, eid="02.slot_mapping"):
    return run["res"][learner].exercises[eid]


def test_good_submission_gets_full_marks_despite_the_others(run):
    r = run["res"]["alice"]
    # alice hands in the solution cells: the kit's own code, flagged as such (and earning, the default); nothing else
    assert all(e.flags == [e.reference] and e.reference for e in r.exercises.values()), {
        k: e.flags for k, e in r.exercises.items()
    }
    assert r.status == "ok" and r.score == r.max_score == 2.0, r.messages
    # 5 public (4 hand-written, 1 differential) + 1 hidden test for slot_mapping, all passed
    assert [o.passed for o in ex(run, "alice").outcomes] == [True] * 6
    assert run["alice"].exists() and (run["hidden"] / "extra.py").exists()


def test_outputs_are_written(run):
    out = run["out"]
    rows = {row["learner"]: row for row in csv.DictReader((out / "grades.csv").read_text().splitlines())}
    assert set(rows) == set(run["res"])
    assert rows["alice"]["score"] == "2" and rows["alice"]["02.slot_mapping"] == "1"
    combined = json.loads((out / "all_learners.json").read_text())
    assert not (out / "results.json").exists()  # the combined file is not named like a Gradescope one
    assert combined["exercises"] == ["02.free_queue", "02.slot_mapping"]
    gs = json.loads((out / "gradescope" / "alice" / "results.json").read_text())
    assert gs["score"] == 2.0 and all(t["status"] == "passed" for t in gs["tests"])
    assert {t["visibility"] for t in gs["tests"]} == {"visible", "after_published", "hidden"}  # hidden: flags
    assert [t["name"] for t in gs["tests"] if t["visibility"] == "hidden"] == ["instructor: flags and log"]
    html = (out / "feedback" / "bob.html").read_text()
    assert "<svg" in html and "your state" in html and "IndexError" in html
    assert (out / "logs" / "alice.txt").exists()


def test_hidden_tests_are_never_printed(run):
    out = run["out"]
    for p in list(out.rglob("*")):
        if p.is_file():
            text = p.read_text(errors="replace")
            assert "4242" not in text, f"hidden test leaked into {p}"
    bob = json.loads((out / "gradescope" / "bob" / "results.json").read_text())
    hidden = [t for t in bob["tests"] if t["visibility"] == "after_published"]
    assert len(hidden) == 1 and hidden[0]["name"] == "02.slot_mapping: hidden test 1"
    assert hidden[0]["output"] == "hidden test: failed"


def test_wrong_implementation_is_explained(run):
    e = ex(run, "bob")
    assert e.score == 0 and not any(o.passed for o in e.outcomes)
    assert "IndexError" in e.outcomes[0].message or "expected" in e.outcomes[0].message
    assert run["res"]["bob"].exercises["02.free_queue"].error.startswith("missing")


def test_endless_loop_loses_only_its_own_tests(run):
    r = run["res"]["carol_loop"]
    assert ex(run, "carol_loop", "02.free_queue").score == 1.0
    statuses = [o.status for o in ex(run, "carol_loop").outcomes]
    assert statuses[0] == "timeout" and set(statuses) == {"timeout"}
    assert "not run: an earlier test of this exercise ran out of time" in ex(run, "carol_loop").outcomes[1].message
    assert r.status in ("ok", "timeout")


def test_sys_exit_in_a_cell(run):
    assert "raised SystemExit" in ex(run, "dan_exit").error or "sys.exit" in ex(run, "dan_exit").error
    assert ex(run, "dan_exit", "02.free_queue").score == 1.0


def test_os_exit_ends_only_that_process(run):
    # os._exit ends the learner's process during each test; the driver records it and starts a new one.
    r = run["res"]["erin_os_exit"]
    assert r.status == "ok" and r.score == 0
    outcomes = ex(run, "erin_os_exit").outcomes
    assert len(outcomes) == 6 and {o.status for o in outcomes} == {"error"}
    assert all("exited with status 0 (did your code call os._exit" in o.message for o in outcomes if not o.hidden)


def test_memory_hog_gets_a_memory_error(run):
    e = ex(run, "frank_memory")
    assert e.found and not any(o.passed for o in e.outcomes)
    assert "MemoryError" in e.outcomes[0].message
    assert ex(run, "frank_memory", "02.free_queue").score == 1.0


def test_segfault_is_reported_as_a_crash(run):
    outcomes = ex(run, "gina_crash").outcomes
    assert outcomes and all(
        o.status == "error" and "crashed (segmentation fault)" in o.message for o in outcomes if not o.hidden
    )
    assert run["res"]["gina_crash"].score == 0


def test_snooping_deleting_spawning_and_killing_are_blocked(run):
    log = (run["out"] / "logs" / "hank_snoop.txt").read_text()
    line = next(ln for ln in log.splitlines() if ln.startswith("ATTACKS"))
    for attack in (
        "read-other",
        "list-submissions",
        "read-hidden",
        "list-hidden",
        "delete-other",
        "delete-hidden",
        "write-outside",
        "spawn",
        "kill-grader",
    ):
        assert f"{attack}: blocked" in line, line
    assert SECRET not in log
    assert not (run["root"] / "planted.txt").exists() and not (run["root"] / "spawned.txt").exists()
    # the function itself is right: it passes once the attacks are blocked
    assert ex(run, "hank_snoop").score == 1.0


def test_bad_inputs_have_clear_messages(run):
    res = run["res"]
    assert any("not valid JSON" in m for m in res["ivy_not_json"].messages)
    assert res["ivy_not_json"].score == 0
    assert any("Is it from this course?" in m for m in res["jack_other_course"].messages)
    assert ex(run, "kim_missing").error.startswith("missing: no cell '# EXERCISE 02.slot_mapping'")
    assert "it defines slot_map" in ex(run, "leo_renamed").error
    assert res["README.txt"].status == "invalid"
    assert any("not a notebook" in m for m in res["README.txt"].messages)


def test_a_folder_per_learner_with_nested_notebooks(run):
    r = run["res"]["mia"]
    assert r.score == 2.0, (r.messages, {k: v.error for k, v in r.exercises.items()})
    assert any("notes.txt: not a notebook" in m for m in r.messages)
    assert {e.notebook for e in r.exercises.values()} == {"02_block_pool.ipynb", "queue.ipynb"}


def test_always_equal_object_fails_and_reference_use_is_flagged(run):
    assert ex(run, "ned_eq").score == 0
    olga = ex(run, "olga_ref")
    assert olga.score == 1.0 and olga.flags and "reference implementation" in olga.flags[0]
    rows = {row["learner"]: row for row in csv.DictReader((run["out"] / "grades.csv").read_text().splitlines())}
    assert "reference implementation" in rows["olga_ref"]["flags"]


def test_discover_rules(tmp_path):
    write_notebook(tmp_path / "a.ipynb", ["x = 1"])
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "deep").mkdir()
    write_notebook(tmp_path / "b" / "deep" / "n.ipynb", ["x = 1"])
    (tmp_path / "c").mkdir()
    learners = {lr.name: lr for lr in discover([tmp_path, tmp_path / "a.ipynb", tmp_path / "nope"])}
    assert learners["a"].notebooks and learners["a-2"].notebooks
    assert [p.name for p in learners["b"].notebooks] == ["n.ipynb"]
    assert learners["c"].problems == ["c/: no notebook (.ipynb) inside"]
    assert "no such file or folder" in learners["nope"].problems[0]


def test_cli_entry_points(tmp_path, capsys, monkeypatch):
    from pagedlab import cli

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    nb = write_notebook(tmp_path / "zoe.ipynb", [registry.snippet_source("06.crossover")])
    args = parser.parse_args([str(nb), "--out", str(tmp_path / "o"), "--timeout", "30", "--memory", "1024"])
    assert args.hidden_tests is None and args.jobs == 1 and callable(main)
    # the one-line registration the CLI needs
    if "grade" not in {c.name for c in cli.COMMANDS}:
        monkeypatch.setattr(
            cli,
            "COMMANDS",
            cli.COMMANDS
            + [cli.Command("grade", "pagedlab.grading.grade", "grade submitted notebooks in sandboxed processes")],
        )
    assert cli.main(["grade", str(nb), "--out", str(tmp_path / "o"), "--timeout", "30", "--memory", "1024"]) == 0
    out = capsys.readouterr().out
    assert "zoe" in out and "1.00 / 1.00" in out
    assert cli.main(["grade", str(nb), "--exercises", "99.nope", "--out", str(tmp_path / "o4")]) == 1
    assert "no exercise '99.nope'" in capsys.readouterr().err
    with pytest.raises(GradeError):
        grade([tmp_path / "zoe.ipynb"], tmp_path / "o2", timeout=0, quiet=True)
    with pytest.raises(GradeError, match="no such folder"):
        grade([nb], tmp_path / "o3", hidden_tests=tmp_path / "missing", quiet=True)


@pytest.mark.parametrize("learner", sorted(GAMING))
def test_changing_how_it_is_tested_earns_nothing(run, learner):
    e = ex(run, learner)
    assert e.found and e.score == 0 and not any(o.passed for o in e.outcomes), [o.message for o in e.outcomes]
    assert ex(run, learner, "02.free_queue").score == 1.0  # the honest exercise of the same notebook still counts


@pytest.mark.parametrize(
    "learner, flag",
    [
        ("quinn_drivers", "imports the grader's internals (pagedlab.grading.registry)"),
        ("quinn_drivers", "assigns to the kit's objects (_t.drive = ...)"),
        ("ruth_patch", "imports the grader's internals (pagedlab.grading.runner)"),
        ("ruth_patch", "pagedlab.grading.judge.judge"),
        ("ruth_patch", "pagedlab.grading.recorder.Recorder.observe"),
        ("sam_modules", "replaces modules or builtins (sys.modules['pagedlab.grading.judge'] = ...)"),
        ("sam_modules", "sys.modules['pagedlab.grading.judge']"),
        ("tess_forge", "imports the grader's internals (pagedlab.grading.runner)"),
        ("xena_importlib", "imports the grader's internals (pagedlab.grading.runner)"),
        ("xena_importlib", "pagedlab.grading.runner.run_driver"),
    ],
)
def test_gaming_is_flagged_for_the_instructor(run, learner, flag):
    flags = ex(run, learner).flags
    assert any(flag in f for f in flags), flags
    rows = {row["learner"]: row for row in csv.DictReader((run["out"] / "grades.csv").read_text().splitlines())}
    assert flag in rows[learner]["flags"]


def test_forged_results_and_the_pipe_reach_nothing(run):
    forge = (run["out"] / "logs" / "tess_forge.txt").read_text()
    assert "FORGE ../result.jsonl blocked" in forge, forge
    channel = (run["out"] / "logs" / "uma_channel.txt").read_text()
    line = next(ln for ln in channel.splitlines() if ln.startswith("CHANNEL"))
    assert line == "CHANNEL []", line  # no handle it was not given, no dunder, no unknown object
    assert not ex(run, "uma_channel").flags  # nothing static to see; it earned nothing anyway


def test_inputs_of_hidden_tests_never_reach_the_learner(run):
    out = run["out"]
    e = ex(run, "vic_leak")
    assert "LEAK" in e.outcomes[0].message  # its own public failures are explained to it
    learner_facing = [out / "feedback" / "vic_leak.html", out / "gradescope" / "vic_leak" / "results.json"]
    for p in learner_facing:
        text = p.read_text()
        assert "[70, 127]" not in text and "hidden" not in text.split("LEAK")[-1].split("|")[0], p


def test_every_solution_passes_and_every_stub_fails_through_the_pipe(tmp_path):
    """All exercises of the course, graded from the real notebooks: solutions/ earn every point,
    labs/ (the stubs) none - so the remote objects behave as local ones for every driver."""
    import shutil
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for name in ("solutions", "labs"):
        shutil.copytree(root / name, tmp_path / "subs" / name, ignore=shutil.ignore_patterns(".*"))
    results = {
        r.learner.name: r
        for r in grade([tmp_path / "subs"], tmp_path / "out", timeout=300, jobs=2, memory_mb=4096, quiet=True)
    }
    every = {ex.id for ex in registry.all_exercises()}
    sol, lab = results["solutions"], results["labs"]
    assert set(sol.exercises) == every and set(lab.exercises) == every
    failing = {
        eid: [o.message[:200] for o in er.outcomes if not o.passed]
        for eid, er in sol.exercises.items()
        if er.score != er.max_score
    }
    assert not failing and sol.score == sol.max_score
    assert lab.score == 0 and all(o.status == "not_implemented" for er in lab.exercises.values() for o in er.outcomes)


def test_an_exercise_subset_does_not_call_the_others_strangers(tmp_path):
    nb = write_notebook(tmp_path / "wen.ipynb", [QUEUE, SLOT, "# EXERCISE 99.bogus\ndef nothing():\n    pass\n"])
    (r,) = grade([nb], tmp_path / "out", exercises=["02.slot_mapping"], timeout=30, memory_mb=1024, quiet=True)
    assert set(r.exercises) == {"02.slot_mapping"} and r.score == 1.0
    strangers = [m for m in r.messages if "not an exercise of this course" in m]
    assert strangers == ["wen.ipynb: cell 2 is marked '# EXERCISE 99.bogus', which is not an exercise of this course"]


def test_static_flags_leave_every_solution_alone_and_catch_the_tricks():
    from pagedlab.grading.driver import _kit_aliases, static_flags

    for ex in registry.all_exercises():
        src = registry.snippet_source(ex.id)
        assert static_flags(src, ex.name, _kit_aliases([src, SETUP])) == [], ex.id
    cell = GAMING["quinn_drivers"]
    assert static_flags(cell, "slot_mapping", _kit_aliases([cell])) == [
        "imports the grader's internals (pagedlab.grading.registry)",
        "assigns to the kit's objects (_t.drive = ...)",
    ]
    own = "# EXERCISE 02.free_queue\nfrom pagedlab.core.block_pool import FreeKVCacheBlockQueue\n"
    assert static_flags(own, "FreeKVCacheBlockQueue", set()) == [
        "imports the kit's own FreeKVCacheBlockQueue from pagedlab.core.block_pool (the reference implementation)"
    ]
    assert static_flags("def broken(:\n", "x", set()) == []


def test_both_grading_clis_take_their_limits_from_one_helper():
    from pagedlab.grading import gradescope

    grade_parser, bundle_parser = argparse.ArgumentParser(), argparse.ArgumentParser()
    add_arguments(grade_parser)
    gradescope.add_arguments(bundle_parser)
    g = grade_parser.parse_args(["subs"])
    b = bundle_parser.parse_args(["out.zip"])
    assert (g.timeout, g.memory) == (120.0, 2048) and (b.timeout, b.memory) == (300.0, 4096)
    assert isinstance(g.timeout, float) and isinstance(b.memory, int)
    b = bundle_parser.parse_args(["out.zip", "--timeout", "7.5", "--memory", "512"])
    assert (b.timeout, b.memory) == (7.5, 512)


def test_grade_takes_discovered_learners_as_they_are_and_refuses_none(tmp_path, capsys):
    from pagedlab.grading.grade import Learner

    with pytest.raises(GradeError, match="no submissions found in an empty list"):
        grade([], tmp_path / "o", quiet=True)
    assert not (tmp_path / "o").exists()
    bare = Learner("kim", str(tmp_path), problems=["no notebook (.ipynb) in the submission"])
    (r,) = grade([bare], tmp_path / "o", exercises=["02.slot_mapping"], quiet=True)
    assert r.learner is bare and r.status == "invalid" and r.score == 0
    assert r.messages == ["no notebook (.ipynb) in the submission"]
    assert r.exercises["02.slot_mapping"].max_score == registry.get("02.slot_mapping").points
    assert (tmp_path / "o" / "grades.csv").read_text().splitlines()[1].startswith("kim,")


def test_the_instructor_sees_why_a_hidden_test_failed(run):
    """grades.csv, the logs and Gradescope's instructor-only test say why each hidden test failed (the exception
    or the limit hit, the seconds it ran); the learner's files still say only "failed" (issue 34)."""
    out = run["out"]
    rows = {row["learner"]: row for row in csv.DictReader((out / "grades.csv").read_text().splitlines())}
    assert rows["alice"]["hidden_failures"] == ""
    why = {
        "frank_memory": "02.slot_mapping: hidden test 1: MemoryError",
        "carol_loop": "02.slot_mapping: hidden test 1: not run: an earlier test of this exercise ran out of time",
        "bob": "02.slot_mapping: hidden test 1: ",
    }
    for learner, start in why.items():
        cell = rows[learner]["hidden_failures"]
        assert cell.startswith(start) and re.search(r" after \d+\.\d\d s$", cell), (learner, cell)
        assert start in (out / "logs" / f"{learner}.txt").read_text()
        gs = json.loads((out / "gradescope" / learner / "results.json").read_text())
        (instructor,) = [t for t in gs["tests"] if t["visibility"] == "hidden"]
        assert start in instructor["output"]
        assert [t["output"] for t in gs["tests"] if t["visibility"] == "after_published"] == ["hidden test: failed"]
        assert start not in (out / "feedback" / f"{learner}.html").read_text()
    assert "memory limit" in rows["frank_memory"]["hidden_failures"]
    # vic's error message repeats the hidden test's inputs: the type is said, the message withheld
    assert "ValueError: (text withheld" in rows["vic_leak"]["hidden_failures"]


def test_a_hidden_failure_names_the_limit_and_withholds_the_inputs():
    from pagedlab.grading.grade import hidden_failure
    from pagedlab.grading.judge import Outcome
    from pagedlab.grading.recorder import error_entry, time_limit_entry

    out = Outcome("02.slot_mapping", "t", "timeout", hidden=True)
    assert hidden_failure("hidden test 2", out, [time_limit_entry(50.0)], 50.123) == (
        "hidden test 2: TimeoutError: time limit (time limit 50 s) after 50.12 s"
    )
    mem = hidden_failure("hidden test 1", out, [error_entry("MemoryError", "", "line 4")], 3.2)
    assert mem == "hidden test 1: MemoryError (memory limit) after 3.20 s"
    inputs = '["slot_mapping([3, 9], [70, 127], 64)"]'
    leak = hidden_failure("hidden test 1", out, [error_entry("ValueError", "bad 127")], None, inputs)
    assert leak == "hidden test 1: ValueError: (text withheld: it repeats the hidden test's inputs)"
    own = hidden_failure("hidden test 1", out, [error_entry("ValueError", "bad 1270")], None, inputs)
    assert own == "hidden test 1: ValueError: bad 1270"
