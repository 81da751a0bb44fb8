"""Interrupt and fault safety of ``LLMEngine.step()``, tested by injection (issue 16, case 2).

A ``KeyboardInterrupt`` or a ``RuntimeError`` is raised at each internal point of a step:
scheduling, admission (after blocks were allocated), preemption (recompute: the victim already out
of ``running`` and its blocks freed, not yet re-queued; swap: blocks already on the CPU), swap-in
(blocks back on the GPU, request not yet running), block moves, the forward pass, sampling, fork
(child sharing the parent's blocks, not yet running), output update (token appended; request out
of ``running`` but its blocks not yet freed), stop checks (EOS/length and stop strings) and the
finished-request bookkeeping. Each time: the very exception object propagates, the engine is
idle with every block returned and its invariants intact, and serving the same prompts again
gives exactly the tokens of an undisturbed run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import pagedlab.engine.model_runner as model_runner_mod
from pagedlab import LLM, LLMEngine
from pagedlab.outputs import RequestOutput
from tests.robust.helpers import (
    assert_idle,
    check_engine,
    greedy,
    run_to_completion,
    tiny_engine,
    tiny_llama,
)

PROMPTS = [[5, 17, 3, 88, 41], [9, 9, 12, 60], [70, 2, 33]]
N = [2, 1, 1]
MAX_TOKENS = 6
SETTINGS = {
    "recompute": {"block_size": 2, "num_gpu_blocks": 12, "max_num_batched_tokens": 16, "enable_prefix_caching": True},
    "swap": {
        "block_size": 2,
        "num_gpu_blocks": 12,
        "max_num_batched_tokens": 16,
        "preemption_mode": "swap",
        "num_cpu_blocks": 24,
    },
}


def _submit(engine: LLMEngine) -> list[str]:
    return [engine.add_request(None, {"prompt_token_ids": p}, greedy(MAX_TOKENS, n)) for p, n in zip(PROMPTS, N)]


def _tokens(outs: dict[str, RequestOutput] | list[RequestOutput], ids: list[str] | None = None) -> list[Any]:
    if isinstance(outs, list):
        return [[c.token_ids for c in o.outputs] for o in outs]
    return [[c.token_ids for c in outs[i].outputs] for i in (ids or [])]


def _reference(mode: str) -> list[Any]:
    engine = tiny_engine(**SETTINGS[mode])
    ids = _submit(engine)
    return _tokens(run_to_completion(engine, 200), ids)


class Injector:
    """Replace ``obj.name`` by a wrapper that raises ``exc`` on the first call (before or after
    the real call); ``fired`` tells whether it did."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, obj: Any, name: str, when: str, exc: BaseException) -> None:
        self.fired = False
        real: Callable[..., Any] = getattr(obj, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self.fired:
                return real(*args, **kwargs)
            if when == "before":
                self.fired = True
                raise exc
            real(*args, **kwargs)
            self.fired = True
            raise exc

        monkeypatch.setattr(obj, name, wrapper)


# (label, preemption mode, target (engine -> object), attribute, before/after the real call)
POINTS: list[tuple[str, str, Callable[[LLMEngine], Any], str, str]] = [
    ("schedule", "recompute", lambda e: e.scheduler, "schedule", "before"),
    ("admission after allocation", "recompute", lambda e: e.kv_cache_manager, "allocate_slots", "after"),
    (
        "preempt: victim out of running, not re-queued",
        "recompute",
        lambda e: e.scheduler.waiting,
        "prepend_request",
        "before",
    ),
    ("preempt: victim's blocks freed", "recompute", lambda e: e.scheduler, "_preempt", "after"),
    ("swap out: blocks on the CPU, not in swapped", "swap", lambda e: e.kv_cache_manager, "swap_out", "after"),
    ("swap in: blocks on the GPU, not running", "swap", lambda e: e.kv_cache_manager, "swap_in", "after"),
    ("block moves", "swap", lambda e: e.model_runner, "apply_block_moves", "before"),
    ("forward", "recompute", lambda e: e.model_runner.model, "forward", "before"),
    ("forward done, before sampling", "recompute", lambda e: e.model_runner, "forward", "after"),
    ("sampling", "recompute", lambda e: model_runner_mod, "sample", "before"),
    ("fork: child shares blocks, not running", "recompute", lambda e: e.kv_cache_manager, "fork", "after"),
    ("fork: child running", "recompute", lambda e: e.scheduler, "fork_request", "after"),
    ("output update: token appended", "recompute", lambda e: e.scheduler, "_check_stop", "before"),
    ("output update: finished, blocks not freed", "recompute", lambda e: e.scheduler, "_free", "before"),
    ("stop strings", "recompute", lambda e: e.output_processor, "check_stop_strings", "before"),
    ("finished bookkeeping", "recompute", lambda e: e, "_on_finished", "before"),
]


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, RuntimeError])
@pytest.mark.parametrize("label, mode, target, name, when", POINTS, ids=[p[0] for p in POINTS])
def test_fault_in_step_leaves_engine_consistent(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    exc_type: type[BaseException],
    label: str,
    mode: str,
    target: Callable[[LLMEngine], Any],
    name: str,
    when: str,
) -> None:
    ref = _reference(mode)
    engine = tiny_engine(**SETTINGS[mode])
    _submit(engine)
    exc = exc_type(f"injected at {label}")
    with monkeypatch.context() as m:
        inj = Injector(m, target(engine), name, when, exc)
        with pytest.raises(exc_type) as raised:
            run_to_completion(engine, 200)
        assert inj.fired, f"the injection point {label!r} was never reached"
    assert raised.value is exc, "the original exception must propagate unchanged"
    assert "rebuilding" not in caplog.text, "blocks must come back through their holders, not a pool rebuild"
    assert_idle(engine)
    ids = _submit(engine)
    assert _tokens(run_to_completion(engine, 200), ids) == ref
    assert_idle(engine)


