"""Gantt (batch composition), queues and KV-usage renderers over per-step data."""

from pagedlab.engine.step_stats import StepStats
from pagedlab.viz import batch_steps, render_batch_gantt, render_kv_usage, render_queues
from pagedlab.viz._svg import COLORS


def _stats():
    return [
        StepStats(0, [("0", 30, True), ("1", 20, True)], 50, 0, [], 4, 12, 0.1, running=2, waiting=1),
        StepStats(1, [("0", 1, False), ("1", 1, False), ("2", 16, True)], 16, 2, [], 6, 10, 0.1, running=3),
        StepStats(2, [("0", 1, False), ("2", 9, True)], 9, 1, ["1"], 5, 11, 0.1, running=2, waiting=1),
        StepStats(3, [("2", 1, False)], 0, 1, [], 2, 14, 0.1, running=1, waiting=1),
    ]


def _cells(svg):
    return [
        (c.get("data-step"), c.get("data-req"), c.get("data-kind"), c.get("data-tokens"))
        for c in svg.all("rect", "pl-cell")
    ]


def test_gantt_cells_match_the_schedule(parse_svg):
    svg = parse_svg(render_batch_gantt(_stats(), max_num_batched_tokens=64))
    cells = _cells(svg)
    assert len(cells) == 2 + 3 + 2 + 1
    assert ("0", "0", "prefill", "30") in cells and ("1", "0", "decode", "1") in cells
    assert ("2", "2", "prefill", "9") in cells
    pre = svg.one("g", "pl-preempt")
    assert (pre.get("data-req"), pre.get("data-step")) == ("1", "2")
    assert svg.one("line", "pl-budget") is not None
    fills = {c.get("data-kind"): c.get("fill") for c in svg.all("rect", "pl-cell")}
    assert fills == {"prefill": COLORS["prefill"], "decode": COLORS["decode"]}
    bars = {b.get("data-step"): (b.get("data-prefill"), b.get("data-decode")) for b in svg.all("rect", "pl-tokens")}
    assert bars == {"0": ("50", "0"), "1": ("16", "2"), "2": ("9", "1"), "3": ("0", "1")}
    assert svg.root.get("data-num-requests") == "3"


def test_gantt_upto_draws_only_the_past(parse_svg):
    first = parse_svg(render_batch_gantt(_stats(), 0))
    assert first.root.get("data-step") == "0"
    assert {c[0] for c in _cells(first)} == {"0"}
    last = parse_svg(render_batch_gantt(_stats(), 3))
    assert first.text != last.text and last.root.get("data-step") == "3"
    assert first.width == last.width  # frames line up


def test_gantt_from_tracer_events(parse_svg):
    events = [
        {"step": 0, "kind": "init", "num_gpu_blocks": 8},
        {"step": 0, "kind": "schedule", "req": "0", "start": 0, "num_tokens": 12, "prefill": True},
        {"step": 1, "kind": "schedule", "req": "0", "start": 12, "num_tokens": 1, "prefill": False},
        {"step": 1, "kind": "preempt", "req": "0", "mode": "recompute"},
        {"step": 2, "kind": "finish", "req": "0", "reason": "length"},
    ]
    steps = batch_steps(events)
    assert [s["step"] for s in steps] == [0, 1, 2]
    assert steps[1]["preempted"] == ["0"] and steps[2]["finished"] == ["0"]
    svg = parse_svg(render_batch_gantt(events))
    assert [c[2] for c in _cells(svg)] == ["prefill", "decode"]


def test_gantt_empty_input(parse_svg):
    svg = parse_svg(render_batch_gantt([]))
    assert svg.all("rect", "pl-cell") == []


def test_queues_from_step_stats_counts(parse_svg):
    svg = parse_svg(render_queues(_stats(), 2))
    q = {g.get("data-queue"): g.get("data-count") for g in svg.all("g", "pl-queue")}
    assert q == {"waiting": "1", "running": "2", "swapped": "0"}
    assert len(svg.all("polyline", "pl-series")) == 3
    assert any("preempted 1" in t for t in svg.texts())


