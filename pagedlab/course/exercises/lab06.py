"""Lab 06 - preemption: which request to evict, and swap vs recompute.

* ``06.pick_victim`` - ``pick_victim(running, policy)``: fcfs preempts the end of the running list
  (vLLM v1 ``self.running.pop()``), priority the largest ``(priority, arrival_time)``. Aligned with
  ``pagedlab.sched.scheduler.Scheduler._pick_victim``.
* ``06.crossover`` - ``crossover_flops_per_s(num_params, kv_bytes_per_token, pcie_bandwidth)``: the
  effective FLOP/s where recompute and swap cost the same; aligned with
  ``pagedlab.sim.cost_model.CostModel.crossover_flops_per_s``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pagedlab.grading.contract import observe_read_only, snapshot
from pagedlab.grading.registry import Exercise, register
from pagedlab.parts import contracts
from pagedlab.request import Request
from pagedlab.sim.hardware import GPUS, get_gpu
from pagedlab.sim.models import MODELS, get_model
from pagedlab.viz.pictures import render_requests


# --- 06.pick_victim ----------------------------------------------------------------------------------
def _requests(spec: Sequence[tuple[str, float, int]]) -> list[Request]:
    return [Request(rid, [1, 2, 3], arrival_time=arrival, priority=prio) for rid, arrival, prio in spec]


def _victim_render(state: dict[str, Any], expected: dict[str, Any] | None, path: Any) -> str:
    marks = {}
    chosen = state.get("chosen")
    if isinstance(chosen, str):
        marks[chosen] = ("chosen victim", "#d62728")
    return render_requests(
        state["requests"], marks, title=f"running requests, running order (policy={state.get('policy')!r})"
    )


VICTIM = register(
    Exercise(
        "06.pick_victim",
        "pick_victim",
        "choose the request to preempt: fcfs = end of the running list, priority = largest (priority, arrival)",
        render=_victim_render,
        components=("pick_victim", "victim", "scheduler"),
    )
)


def _hint(policy: str) -> Any:
    def hint(expected: Any, got: Any, state: Any) -> str | None:
        if isinstance(got, str) and got.startswith("<"):
            return "return one of the Request objects of `running` itself"
        reqs = {r["request_id"]: r for r in state["requests"]} if isinstance(state, dict) else {}
        if policy == "fcfs":
            first = state["requests"][0]["request_id"] if reqs else None
            latest = max(reqs.values(), key=lambda r: r["arrival_time"])["request_id"] if reqs else None
            if got == first:
                return "fcfs preempts the request admitted LAST (the end of the running list), not the first"
            if got == latest:
                return (
                    "fcfs preempts the end of the running list (vLLM: self.running.pop()); a request that was "
                    "preempted and re-admitted sits there even though it arrived early"
                )
            return "fcfs: the last request of the running list"
        if got in reqs and expected in reqs:
            g, e = reqs[got], reqs[expected]
            if g["priority"] < e["priority"]:
                return (
                    "a LARGER priority value means LESS important (vLLM); preempt the largest (priority, arrival_time)"
                )
            if g["priority"] == e["priority"]:
                return "among equal priorities, preempt the one that arrived later (compare (priority, arrival_time))"
        return "priority: max over running of (priority, arrival_time)"

    return hint


def _victim_case(pick_victim: Any, rec: Any, policy: str, spec: Sequence[tuple[str, float, int]]) -> None:
    running = _requests(spec)
    ids = [r.request_id for r in running]
    given = snapshot(contracts.PICK_VICTIM_MUTATES, running=ids)
    rec.step(f"pick_victim(running={ids}, policy={policy!r})")
    got = pick_victim(running, policy)
    observe_read_only(rec, contracts.PICK_VICTIM_MUTATES, given, running=[r.request_id for r in running])
    match = next((r for r in running if r is got), None)
    chosen = match.request_id if match is not None else f"<not one of the running requests: {type(got).__name__}>"
    rec.state(
        {
            "policy": policy,
            "chosen": chosen,
            "requests": [
                {"request_id": r.request_id, "priority": r.priority, "arrival_time": r.arrival_time}
                for r in _requests(spec)
            ],
        }
    )
    rec.observe("victim", chosen, hint=_hint(policy))


@VICTIM.test("fcfs: the request admitted last")
def _(fn: Any, rec: Any) -> None:
    _victim_case(fn, rec, "fcfs", [("r0", 0.0, 0), ("r1", 1.0, 0), ("r2", 2.0, 0), ("r3", 3.0, 0)])
    _victim_case(fn, rec, "fcfs", [("r7", 5.0, 0)])


@VICTIM.test("fcfs: a request re-admitted after a preemption is at the end now")
def _(fn: Any, rec: Any) -> None:
    _victim_case(fn, rec, "fcfs", [("r1", 1.0, 0), ("r2", 2.0, 0), ("r0", 0.0, 0)])


@VICTIM.test("fcfs ignores priorities")
def _(fn: Any, rec: Any) -> None:
    _victim_case(fn, rec, "fcfs", [("r0", 0.0, 9), ("r1", 1.0, 0), ("r2", 2.0, -3)])


@VICTIM.test("priority: the largest priority value (least important) is preempted")
def _(fn: Any, rec: Any) -> None:
    _victim_case(fn, rec, "priority", [("p0", 0.0, 1), ("p1", 1.0, 3), ("p2", 2.0, 2)])
    _victim_case(fn, rec, "priority", [("p0", 0.0, 5), ("p1", 1.0, 0), ("p2", 2.0, 1)])


@VICTIM.test("priority: among equal priorities, the later arrival is preempted")
def _(fn: Any, rec: Any) -> None:
    _victim_case(fn, rec, "priority", [("p1", 1.0, 2), ("p0", 4.0, 2), ("p2", 2.0, 0), ("p3", 3.0, 2)])
    _victim_case(fn, rec, "priority", [("p6", 0.25, 1), ("p5", 0.5, 1)])


# --- 06.crossover --------------------------------------------------------------------------------------
CROSS = register(
    Exercise(
        "06.crossover",
        "crossover_flops_per_s",
        "the FLOP/s where recomputing a preempted request costs as much as swapping its KV over PCIe",
        components=("crossover",),
    )
)


def _unit_factor(ratio: float) -> str:
    """``"1e12"`` / ``"1024"`` ... when ``ratio`` (or its inverse) is a unit prefix's factor, else ""."""
    for name, f in (("1e3", 1e3), ("1e6", 1e6), ("1e9", 1e9), ("1e12", 1e12), ("1024", 1024.0), ("2**20", 2.0**20)):
        if abs(ratio / f - 1) < 1e-6 or abs(ratio * f - 1) < 1e-6:
            return name
    return ""


