"""`pagedlab grade` on an exercise whose object cannot cross the pipe (``runs_in_learner_process``).

Lab 08's ``@triton.jit`` helper is passed to the kit's kernels as a ``tl.constexpr``, so its public
drivers run in the learner's process and only the transcripts come back (instructor guide, section 7).
One grading run (module fixture) grades every stored wrong version of the helper and a few hostile
submissions; the unit tests check what the driver accepts as a transcript and that hidden tests are
refused for such an exercise.
"""

from __future__ import annotations

import textwrap

import pytest

from pagedlab.grading import registry
from pagedlab.grading.driver import _learner_transcript
from pagedlab.grading.grade import grade
from tests.grading.helpers import stub_source, write_notebook, wrong_versions

TILE = "08.triton_load_kv_tile"
TILE_SOLUTION = registry.snippet_source(TILE)
QUEUE = registry.snippet_source("02.free_queue")
WRONG_SLOT = (
    "# EXERCISE 02.slot_mapping\n"
    "def slot_mapping(block_table, positions, block_size):\n"
    "    return [0 for p in positions]\n"
)
TILE_WRONG = [w for w in wrong_versions() if w.exercise == TILE]

#: The stub of the Triton helper, plus code that makes every driver of BOTH exercises of the cell
#: run on the kit's reference. The Triton drivers run in the learner's process, so there it shapes
#: its own observations; slot_mapping's run in the driver process, where the patch does not exist.
PATCH_LOCAL = stub_source(TILE) + textwrap.dedent("""
    from pagedlab.grading import registry
    for _id in ("08.triton_load_kv_tile", "02.slot_mapping"):
        _ex = registry.get(_id)
        for _t in _ex.tests:
            _t.drive = (lambda d, e: (lambda obj, rec: d(e.get_reference(), rec)))(_t.drive, _ex)
""")
#: The stub of the Triton helper, plus code that makes the kit's helpers the drivers call run the reference.
PATCH_MODULE = stub_source(TILE) + textwrap.dedent("""
    from pagedlab.grading import registry as _r
    from pagedlab.course.exercises import lab08_triton as _l
    _ref = lambda: _r.get("08.triton_load_kv_tile").get_reference()
    _probe, _decode = _l.probe_tile, _l.decode_with_tile_loader
    _l.probe_tile = lambda fn, *a, **k: _probe(_ref(), *a, **k)
    _l.decode_with_tile_loader = lambda fn, *a, **k: _decode(_ref(), *a, **k)
""")
#: A correct helper, but the learner's process answers the driver with a transcript holding an object
#: (it arrives as a handle) instead of plain data.
FORGE_RUNNER = TILE_SOLUTION + textwrap.dedent("""
    import sys as _sys
    _sys.modules["__main__"]._LocalRunner.run = lambda self, *a: [{"kind": "obs", "what": "x", "value": object()},
                                                                  {"kind": "end"}]
""")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    subs = tmp_path_factory.mktemp("local") / "subs"
    for w in TILE_WRONG:
        write_notebook(subs / f"wrong_{w.name}.ipynb", [w.source])
    write_notebook(subs / "pat_patch_drivers.ipynb", [QUEUE, PATCH_LOCAL + "\n" + WRONG_SLOT])
    write_notebook(subs / "pia_patch_module.ipynb", [QUEUE, PATCH_MODULE])
    write_notebook(subs / "rex_forge_runner.ipynb", [QUEUE, FORGE_RUNNER])
    results = grade(
        [subs],
        subs.parent / "out",
        timeout=120,
        jobs=2,
        memory_mb=4096,
        quiet=True,
        exercises=[TILE, "02.free_queue", "02.slot_mapping"],
    )
    return {r.learner.name: r for r in results}


def test_the_flag_is_set_only_where_the_object_cannot_cross_the_pipe():
    assert [ex.id for ex in registry.all_exercises() if ex.runs_in_learner_process] == [TILE]


def test_there_are_triton_wrong_versions_to_grade():
    assert len(TILE_WRONG) >= 2


@pytest.mark.parametrize("name", [w.name for w in TILE_WRONG])
def test_each_triton_wrong_version_loses_its_points_under_grade(graded, name):
    w = next(w for w in TILE_WRONG if w.name == name)
    er = graded[f"wrong_{name}"].exercises[TILE]
    assert er.found and er.score < er.max_score
    assert er.flags == []  # honest code; the kit's own lazy state (its kernels) filled by the tests is no flag
    caught = next(o for o in er.outcomes if o.title == w.caught_by)
    assert not caught.passed, [(o.title, o.status) for o in er.outcomes]
    if caught.status == "failed":  # a crash of the learner's process (an out-of-bounds read) also loses it
        assert all(h in caught.message for h in w.hints), caught.message


