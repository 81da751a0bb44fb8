"""Issue 16's probes of bad input, settings and memory: each ends in a clear error with nothing lost.

Every test here reproduces a case from the issue's "Why" and failed on the code before the fix
(see the docstring of each). The engine must be unchanged after a refused call (nothing queued,
no block held) and keep serving.
"""

from __future__ import annotations

import pytest

from pagedlab import LLM, SamplingParams
from pagedlab.errors import ConfigError, InvalidRequestError
from tests.robust.helpers import (
    assert_idle,
    greedy,
    run_to_completion,
    tiny_engine,
    tiny_llama,
)


def _tiny_llm(**kw: object) -> LLM:
    args: dict[str, object] = {
        "block_size": 4,
        "num_gpu_blocks": 32,
        "max_model_len": 128,
        "attention_backend": "torch",
        "device": "cpu",
    }
    args.update(kw)
    return LLM(tiny_llama(), **args)


# --- 1. never spin ------------------------------------------------------------------------------
def test_prompt_longer_than_budget_without_chunking_is_refused_at_submission() -> None:
    """Was: accepted, then empty steps forever (issue case 1)."""
    engine = tiny_engine(max_num_batched_tokens=4, enable_chunked_prefill=False)
    with pytest.raises(InvalidRequestError, match=r"5 tokens.*max_num_batched_tokens=4.*chunked prefill"):
        engine.add_request(None, {"prompt_token_ids": [1, 2, 3, 4, 5]}, greedy(3))
    assert_idle(engine)
    engine.add_request(None, {"prompt_token_ids": [1, 2, 3, 4]}, greedy(3))  # exactly the budget: runs
    outs = run_to_completion(engine, 10)
    assert [len(o.outputs[0].token_ids) for o in outs.values()] == [3]
    assert_idle(engine)


@pytest.mark.model
@pytest.mark.timeout(300)
def test_issue_example_on_smollm2_is_refused_not_spun() -> None:
    """The issue's own reproduction (the old code spun forever: the timeout turns that into a failure)."""
    llm = LLM(max_num_batched_tokens=4, enable_chunked_prefill=False, num_gpu_blocks=16)
    with pytest.raises(InvalidRequestError, match="enable_chunked_prefill=False"):
        llm.generate("The capital of France is", SamplingParams(temperature=0, max_tokens=4))
    assert_idle(llm.llm_engine)
    out = llm.generate("Hi", SamplingParams(temperature=0, max_tokens=3))  # 1 token: fits the budget
    assert len(out[0].outputs[0].token_ids) == 3
    assert_idle(llm.llm_engine)


def test_static_scheduling_ignores_the_budget_so_accepts_long_prompts() -> None:
    engine = tiny_engine(max_num_batched_tokens=4, enable_chunked_prefill=False, scheduling="static")
    engine.add_request(None, {"prompt_token_ids": [1, 2, 3, 4, 5, 6]}, greedy(2))
    assert len(run_to_completion(engine, 10)) == 1


def test_preempted_request_grown_past_budget_is_aborted_not_spun(caplog: pytest.LogCaptureFixture) -> None:
    """Was: the recompute-preempted request (6 prompt + generated tokens > 8) waited forever."""
    engine = tiny_engine(block_size=4, num_gpu_blocks=6, max_num_batched_tokens=8, enable_chunked_prefill=False)
    for i in range(3):
        engine.add_request(str(i), {"prompt_token_ids": [1 + i, 2, 3, 4, 5, 6]}, greedy(10))
    outs = run_to_completion(engine, 100)
    reasons = {rid: o.outputs[0].finish_reason for rid, o in outs.items()}
    assert sorted(outs) == ["0", "1", "2"]
    aborted = [rid for rid, r in reasons.items() if r == "abort"]
    assert aborted and all(reasons[r] == "length" for r in outs if r not in aborted)
    for rid in aborted:
        assert outs[rid].pagedlab_metrics.num_preemptions >= 1
        assert f"request {rid} aborted" in caplog.text and "max_num_batched_tokens=8" in caplog.text
    assert_idle(engine)