def _cross_hint(expected: Any, got: Any, state: Any) -> str | None:
    if not isinstance(got, (int, float)) or isinstance(got, bool) or not got:
        return "return a number of FLOP/s"
    r = got / expected
    if abs(r - 2) < 1e-6:
        return "twice too high: recompute costs 2 FLOPs per parameter per token, and the swap moves the KV out AND back"
    if abs(r - 0.5) < 1e-6:
        return (
            "half: a swap crosses PCIe twice (out, then back in), and recompute costs 2 FLOPs per parameter per token"
        )
    if abs(r - 8) < 1e-6 or abs(r - 0.125) < 1e-6:
        return "off by a factor of 8: pcie_bandwidth and kv_bytes_per_token are both in bytes - no bits involved"
    if abs(got * expected - 1) < 1e-3:
        return "upside down? Set swap time = recompute time and solve for the FLOP/s"
    unit = _unit_factor(r)
    if unit:
        return (
            f"off by a factor of {unit}: return plain FLOP/s and keep every input in its base unit - bytes and "
            "bytes/s, no TFLOP/s, GB/s or KiB"
        )
    if abs(r - 1) < 1e-3:
        return (
            f"close, but off by a relative {abs(r - 1):.1e} (the check allows 1e-9): a rounded constant, or "
            "float32 arithmetic (numpy/torch)? Compute with Python's int/float"
        )
    return (
        "write both costs for T tokens (swap = 2*T*kv/pcie, recompute = 2*params*T/F), set them equal and "
        "solve for F; T cancels"
    )


def _cross_case(fn: Any, rec: Any, model_name: str, gpu_name: str) -> None:

    m, g = get_model(model_name), get_gpu(gpu_name)
    rec.step(
        f"crossover_flops_per_s({m.num_params:,} params, {m.kv_bytes_per_token:,} B/token, "
        f"{g.pcie_bandwidth / 1e9:g} GB/s)  # {m.name} on {g.name}"
    )
    rec.state({"model": m.name, "gpu": g.name})
    rec.observe(
        "FLOP/s at the crossover", fn(m.num_params, m.kv_bytes_per_token, g.pcie_bandwidth), tol=1e-9, hint=_cross_hint
    )


@CROSS.test("LLaMA-13B on an A100 (the vLLM paper's setting)")
def _(fn: Any, rec: Any) -> None:
    _cross_case(fn, rec, "llama-13b", "a100")


@CROSS.test("grouped-query attention moves the crossover: 70B models on H100 and H200")
def _(fn: Any, rec: Any) -> None:
    _cross_case(fn, rec, "llama-2-70b", "h100")
    _cross_case(fn, rec, "llama-3-70b", "h200")