def test_queues_with_request_lists(parse_svg):
    hist = [
        {"step": 0, "waiting": ["2", "3"], "running": ["0", "1"], "swapped": []},
        {"step": 1, "waiting": ["3"], "running": ["0", "2"], "swapped": ["1"]},
    ]
    svg = parse_svg(render_queues(hist, 1))
    chips = {
        g.get("data-queue"): [c.get("data-req") for c in g.iter() if c.get("class") == "pl-chip"]
        for g in svg.all("g", "pl-queue")
    }
    assert chips == {"waiting": ["3"], "running": ["0", "2"], "swapped": ["1"]}
    assert parse_svg(render_queues(hist, 0)).text != svg.text


def test_kv_usage_bars_and_strip(parse_svg):
    svg = parse_svg(render_kv_usage(_stats(), 1))
    bars = [(b.get("data-step"), b.get("data-used")) for b in svg.all("rect", "pl-bar")]
    assert bars == [("0", "4"), ("1", "6")]
    strip = svg.all("rect", "pl-strip-cell")
    assert len(strip) == 16 and sum(c.get("data-used") == "1" for c in strip) == 6
    assert (svg.root.get("data-step"), svg.root.get("data-used"), svg.root.get("data-free")) == ("1", "6", "10")
    chips = [c.get("data-req") for c in svg.all("rect", "pl-chip")]
    assert chips == ["0", "1", "2"]
    last = parse_svg(render_kv_usage(_stats()))
    assert len(last.all("rect", "pl-bar")) == 4 and last.root.get("data-step") == "3"


def test_kv_usage_accepts_dicts(parse_svg):
    stats = [{"step": 0, "scheduled": [], "kv_blocks_used": 0, "kv_blocks_free": 4}]
    svg = parse_svg(render_kv_usage(stats, num_gpu_blocks=4))
    assert svg.root.get("data-free") == "4"


def test_empty_histories_render(parse_svg):
    assert parse_svg(render_queues([])).root.get("data-step") == "0"
    assert parse_svg(render_kv_usage([], num_gpu_blocks=8)).all("rect", "pl-bar") == []


def test_empty_step_is_a_fresh_full_row_and_batch_steps_uses_it() -> None:
    from pagedlab.viz import empty_step

    a, b = empty_step(3), empty_step(3)
    assert a == {
        "step": 3,
        "scheduled": [],
        "preempted": [],
        "finished": [],
        "running": None,
        "waiting": None,
        "swapped": None,
        "kv_blocks_used": None,
        "kv_blocks_free": None,
    }
    a["scheduled"].append(("r", 1, True))
    assert b["scheduled"] == [] and empty_step(3)["scheduled"] == []  # no list shared between calls
    # An event stream's steps carry the same keys, with None counts.
    rows = batch_steps([{"kind": "preempt", "step": 2, "req": "x"}, {"kind": "finish", "step": 2, "req": "y"}])
    assert rows == [dict(empty_step(2), preempted=["x"], finished=["y"])]


def test_exercise_history_steps_keeps_preemptions_and_draws_an_empty_run() -> None:
    from pagedlab.course.exercises.lab04 import history_steps
    from pagedlab.viz import empty_step

    history = [
        {"step": 0, "scheduled": [["a", 4, True]], "preempted": [], "finished": []},
        {"step": 1, "scheduled": [["b", 1, False]], "preempted": ["a"]},
        {"step": 2, "scheduled": []},
    ]
    assert history_steps(history) == [
        dict(empty_step(0), scheduled=[("a", 4, True)]),
        dict(empty_step(1), scheduled=[("b", 1, False)], preempted=["a"]),
        empty_step(2),
    ]
    assert history_steps([]) == [empty_step(0)]


def test_kv_usage_says_the_batch_was_the_step_and_the_queues_are_after_it(parse_svg):
    """Issue 23: lab 09's frame showed "running (3)" beside "4 requests in the batch" with nothing to say
    that step_stats records the queues after the step (a request that finished in it left running)."""
    stats = [
        StepStats(
            0, [(r, 1, False) for r in "0123"], 0, 4, [], 4, 12, 0.1, running=3, waiting=1
        )  # "3" finished in this step
    ]
    summary = next(
        t for t in parse_svg(render_kv_usage(stats)).texts() if "blocks in use" in t and "step by step" not in t
    )
    assert summary.startswith("after step 0: 4 of 16 blocks in use")
    assert "4 requests in its batch, 3 still running, 1 waiting" in summary
    svg = parse_svg(render_queues(stats))
    assert {g.get("data-queue"): g.get("data-count") for g in svg.all("g", "pl-queue")}["running"] == "3"