@pytest.mark.parametrize(
    "label, mode, target, name, when",
    [
        p
        for p in POINTS
        if p[0]
        in ("preempt: victim out of running, not re-queued", "swap in: blocks on the GPU, not running", "forward")
    ],
)
def test_ctrl_c_in_generate_then_generate_again(
    monkeypatch: pytest.MonkeyPatch, label: str, mode: str, target: Callable[[LLMEngine], Any], name: str, when: str
) -> None:
    llm = LLM(tiny_llama(), attention_backend="torch", device="cpu", max_model_len=128, **SETTINGS[mode])
    prompts = [{"prompt_token_ids": p} for p in PROMPTS]
    params = [greedy(MAX_TOKENS, n) for n in N]
    ref = _tokens(llm.generate(prompts, params))
    exc = KeyboardInterrupt()
    with monkeypatch.context() as m:
        inj = Injector(m, target(llm.llm_engine), name, when, exc)
        with pytest.raises(KeyboardInterrupt) as raised:
            llm.generate(prompts, params)
        assert inj.fired
    assert raised.value is exc
    assert_idle(llm.llm_engine)
    assert _tokens(llm.generate(prompts, params)) == ref
    check_engine(llm.llm_engine)


def test_interrupt_inside_a_block_pool_primitive_rebuilds_the_pools(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Ctrl-C between popping blocks off the free queue and recording them anywhere: no holder can
    return them, so the recovery rebuilds the (then idle) pools rather than leak them."""
    ref = _reference("recompute")
    engine = tiny_engine(**SETTINGS["recompute"])
    _submit(engine)
    queue = engine.kv_cache_manager.block_pool.free_block_queue
    real = queue.popleft_n

    def pop_then_interrupt(n: int) -> Any:
        real(n)  # the blocks leave the queue and are lost
        raise KeyboardInterrupt

    monkeypatch.setattr(queue, "popleft_n", pop_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        run_to_completion(engine, 200)
    assert "rebuilding the KV block pools" in caplog.text
    assert_idle(engine)
    ids = _submit(engine)
    assert _tokens(run_to_completion(engine, 200), ids) == ref


def test_ctrl_c_in_beam_search_frees_every_beam(monkeypatch: pytest.MonkeyPatch) -> None:
    from pagedlab.engine.beam_search import BeamSearchParams

    llm = LLM(
        tiny_llama(),
        attention_backend="torch",
        device="cpu",
        max_model_len=128,
        block_size=2,
        num_gpu_blocks=24,
        enable_prefix_caching=True,
    )
    llm.llm_engine.tokenizer = _Decoder()
    params = BeamSearchParams(beam_width=3, max_tokens=5, ignore_eos=True)
    ref = [s.tokens for s in llm.beam_search([PROMPTS[0]], params)[0].sequences]
    calls = []
    runner = llm.llm_engine.model_runner
    real = runner.forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 3:  # after two forks, mid-search
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "forward", forward)
    with pytest.raises(KeyboardInterrupt):
        llm.beam_search([PROMPTS[0]], params)
    monkeypatch.undo()
    assert_idle(llm.llm_engine)
    assert [s.tokens for s in llm.beam_search([PROMPTS[0]], params)[0].sequences] == ref


class _Decoder:
    """Stands in for a tokenizer: beam_search only decodes the finished beams."""

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return " ".join(map(str, ids))
