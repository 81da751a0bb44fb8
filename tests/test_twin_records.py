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
        done = [(r, [[9]], ["length"], True) for r in sorted(self.live)]
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