@CROSS.test("small models: Llama-2-7B and SmolLM2-135M (fp32)")
def _(fn: Any, rec: Any) -> None:
    _cross_case(fn, rec, "llama-2-7b", "h100")
    _cross_case(fn, rec, "smollm2-135m", "a100")


# --- differential checks (issue 39): random cases, the learner's part against the reference ---------------
from hypothesis import strategies as st  # noqa: E402 - the differential block stays at the end of the module

from pagedlab.grading.differential import differential  # noqa: E402

#: seconds on time.perf_counter()'s clock where a running engine's (or a replayed trace's) arrivals begin
_T0_US = st.integers(1_000_000_000, 200_000_000_000)


@st.composite
def _random_victim_case(draw: Any) -> dict[str, Any]:
    """Running requests in running order: ``[arrival offset in microseconds, priority]`` each.

    Arrival times are distinct (perf_counter seconds: requests added in one loop arrive microseconds apart,
    a replayed trace hours apart); ids are the engine's, a counter in arrival order, so after preemptions the
    running order is not the arrival order. Priorities are small ints, negative ones included, often all equal.
    """
    n = draw(st.integers(1, 8))
    # how far after the first each arrived, in microseconds: within a loop adding requests (a millisecond), a
    # busy server's seconds or minutes, a replayed trace's hours; distinct (the k-th gets k more microseconds)
    scale = st.sampled_from([1_000, 1_000_000, 1_000, 60_000_000, 1_000_000, 3_600_000_000, 36_000_000_000])
    offsets = [
        k + a * b // 1000 for k, (a, b) in enumerate(draw(st.tuples(*[st.tuples(st.integers(0, 1000), scale)] * n)))
    ]
    if draw(st.booleans()):
        prios = [draw(st.integers(-2, 3))] * n
    else:
        prios = list(draw(st.tuples(*[st.integers(-2, 3)] * n)))
    return {
        "policy": draw(st.sampled_from(["priority", "fcfs", "priority"])),
        "t0_us": draw(_T0_US),
        "first_id": draw(st.integers(0, 12)),
        "running": [[o, p] for o, p in zip(offsets, prios, strict=True)],
    }


def _victim_requests(case: dict[str, Any]) -> list[Request]:
    ranks = sorted(o for o, _ in case["running"])
    return [
        Request(
            str(case["first_id"] + ranks.index(o)),
            [1, 2, 3],
            arrival_time=(case["t0_us"] + o) / 1e6,
            priority=p,
        )
        for o, p in case["running"]
    ]


def _describe_victim_case(case: dict[str, Any]) -> str:
    reqs = ", ".join(
        f"{r.request_id} (priority {r.priority}, arrival {r.arrival_time:.6f})" for r in _victim_requests(case)
    )
    return f"pick_victim(running=[{reqs}], policy={case['policy']!r})"


def _random_victim_hint(policy: str) -> Any:
    """:func:`_hint`, first naming what only random running lists show: (priority, arrival_time) folded into
    one number, which perf_counter arrival times (or a trace hours long) outweigh."""
    fallback = _hint(policy)

    def hint(expected: Any, got: Any, state: Any) -> str | None:
        reqs = {r["request_id"]: r for r in state["requests"]} if isinstance(state, dict) else {}
        if policy == "priority" and got in reqs and expected in reqs:
            g, e = reqs[got], reqs[expected]
            least = min(reqs.values(), key=lambda r: (r["priority"], r["arrival_time"]))["request_id"]
            if g["priority"] < e["priority"] and g["arrival_time"] > e["arrival_time"] and got != least:
                return (
                    f"{got} arrived later but is more important (priority {g['priority']} < {e['priority']}; a "
                    "LARGER priority value means LESS important): "
                    "preempt the largest (priority, arrival_time), compared as a pair - the priority decides, the "
                    "arrival time only breaks its ties. Folded into one number (a sum, priority * k + arrival_time), arrival times on "
                    "time.perf_counter()'s clock, seconds to hours apart, outweigh the priority"
                )
            peers = [r for r in reqs.values() if r["priority"] == e["priority"]]
            earliest = min(peers, key=lambda r: r["arrival_time"])["request_id"]
            ga, ea = g["arrival_time"], e["arrival_time"]
            order = list(reqs)
            if (
                g["priority"] == e["priority"]
                and ga < ea
                and got != earliest
                and order.index(got) < order.index(expected)
                and (round(ga, 3) == round(ea, 3) or int(ga) == int(ea))
            ):
                return (
                    f"among equal priorities, preempt the one that arrived later: {expected} arrived "
                    f"{(ea - ga) * 1e3:.3f} ms after {got} - compare the arrival times exactly as they are (requests "
                    "added in one loop arrive microseconds apart), not rounded to milliseconds or seconds"
                )
        return fallback(expected, got, state)

    return hint


