"""check(): what the learner sees, and that it cannot be fooled."""

from __future__ import annotations

import textwrap

import pytest

from pagedlab.grading import check, differential, registry
from pagedlab.grading.judge import first_difference
from pagedlab.grading.recorder import to_plain
from pagedlab.grading.runner import run_driver
from tests.grading.helpers import variant


def obj(eid: str, src: str):
    return registry.snippet_object(eid, src)


def test_passing_report_text(capsys):
    res = check(registry.snippet_object("02.slot_mapping"), show="text")
    out = capsys.readouterr().out
    assert res.passed and res.exercise == "02.slot_mapping" and res.num_passed == len(res.outcomes) == 5
    assert out.count("✓") == 5 and "All 5 tests passed" in out
    assert repr(res) == "CheckResult('02.slot_mapping', passed=True, 5/5 tests)"


def test_exercise_found_by_name_and_by_id():
    sol = registry.snippet_object("06.pick_victim")
    assert check(sol, show=False).exercise == "06.pick_victim"

    def my_victim(running, policy):  # renamed: found only with the id
        return sol(running, policy)

    assert check(my_victim, "06.pick_victim", show=False).passed
    res = check(my_victim, show=False)
    assert not res.passed and "no exercise is called 'my_victim'" in res.error and "Did you rename it" in res.error


def test_an_instance_instead_of_the_class_is_explained(capsys):
    Queue = registry.get("02.free_queue").get_reference()
    res = check(Queue([]), show="text")
    assert "needs the class itself" in res.error and "check(FreeKVCacheBlockQueue)" in res.error
    assert "✗" in capsys.readouterr().out


def test_failure_report_names_step_expected_got_hint_and_draws_the_pool(capsys):
    bad = obj("03.append_token", variant("03.append_token", ("if pool.ref_cnt(last) > 1:", "if False:")))
    res = check(bad, show="text")
    out = capsys.readouterr().out
    first = res.first_failure
    assert not res.passed and "✗" in out and "✓" in out
    assert first.invariant == "a sequence writes only into a block it holds alone"
    assert "step 2" in out and "append_token(pool, A)" in out and "which 2 sequences share" in out
    assert first.picture.startswith("<svg") and 'class="pl-viz pl-pool"' in first.picture
    assert first.expected_picture.startswith("<svg")
    html = res.html()
    assert "<svg" in html and "your state" in html and "expected" in html and 'data-status="failed"' in html
    # only the first failure is explained in detail
    assert out.count("hint:") + out.count("invariant is broken") == 1


def test_trace_divergence_message_for_a_lifo_queue():
    lifo = obj(
        "02.free_queue",
        variant(
            "02.free_queue",
            (
                "block = self.fake_free_list_head.next_free_block\n        if block is self.fake_free_list_tail:",
                "block = self.fake_free_list_tail.prev_free_block\n        if block is self.fake_free_list_head:",
            ),
        ),
    )
    res = check(lifo, show=False)
    f = res.first_failure
    assert f.step_label == "q.popleft()" and "expected 0, got 4" in f.message and "LRU" in f.message
    assert 'class="pl-viz pl-queue"' in f.picture


def test_o1_check_counts_link_visits_not_time():
    walk = obj(
        "02.free_queue",
        variant(
            "02.free_queue",
            (
                "        block.prev_free_block.next_free_block = block.next_free_block\n",
                "        node = self.fake_free_list_head\n        while node is not block:\n"
                "            node = node.next_free_block\n"
                "        block.prev_free_block.next_free_block = block.next_free_block\n",
            ),
        ),
    )
    res = check(walk, show=False)
    bad = [o for o in res.outcomes if not o.passed]
    assert [o.title for o in bad] == [
        "every operation is O(1): it touches a constant number of blocks",
        differential.TITLE,  # its cases count the same link visits on queues of up to 40 blocks
    ]
    assert "on a queue of" in bad[0].step_label and "expected at most 16" in bad[0].message