# --- 3. all or nothing ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "priority, match",
    [
        ([0, "high"], "priority must be an int"),
        ([0, True], "priority must be an int"),
        ([0, None], "priority must be an int"),
        ([0], "1 priorities for 2 prompts"),
        ("3", "an int or a list of ints"),  # one int is vLLM 0.32's "the same for every prompt"
        (True, "an int or a list of ints"),
    ],
)
def test_bad_priority_queues_nothing(priority: object, match: str) -> None:
    """Was: the first prompt stayed queued and ran silently inside the next call."""
    llm = _tiny_llm(policy="priority")
    with pytest.raises(InvalidRequestError, match=match):
        llm.generate([[1, 2, 3], [4, 5, 6]], greedy(2), priority=priority)  # type: ignore[arg-type]
    assert_idle(llm.llm_engine)
    outs = llm.generate([[7, 8]], greedy(2))
    assert len(outs) == 1 and outs[0].prompt_token_ids == [7, 8]


def test_bad_seed_in_a_later_prompt_queues_nothing() -> None:
    """Was: torch's ``manual_seed`` overflow raised after the first prompt was queued."""
    llm = _tiny_llm()
    with pytest.raises(InvalidRequestError, match="seed"):
        bad = SamplingParams(temperature=1.0, max_tokens=2, seed=2**64 - 1, n=2)  # seed + 1 overflows
        llm.generate([[1, 2, 3], [4, 5, 6]], [greedy(2), bad])
    assert_idle(llm.llm_engine)


def test_failure_while_queueing_rolls_back_earlier_prompts(monkeypatch: pytest.MonkeyPatch) -> None:
    llm = _tiny_llm()
    engine = llm.llm_engine
    real, calls = engine.add_request, []

    def flaky(*args: object, **kwargs: object) -> str:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "add_request", flaky)
    with pytest.raises(KeyboardInterrupt):
        llm.generate([[1, 2, 3], [4, 5, 6]], greedy(2))
    assert_idle(engine)


# --- 4. validation gaps ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "prompt, match",
    [
        ({"prompt_token_ids": [1, 2.0, 3]}, "item 1 is float"),
        ({"prompt_token_ids": [1, "2"]}, "item 1 is str"),
        ({"prompt_token_ids": [None]}, "item 0 is NoneType"),
        ({"prompt_token_ids": [1, True]}, "item 1 is bool"),
        ({"prompt_token_ids": 5}, "must be a list of ints"),
        ({"prompt_token_ids": [1, 2], "prompt": 7}, '"prompt" must be a str'),
        ({"text": "hi"}, 'needs "prompt_token_ids"'),
        ([1, 2.5], "item 1 is float"),
    ],
)
def test_dict_prompt_token_ids_of_wrong_type(prompt: object, match: str) -> None:
    """Was: floats -> a torch error mid-step that aborted the whole batch; str/None -> bare TypeError."""
    llm = _tiny_llm()
    with pytest.raises(InvalidRequestError, match=match):
        llm.generate([[1, 2, 3], prompt], greedy(2))
    assert_idle(llm.llm_engine)


def test_numpy_integer_token_ids_are_accepted() -> None:
    np = pytest.importorskip("numpy")
    llm = _tiny_llm()
    ref = llm.generate([[1, 2, 3]], greedy(3))[0].outputs[0].token_ids
    got = llm.generate({"prompt_token_ids": list(np.array([1, 2, 3]))}, greedy(3))[0]
    assert got.prompt_token_ids == [1, 2, 3] and got.outputs[0].token_ids == ref


@pytest.mark.parametrize(
    "messages, match",
    [
        ([{"role": "user", "content": None}], "content must be a str, got NoneType"),
        ([{"role": None, "content": "hi"}], "role must be a str"),
        ([{"role": "user"}], 'must be a dict with "role" and "content"'),
        ([[]], "non-empty list"),
        ("hello", "conversation"),
    ],
)
def test_chat_message_content_none(messages: object, match: str) -> None:
    """Was: a jinja error from the chat template."""
    llm = _tiny_llm()
    with pytest.raises(InvalidRequestError, match=match):
        llm.chat(messages)  # type: ignore[arg-type]
    assert_idle(llm.llm_engine)


def test_chat_without_tokenizer_is_a_clear_error() -> None:
    with pytest.raises(InvalidRequestError, match="tokenizer"):
        _tiny_llm().chat([{"role": "user", "content": "hi"}])