@differential(
    VICTIM,
    _random_victim_case(),
    examples=150,
    describe=_describe_victim_case,
    draws="1-8 running requests in an order other than their arrival, distinct perf_counter arrival times "
    "(microseconds to 10 hours apart), priorities -2..3 (half the time all equal), engine ids; priority (2/3) or fcfs",
)
def _(pick_victim: Any, case: Any, rec: Any) -> None:
    running = _victim_requests(case)
    policy = case["policy"]
    before = [(r.request_id, r.priority, r.arrival_time) for r in running]
    members = list(running)
    rec.step(_describe_victim_case(case))
    got = pick_victim(running, policy)
    match = next((r for r in members if r is got), None)
    chosen = match.request_id if match is not None else f"<not one of the running requests: {type(got).__name__}>"
    rec.state(
        {
            "policy": policy,
            "chosen": chosen,
            "requests": [{"request_id": i, "priority": p, "arrival_time": a} for i, p, a in before],
        }
    )
    rec.observe("victim", chosen, hint=_random_victim_hint(policy))
    rec.observe(
        "running list after the call",
        [r.request_id if any(r is m for m in members) else "<another object>" for r in running],
        hint="pick_victim only chooses; the scheduler removes the victim itself",
    )
    rec.observe(
        "(request_id, priority, arrival_time) of the running requests after the call",
        [[r.request_id, r.priority, r.arrival_time] for r in members] == [list(b) for b in before],
        hint="pick_victim only reads the requests: leave their priority and arrival_time as they are",
    )


def _crossover_value_case() -> Any:

    models = sorted({(m.num_params, m.kv_bytes_per_token) for m in MODELS.values()})
    pcie = sorted({g.pcie_bandwidth for g in GPUS.values()})
    model = st.one_of(
        st.sampled_from(models).map(list),
        st.tuples(st.integers(10**8, 2 * 10**12), st.integers(4_096, 4_000_000)).map(list),
    )
    # the kit's GPUs, tensor parallelism (n links), PCIe 3-6 in bytes/s; ints as the kit's specs hold them
    link = st.one_of(
        st.tuples(st.sampled_from(pcie), st.sampled_from([1, 2, 4, 8])).map(lambda t: t[0] * t[1]),
        st.integers(8 * 10**9, 256 * 10**9),
        st.integers(8_000, 256_000).map(lambda mb: mb * 1e6),
    )
    return st.fixed_dictionaries(
        {"models": st.lists(model, min_size=1, max_size=2), "links": st.lists(link, min_size=1, max_size=3)}
    )


#: every crossover the reference returned in this process (the judge's): a memo hands one of them back
_REFERENCE_CROSSOVERS: list[float] = []


def _random_cross_hint(expected: Any, got: Any, state: Any) -> str | None:
    """:func:`_cross_hint`, first naming a value an earlier call returned (a cache keyed by part of the inputs)."""
    if isinstance(got, (int, float)) and not isinstance(got, bool) and isinstance(expected, (int, float)):
        for value in _REFERENCE_CROSSOVERS:
            if value and abs(got / value - 1) < 1e-12 and abs(expected / value - 1) > 1e-9:
                return (
                    f"that is the crossover of an earlier call ({value:.6e}): the result depends on all three "
                    "inputs - compute it on every call (a cache keyed by only some of them hands back another "
                    "GPU's or model's value)"
                )
    return _cross_hint(expected, got, state)


@differential(
    CROSS,
    _crossover_value_case(),
    examples=40,
    draws="a sweep: 1-2 models (the kit's, or 1e8-2e12 params with 4 KiB-4 MB of KV per token) times 1-3 host "
    "links (the kit's GPUs' PCIe times 1-8 links, or 8-256 GB/s, ints or floats), every pair in turn",
)
def _(fn: Any, case: Any, rec: Any) -> None:
    reference = fn is CROSS.get_reference()
    for params, kv in case["models"]:
        for pcie in case["links"]:
            rec.step(f"crossover_flops_per_s({params:,}, {kv:,}, {pcie:,})")
            got = fn(params, kv, pcie)
            rec.observe("FLOP/s at the crossover", got, tol=1e-9, hint=_random_cross_hint)
            rec.observe(
                "type of the returned value",
                "a number" if type(got) in (int, float) or (isinstance(got, float)) else type(got).__name__,
                hint="return a plain Python number (float or int): FLOP/s",
            )
            if reference:
                _REFERENCE_CROSSOVERS.append(float(got))