def test_always_equal_objects_and_int_subclasses_cannot_pass():
    class Yes(list):
        def __eq__(self, other):
            return True

    class Int(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    def slot_mapping(block_table, positions, block_size):
        return Yes([0])

    assert not check(slot_mapping, show=False).passed

    def slot_mapping(block_table, positions, block_size):  # noqa: F811
        return [Int(0) for _ in positions]

    res = check(slot_mapping, show=False)
    assert not res.passed and "expected 20, got 0" in res.first_failure.message

    class Anything:
        def __eq__(self, other):
            return True

    def kv_bytes_per_token(config):
        return Anything()

    res = check(kv_bytes_per_token, show=False)
    assert not res.passed and "a Anything object" in res.first_failure.message


def test_to_plain_and_strict_comparison():
    import numpy as np

    assert to_plain((1, [2.5, "x"], {"a": None, 3: True})) == [1, [2.5, "x"], {"a": None, "3": True}]
    assert to_plain(np.int64(7)) == 7 and type(to_plain(np.int64(7))) is int
    assert to_plain(np.arange(3)) == [0, 1, 2]
    assert to_plain(object()) == {"__unplain__": "object"}
    assert first_difference(1, True) == ("<type>",)
    assert first_difference(1, 1.0) == ("<type>",)
    assert first_difference(1, 1.0, tol=1e-9) is None
    assert first_difference([1, 2, 3], [1, 2]) == ("<length>",)
    assert first_difference({"a": 1}, {"a": 1, "b": 2}) == ("<keys>",)
    assert first_difference({"__unplain__": "X"}, {"__unplain__": "X"}) == ()


def test_not_implemented_and_errors_are_reported_with_the_line(capsys):
    def slot_mapping(block_table, positions, block_size):
        raise NotImplementedError("exercise 02.slot_mapping: replace this line with your code")

    res = check(slot_mapping, show="text")
    assert all(o.status == "not_implemented" for o in res.outcomes)
    assert "not implemented yet" in capsys.readouterr().out

    def slot_mapping(block_table, positions, block_size):  # noqa: F811
        return [block_table[p] for p in positions]

    res = check(slot_mapping, show=False)
    assert res.first_failure.status == "error" and "IndexError" in res.first_failure.message
    assert "return [block_table[p] for p in positions]" in res.first_failure.message


def test_an_endless_loop_is_stopped_by_the_time_limit_and_later_tests_are_skipped(monkeypatch, capsys):
    ex = registry.get("02.slot_mapping")
    for t in ex.tests:
        monkeypatch.setattr(t, "timeout", 0.3)
    calls = []
    solution = registry.snippet_object("02.slot_mapping")

    def slot_mapping(block_table, positions, block_size):  # right on test 1, loops on test 2
        calls.append(len(positions))
        while len(positions) > 4:
            pass
        return solution(block_table, positions, block_size)

    res = check(slot_mapping, show="text")
    out = capsys.readouterr().out
    assert [o.status for o in res.outcomes] == ["passed", "timeout", "skipped", "skipped", "skipped"]
    assert [o.title for o in res.outcomes] == [t.title for t in ex.public_tests()]
    assert calls == [4, 12], "tests after the timeout must not run"
    assert "infinite loop" in res.first_failure.message and res.first_failure.title == ex.tests[1].title
    line = "your code did not finish test 2 in 0.3 s; later tests skipped"
    assert out.count(line) == 1 and out.count("↷") == 1 and ex.tests[2].title not in out
    assert "1 of 5 tests passed" in out and not res.passed
    assert res.html().count(line) == 1


def test_sys_exit_in_learner_code_is_an_error_not_an_exit():
    def slot_mapping(block_table, positions, block_size):
        raise SystemExit(3)

    res = check(slot_mapping, show=False)
    assert res.first_failure.status == "error" and "SystemExit" in res.first_failure.message


def test_hidden_tests_run_only_when_asked_and_are_marked(tmp_path, capsys):
    (tmp_path / "h.py").write_text(
        textwrap.dedent("""
        from pagedlab.grading import hidden_test

        @hidden_test("02.slot_mapping", "SECRET block size 64")
        def _(fn, rec):
            rec.step("slot_mapping([1], [63], 64)")
            rec.observe("slots", fn([1], [63], 64))
    """)
    )
    sol = registry.snippet_object("02.slot_mapping")
    try:
        assert len(check(sol, show=False).outcomes) == 5
        res = check(sol, hidden_tests=str(tmp_path), show="text")
        assert len(res.outcomes) == 6 and res.passed and res.outcomes[-1].hidden
        assert "[hidden test]" in capsys.readouterr().out
        wrong = obj(
            "02.slot_mapping", variant("02.slot_mapping", ("* block_size + pos % block_size", "+ pos % block_size"))
        )
        res = check(wrong, hidden_tests=str(tmp_path), show=False)
        assert not res.outcomes[-1].passed
        assert "SECRET" not in res.text(show_hidden_details=False).split("SECRET block size 64", 1)[-1]
    finally:
        registry.unload_hidden_tests()
    assert not registry.get("02.slot_mapping").hidden_tests()


def _hidden_folder(path, title: str):
    """A hidden-tests folder with one test of 02.slot_mapping named ``title``."""
    path.mkdir()
    (path / "h.py").write_text(
        textwrap.dedent(f"""
        from pagedlab.grading import hidden_test

        @hidden_test("02.slot_mapping", {title!r})
        def _(fn, rec):
            rec.observe("slots", fn([2], [5], 16))
    """)
    )
    return path


def test_hidden_tests_do_not_outlive_the_grade_or_check_that_loaded_them(tmp_path):
    """A grade() in this process (an instructor's kernel, a test session) leaves no hidden test behind, whether it
    returns or raises; a check() runs its own folder's hidden tests, none an earlier check() or grade() loaded."""
    from pagedlab.grading.grade import E2EOptions, GradeError, Learner, grade

    a, b = _hidden_folder(tmp_path / "a", "from folder A"), _hidden_folder(tmp_path / "b", "from folder B")
    sol = registry.snippet_object("02.slot_mapping")
    public = [t.title for t in registry.get("02.slot_mapping").public_tests()]
    try:
        bare = Learner("kim", str(tmp_path), problems=["no notebook (.ipynb) in the submission"])
        (r,) = grade([bare], tmp_path / "o", a, exercises=["02.slot_mapping"], quiet=True, e2e=E2EOptions(False))
        assert r.status == "invalid"
        assert not registry.get("02.slot_mapping").hidden_tests()
        with pytest.raises(GradeError, match="no submissions found"):
            grade([], tmp_path / "o2", a, quiet=True, e2e=E2EOptions(False))  # fails after loading A
        assert not registry.get("02.slot_mapping").hidden_tests()
        assert [o.title for o in check(sol, show=False).outcomes] == public
        res = check(sol, hidden_tests=str(a), show=False)
        assert [o.title for o in res.outcomes] == [*public, "from folder A"] and res.passed
        res = check(sol, hidden_tests=str(b), show=False)  # A's test stays loaded, but is not B's
        assert [o.title for o in res.outcomes] == [*public, "from folder B"] and res.passed
    finally:
        registry.unload_hidden_tests()


def test_run_driver_records_plain_transcripts():
    ex = registry.get("02.slot_mapping")
    entries = run_driver(ex.tests[0], registry.snippet_object("02.slot_mapping"), plain=True)
    assert [e["kind"] for e in entries] == [
        "step",
        "state",
        "obs",
        "obs",
        "obs",
        "obs",
        "end",
    ]  # the contract, the slots, then the inputs unchanged
    assert all("hint" not in e for e in entries)


def test_unknown_exercise_id():
    with pytest.raises(registry.UnknownExerciseError, match="known exercises"):
        registry.get("99.nope")