def test_patching_the_local_drivers_is_flagged_and_reaches_no_other_exercise(graded):
    r = graded["pat_patch_drivers"]
    tile, slot = r.exercises[TILE], r.exercises["02.slot_mapping"]
    flags = " | ".join(tile.flags + slot.flags)
    assert "imports the grader's internals (pagedlab.grading.registry)" in flags
    assert "assigns to the kit's objects (_t.drive = ...)" in flags
    assert "replaced the kit's objects in its own process (registry[" in flags and ".drive" in flags  # the audit
    # slot_mapping's drivers run in the driver process: the patch does not exist there; the Triton
    # drivers run on copies of the tests taken before the learner's cells ran
    for er in (slot, tile):
        assert er.score == 0 and not any(o.passed for o in er.outcomes), [o.message for o in er.outcomes]
    assert r.exercises["02.free_queue"].score == 1.0


def test_patching_the_kits_helpers_of_the_local_drivers_is_flagged(graded):
    r = graded["pia_patch_module"]
    tile = r.exercises[TILE]
    flags = " | ".join(tile.flags)
    assert "imports the grader's internals (pagedlab.course.exercises)" in flags
    assert "assigns to the kit's objects (_l.probe_tile = ...)" in flags
    assert "pagedlab.course.exercises.lab08_triton.decode_with_tile_loader" in flags  # the audit
    # The documented limit (instructor guide, section 7): in its own process the stub's code shaped its own
    # observations (as a copy of the reference would); the flags are the instructor's cue. Only the test that
    # reads the helper's source (issue 23: what a GPU would show) still sees the stub.
    by_status = {o.status for o in tile.outcomes if not o.passed}
    assert by_status == {"not_implemented"} and sum(not o.passed for o in tile.outcomes) == 1, tile.outcomes
    assert tile.score == 0  # one test not passed: nothing, under the default all-or-nothing rule (issue 34)
    assert r.exercises["02.free_queue"].score == 1.0


def test_a_transcript_that_is_not_plain_data_earns_nothing_and_harms_nothing(graded):
    r = graded["rex_forge_runner"]
    tile = r.exercises[TILE]
    assert tile.score == 0
    assert all("malformed transcript" in o.message for o in tile.outcomes), [o.message for o in tile.outcomes]
    assert r.exercises["02.free_queue"].score == 1.0


def test_the_driver_accepts_only_plain_transcript_entries():
    good = [
        {"kind": "step", "label": "s"},
        {"kind": "obs", "what": "w", "value": (1, [2.5, None], {"a": "b"}), "tol": None},
        {"kind": "end"},
    ]
    assert _learner_transcript(good) == [good[0], {**good[1], "value": [1, [2.5, None], {"a": "b"}]}, good[2]]
    assert _learner_transcript([]) == []
    for bad in (
        [{"kind": "obs", "value": {1, 2}}],
        [{"kind": "obs", "value": {1: "x"}}],
        [{"kind": "verdict", "passed": True}],
        [{"value": 1}],
        ({"kind": "end"},),
        "end",
        [{"kind": "obs", "value": object()}],
        [{"kind": "obs", "value": b"x"}],
    ):
        with pytest.raises(ValueError):
            _learner_transcript(bad)


def test_hidden_tests_are_refused_for_an_exercise_that_runs_in_the_learners_process(tmp_path):
    before = [t.title for t in registry.get(TILE).tests]
    (tmp_path / "tile.py").write_text(
        textwrap.dedent(f"""
        from pagedlab.grading import hidden_test

        @hidden_test({TILE!r}, "a hidden tile")
        def _(fn, rec):
            rec.observe("x", 1)
    """)
    )
    try:
        with pytest.raises(ValueError, match=f"hidden tests are not supported for {TILE}"):
            registry.load_hidden_tests(tmp_path)
        with pytest.raises(ValueError, match="never enter it"):
            grade([tmp_path], tmp_path / "out", hidden_tests=tmp_path, quiet=True)
    finally:
        registry.unload_hidden_tests()
    assert [t.title for t in registry.get(TILE).tests] == before


def test_static_flags_apply_to_the_local_exercise_as_to_the_others():
    from pagedlab.grading.driver import _kit_aliases, static_flags

    assert static_flags(TILE_SOLUTION, "triton_load_kv_tile", _kit_aliases([TILE_SOLUTION])) == []
    ref = (
        "# EXERCISE 08.triton_load_kv_tile\nfrom pagedlab.grading import use_reference\n"
        "triton_load_kv_tile = use_reference('triton_load_kv_tile', quiet=True)\n"
    )
    assert static_flags(ref, "triton_load_kv_tile", set()) == [
        "uses the kit's reference implementation (use_reference), not its own code"
    ]
    snippet = (
        "# EXERCISE 08.triton_load_kv_tile\nfrom pagedlab.grading.registry import snippet_object\n"
        "triton_load_kv_tile = snippet_object('08.triton_load_kv_tile')\n"
    )
    assert static_flags(snippet, "triton_load_kv_tile", set()) == [
        "imports the grader's internals (pagedlab.grading.registry)"
    ]
