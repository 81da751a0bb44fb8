"""pagedlab.twin.records without vLLM: the driver's event order and the diff's first-divergence report."""

from pagedlab.twin.records import EngineSettings, StepRecord, Trace, TwinRequest, Workload, diff, drive


def trace(*steps, tokens=None, free=8):
    return Trace("kit", "w", list(steps), tokens or {"a": [[1, 2]]}, {"a": ["length"]}, free)


def test_diff_names_step_request_field_and_both_values():
    a = trace(StepRecord(0, [["a", 5]]), StepRecord(1, [["a", 1], ["b", 4]]))
    b = trace(StepRecord(0, [["a", 5]]), StepRecord(1, [["a", 1], ["b", 3]]))
    b.engine = "vllm"
    d = diff(a, b)
    assert (d.step, d.request_id, d.field, d.left, d.right) == (1, "b", "scheduled", ["b", 4], ["b", 3])
    assert str(d) == "step 1, request 'b', scheduled: kit=['b', 4] vs vllm=['b', 3]"
    assert diff(a, a) is None


def test_diff_checks_pool_size_tokens_and_extra_steps():
    base = trace(StepRecord(0, [["a", 5]]))
    assert diff(base, trace(StepRecord(0, [["a", 5]]), free=9)).field == "num_free_blocks"
    assert diff(base, trace(StepRecord(0, [["a", 5]]), tokens={"a": [[1, 3]]})).field == "tokens"
    longer = trace(StepRecord(0, [["a", 5]]), StepRecord(1, [["a", 1]]))
    assert diff(base, longer).field == "number of steps"
    assert diff(base, trace(StepRecord(0, [["a", 5]], preempted=["a"]))).field == "preempted"
    assert diff(base, trace(StepRecord(0, [["a", 5]], num_cached_tokens={"a": 32}))).field == "num_cached_tokens"


class FakeEngine:
    name = "fake"

    def __init__(self):
        self.log, self.live = [], set()

    def add(self, r):
        self.log.append(("add", r.request_id))
        self.live.add(r.request_id)

    def abort(self, rid):
        self.log.append(("abort", rid))
        self.live.discard(rid)

    def has_unfinished(self):
        return bool(self.live)

    def num_free_blocks(self):
        return 3

    def step(self, record):
        self.log.append(("step", record.step))
        record.scheduled = [[r, 1] for r in sorted(self.live)]
        done = [(r, [(0, [9], "length")], True) for r in sorted(self.live)]
        self.live.clear()
        return done


def test_drive_adds_then_aborts_then_steps_and_waits_for_late_arrivals():
    w = Workload(
        "w",
        EngineSettings(),
        [TwinRequest("a", [1]), TwinRequest("b", [2], arrival_step=3), TwinRequest("c", [3], abort_step=0)],
    )
    eng = FakeEngine()
    t = drive(w, eng)
    assert eng.log == [("add", "a"), ("add", "c"), ("abort", "c"), ("step", 0), ("add", "b"), ("step", 3)]
    assert [s.step for s in t.steps] == [0, 3] and t.steps[0].finished == [["c", "abort"], ["a", "length"]]
    assert t.finish_reasons == {"c": ["abort"], "a": ["length"], "b": ["length"]} and t.num_free_blocks == 3


class ChildByChild(FakeEngine):
    """Reports an n=2 request as vLLM 0.32 does: one output per child, each with its own completion index."""

    def step(self, record):
        record.scheduled = [["0_a", 1], ["1_a", 1]]
        if record.step == 0:
            return [("a", [(1, [7], None)], False), ("a", [(0, [5], None)], False)]
        self.live.clear()
        return [("a", [(1, [7, 8], "length")], False), ("a", [(0, [5, 6], "stop")], True)]


def test_drive_merges_a_requests_completions_by_index():
    t = drive(Workload("w", EngineSettings(), [TwinRequest("a", [1], {"n": 2})]), ChildByChild())
    assert t.tokens == {"a": [[5, 6], [7, 8]]} and t.finish_reasons == {"a": ["stop", "length"]}
    assert t.steps[1].finished == [["a", ["stop", "length"]]]


def test_vllm_side_aborts_an_n_request_child_by_child_in_index_order():
    """vLLM 0.32 frees the ids of one abort call in set order (hash-seed dependent): the twin's vLLM adapter
    aborts an n > 1 request's children one call each, in the order vLLM's OutputProcessor lists them."""
    import importlib.util
    import os
    from pathlib import Path
    from unittest import mock

    import pagedlab.twin

    path = Path(pagedlab.twin.__file__).with_name("vllm_side.py")
    with mock.patch.dict(os.environ):  # the module sets vLLM's environment variables on import
        spec = importlib.util.spec_from_file_location("vllm_side_under_test", path)
        side = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(side)
    calls = []

    class Engine:
        output_processor = type("OP", (), {"external_req_ids": {"m2": ["0_m2", "1_m2", "2_m2"], "a": ["a"]}})()

        def abort_request(self, ids, internal=False):
            calls.append((ids, internal))

    adapter = side.VLLMAdapter.__new__(side.VLLMAdapter)
    adapter.engine = Engine()
    adapter.abort("m2")
    adapter.abort("a")
    adapter.abort("gone")
    assert calls == [(["0_m2"], True), (["1_m2"], True), (["2_m2"], True), (["a"], False), (["gone"], False)]