def test_beam_search_validates_every_prompt_before_searching() -> None:
    from pagedlab.engine.beam_search import BeamSearchParams

    llm = _tiny_llm()
    with pytest.raises(InvalidRequestError, match="item 0 is float"):
        llm.beam_search([[1, 2, 3], [1.5]], BeamSearchParams(beam_width=2, max_tokens=2))
    with pytest.raises(InvalidRequestError, match="BeamSearchParams"):
        llm.beam_search([[1, 2, 3]], {"beam_width": 2})
    assert_idle(llm.llm_engine)
    few = _tiny_llm(max_num_seqs=4)  # a width over max_num_seqs is said in beams, not in n completions
    with pytest.raises(InvalidRequestError, match="^beam_width=5 beams run as 5 sequences but max_num_seqs=4"):
        few.beam_search([[1, 2, 3]], BeamSearchParams(beam_width=5, max_tokens=2))
    assert_idle(few.llm_engine)


# --- 4/5. resources up front ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw, knob",
    [
        ({"block_size": 10**6, "num_gpu_blocks": 512}, "num_gpu_blocks"),
        ({"num_gpu_blocks": 10**10}, "num_gpu_blocks"),
        ({"preemption_mode": "swap", "num_cpu_blocks": 10**10}, "num_gpu_blocks \\+ num_cpu_blocks"),
    ],
)
def test_kv_pool_larger_than_memory_is_refused_with_the_number(kw: dict[str, int], knob: str) -> None:
    """Was: ``LLM(block_size=10**6)`` tried to allocate hundreds of GB."""
    with pytest.raises(
        ConfigError,
        match=rf"needs [\d.]+ GiB on cpu .* only [\d.]+ GiB is available\. "
        rf"Lower {knob} to at most \d+",
    ):
        _tiny_llm(**kw)


def test_kv_check_counts_bytes_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    from pagedlab import config

    per_block = 4 * tiny_llama().config.kv_bytes_per_token(4)  # block_size 4
    monkeypatch.setattr(config, "available_memory_bytes", lambda device="cpu": 32 * per_block)
    _tiny_llm(num_gpu_blocks=32)  # exactly fits
    with pytest.raises(ConfigError, match="at most 32"):
        _tiny_llm(num_gpu_blocks=33)
    with pytest.raises(ConfigError, match="num_gpu_blocks \\+ num_cpu_blocks=33 "):
        _tiny_llm(num_gpu_blocks=30, num_cpu_blocks=3, preemption_mode="swap")


def test_simulator_refuses_an_unchunkable_prompt_instead_of_stalling() -> None:
    """Was: ``RuntimeError: scheduler stalled`` (the shared scheduler never admitted it)."""
    from pagedlab.config import SchedulerConfig
    from pagedlab.sim import TraceRequest, simulate

    sc = SchedulerConfig(enable_chunked_prefill=False, max_num_batched_tokens=50, max_model_len=200)
    res = simulate([TraceRequest(0.0, 100, 5), TraceRequest(0.0, 10, 5), TraceRequest(0.1, 50, 3)], sc)
    assert [i for i, _ in res.rejected] == [0] and "max_num_batched_tokens=50" in res.rejected[0][1]
    assert sorted(r.output_len for r in res.requests) == [3, 5]


def test_kv_check_on_cuda_checks_device_pool_and_swap_space_separately(monkeypatch: pytest.MonkeyPatch) -> None:
    from pagedlab import config
    from pagedlab.config import CacheConfig, check_kv_cache_fits

    per_block = 4 * 512
    free = {"cuda": 10 * per_block, "cpu": 4 * per_block}
    monkeypatch.setattr(
        config, "available_memory_bytes", lambda device="cpu": free["cuda" if device.startswith("cuda") else "cpu"]
    )
    check_kv_cache_fits(CacheConfig(block_size=4, num_gpu_blocks=10, num_cpu_blocks=4), 512, "cuda:0")
    with pytest.raises(ConfigError, match="on cuda:0 .*Lower num_gpu_blocks to at most 10"):
        check_kv_cache_fits(CacheConfig(block_size=4, num_gpu_blocks=11, num_cpu_blocks=4), 512, "cuda:0")
    with pytest.raises(ConfigError, match="on cpu .*Lower num_cpu_blocks to at most 4"):
        check_kv_cache_fits(CacheConfig(block_size=4, num_gpu_blocks=10, num_cpu_blocks=5), 512, "cuda:0")
