"""Bad input is rejected at submission with a specific error, and the engine keeps serving."""

import pytest

pytestmark = pytest.mark.model

from pagedlab import LLM, LLMEngine, SamplingParams
from pagedlab.errors import ConfigError, InvalidRequestError, ModelFileCorruptError, ModelNotFoundError


@pytest.fixture(scope="module")
def engine():
    return LLMEngine(num_gpu_blocks=64, max_model_len=512)


def _serve_one(engine, prompt=(1, 9690, 198, 2683)):
    engine.add_request(None, {"prompt_token_ids": list(prompt)}, SamplingParams(temperature=0, max_tokens=3))
    outs = []
    while engine.has_unfinished_requests():
        outs += [o for o in engine.step() if o.finished]
    assert len(outs) == 1 and len(outs[0].outputs[0].token_ids) == 3
    assert engine.kv_cache_manager.num_free_blocks == 64


@pytest.mark.parametrize(
    "prompt, match",
    [
        ("", "empty"),
        ({"prompt_token_ids": []}, "empty"),
        ({"prompt_token_ids": [5] * 512}, "max_model_len"),
        ({"prompt_token_ids": [1, 99999]}, "vocabulary"),
        (3.5, "prompt must be"),
    ],
)
def test_bad_prompts_rejected_and_engine_keeps_serving(engine, prompt, match):
    with pytest.raises(InvalidRequestError, match=match):
        engine.add_request(None, prompt, SamplingParams(max_tokens=4))
    assert not engine.has_unfinished_requests()
    _serve_one(engine)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": -3}, "max_tokens"),
        ({"n": 0}, "n must be"),
        ({"temperature": -1.0}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
    ],
)
def test_bad_sampling_params(kwargs, match):
    with pytest.raises(InvalidRequestError, match=match):
        SamplingParams(**kwargs)


def test_request_larger_than_the_pool_is_rejected_not_spinning():
    small = LLMEngine(num_gpu_blocks=8, max_model_len=512)  # 8 blocks x 16 = 128 tokens in all
    with pytest.raises(InvalidRequestError, match="num_gpu_blocks"):
        small.add_request(None, {"prompt_token_ids": [5] * 100}, SamplingParams(max_tokens=100))
    with pytest.raises(InvalidRequestError, match="num_gpu_blocks"):  # n=2 needs twice the blocks
        small.add_request(None, {"prompt_token_ids": [5] * 60}, SamplingParams(max_tokens=20, n=2))
    assert not small.has_unfinished_requests()
    small.add_request(None, {"prompt_token_ids": [5] * 100}, SamplingParams(max_tokens=20, ignore_eos=True))
    outs = []
    while small.has_unfinished_requests():
        outs += [o for o in small.step() if o.finished]
    assert len(outs[0].outputs[0].token_ids) == 20


def test_duplicate_request_id_and_bad_priority(engine):
    engine.add_request("dup", {"prompt_token_ids": [1, 2, 3]}, SamplingParams(max_tokens=2))
    with pytest.raises(InvalidRequestError, match="already in use"):
        engine.add_request("dup", {"prompt_token_ids": [1, 2, 3]}, SamplingParams(max_tokens=2))
    with pytest.raises(InvalidRequestError, match="priority"):
        engine.add_request("p", {"prompt_token_ids": [1, 2, 3]}, SamplingParams(max_tokens=2), priority="high")
    engine.abort_request("dup")
    assert engine.kv_cache_manager.num_free_blocks == 64
    _serve_one(engine)


def test_generate_validates_all_prompts_before_queueing_any():
    llm = LLM(num_gpu_blocks=64, max_model_len=256)
    with pytest.raises(InvalidRequestError):
        llm.generate(["Hello", ""], SamplingParams(max_tokens=2))
    assert not llm.llm_engine.has_unfinished_requests()
    assert len(llm.generate(["Hello"], SamplingParams(max_tokens=2))[0].outputs[0].token_ids) == 2


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"block_size": 0}, "block_size"),
        ({"block_size": 2.5}, "block_size"),
        ({"num_gpu_blocks": 0}, "num_gpu_blocks"),
        ({"max_num_seqs": 0}, "max_num_seqs"),
        ({"max_num_batched_tokens": -1}, "max_num_batched_tokens"),
        ({"preemption_mode": "swap"}, "num_cpu_blocks"),
        ({"policy": "lifo"}, "policy"),
        # found by trying the kit as a new user: a str flag was truthy and silently meant True, a bad seed
        # raised torch's RuntimeError after the model had loaded
        ({"enable_prefix_caching": "yes"}, "enable_prefix_caching must be True or False, got str 'yes'"),
        ({"enable_chunked_prefill": "no"}, "enable_chunked_prefill must be True or False, got str 'no'"),
        ({"enable_chunked_prefill": 1}, "enable_chunked_prefill must be True or False, got int 1"),
        ({"seed": "x"}, "seed must be an int, got str 'x'"),
        ({"seed": 1.5}, "seed must be an int, got float 1.5"),
        ({"seed": True}, "seed must be an int, got bool True"),
        ({"seed": 2**64}, r"seed must be in \[-2\*\*63, 2\*\*64\), got 18446744073709551616"),
        ({"seed": -(2**63) - 1}, r"seed must be in \[-2\*\*63, 2\*\*64\), got -9223372036854775809"),
        ({"hash_seed": 1.5}, "hash_seed must be an int or None, got 1.5"),  # found by a fresh learner: accepted
        ({"hash_seed": "7"}, "hash_seed must be an int or None, got '7'"),
    ],
)
def test_bad_engine_config(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        LLMEngine(**kwargs)


@pytest.mark.parametrize("seed", [-(2**63), 2**64 - 1, 0])
def test_seed_bounds_accepted(seed):
    """The ends of the range torch's generator takes are accepted, and seed the engine's generator."""
    from tests.robust.helpers import tiny_engine

    assert tiny_engine(seed=seed).generator.initial_seed() == seed % 2**64


def test_negative_swap_space_is_refused_in_every_preemption_mode():
    """vLLM's ``swap_space`` in GiB: a negative one was refused only with preemption_mode='swap' and
    silently accepted otherwise."""
    from pagedlab.engine import arg_utils
    from pagedlab.engine.arg_utils import EngineArgs

    net = arg_utils._load(None)
    for mode in ("recompute", "swap"):
        with pytest.raises(ConfigError, match="swap_space must be >= 0 GiB, got -1"):
            EngineArgs(swap_space=-1, preemption_mode=mode)._num_cpu_blocks(net, 16)
    assert EngineArgs(swap_space=0, preemption_mode="swap")._num_cpu_blocks(net, 16) == 0  # boundary


def test_unknown_model_path(tmp_path):
    with pytest.raises(ModelNotFoundError, match="not found"):
        LLMEngine(str(tmp_path / "nope.gguf"))


def test_corrupt_gguf(tmp_path, monkeypatch):
    monkeypatch.setenv("PAGEDLAB_CACHE_DIR", str(tmp_path / "cache"))
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)
    with pytest.raises(ModelFileCorruptError, match="fetch-model"):
        LLMEngine(str(bad))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda llm: llm.generate(5), "prompts must be"),
        (lambda llm: llm.generate(["hi"], {"max_tokens": 2}), "sampling_params must be"),
        (lambda llm: llm.generate(["a", "b"], SamplingParams(max_tokens=2), priority=[0]), "priorities"),
        (lambda llm: llm.chat("hello"), "conversation"),
        (lambda llm: llm.chat([{"role": "user"}]), "conversation"),
    ],
)
def test_bad_generate_and_chat_arguments(call, match):
    llm = _small_llm()
    with pytest.raises(InvalidRequestError, match=match):
        call(llm)
    assert not llm.llm_engine.has_unfinished_requests()


def _small_llm():
    return LLM(num_gpu_blocks=64, max_model_len=256)


def test_engine_recovers_after_an_error_inside_a_step(monkeypatch):
    llm = _small_llm()
    runner = llm.llm_engine.model_runner
    real = runner.execute
    calls = {"n": 0}

    def flaky(*a, **k):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt  # e.g. the learner pressed Ctrl-C mid-generate
        return real(*a, **k)

    monkeypatch.setattr(runner, "execute", flaky)
    with pytest.raises(KeyboardInterrupt):
        llm.generate(["Hello there", "Tell me a joke"], SamplingParams(max_tokens=4))
    # The interrupted requests were aborted: nothing queued, every block back in the pool.
    assert not llm.llm_engine.has_unfinished_requests()
    assert llm.llm_engine.kv_cache_manager.num_free_blocks == 64
    out = llm.generate(["Hello there"], SamplingParams(max_tokens=3, ignore_eos=True))
    assert len(out[0].outputs[0].token_ids) == 3


def test_engine_constructor_checks_on_a_given_model():
    """The model-dependent checks of ``LLMEngine.__init__`` (tiny Llama: 256 positions)."""
    from tests.robust.helpers import tiny_engine

    assert tiny_engine(max_model_len=None).scheduler_config.max_model_len == 256  # min(2048, positions)
    assert tiny_engine(max_model_len=256).scheduler_config.max_model_len == 256  # boundary: allowed
    with pytest.raises(ConfigError, match="max_model_len=257 exceeds the model's 256 positions"):
        tiny_engine(max_model_len=257)
    with pytest.raises(ConfigError, match="scheduling must be 'continuous' or 'static', got 'lifo'"):
        tiny_engine(scheduling="lifo")
    with pytest.raises(ConfigError, match="attention_backend must be .*got 'cuda'"):
        tiny_engine(attention_backend="cuda")
    with pytest.raises(ConfigError, match="prefix_cache must be 'hash' or 'radix'"):
        tiny_engine(prefix_cache="lru")


@pytest.mark.parametrize("logprobs", [21, -1, 10**6])
def test_logprobs_above_max_logprobs_refused_and_engine_keeps_serving(engine, logprobs):
    """vLLM's ``max_logprobs`` (default 20) bounds ``SamplingParams.logprobs`` (-1: the whole vocabulary).
    Found by trying the kit: logprobs=10**6 was accepted and built 49,152 Logprob objects per token."""
    with pytest.raises(InvalidRequestError, match=f"logprobs={logprobs} asks for .* more than max_logprobs=20"):
        engine.add_request(None, {"prompt_token_ids": [1, 9690]}, SamplingParams(max_tokens=2, logprobs=logprobs))
    assert not engine.has_unfinished_requests()
    _serve_one(engine)


def test_logprobs_at_max_logprobs_and_a_raised_limit():
    from pagedlab.engine.arg_utils import EngineArgs
    from tests.robust.helpers import tiny_engine

    small = tiny_engine()  # default max_logprobs=20; the tiny model's vocabulary is 97
    assert small.max_logprobs == 20
    small.add_request(None, [1, 2, 3], SamplingParams(max_tokens=2, logprobs=20))  # the boundary is accepted
    whole = tiny_engine(max_logprobs=-1)  # -1: up to the whole vocabulary, as vLLM
    whole.add_request(None, [1, 2, 3], SamplingParams(max_tokens=2, logprobs=-1))
    for bad, match in ((-2, "max_logprobs must be -1 .* got -2"), ("5", "max_logprobs must be -1 .* got '5'")):
        with pytest.raises(ConfigError, match=match):
            tiny_engine(max_logprobs=bad)
    assert EngineArgs(max_logprobs=5).engine_kwargs()["max_logprobs"] == 5  # vLLM's name reaches the engine


def test_beam_search_with_huge_max_tokens_stops_at_max_model_len(engine):
    """Found by trying the kit: beam_search(max_tokens=10**6) ran past max_model_len and failed mid-search with
    the KV manager's ValueError; it now stops there, as generate() does (prompt 508 + 4 = max_model_len 512)."""
    from pagedlab.engine.beam_search import beam_search
    from pagedlab.sampling_params import BeamSearchParams

    prompt = [1, 9690, 198, 2683] * 127
    out = beam_search(engine, prompt, BeamSearchParams(beam_width=2, max_tokens=10**6))
    assert len(out.sequences) == 2 and max(len(s.tokens) for s in out.sequences) == 4, out.sequences
    assert not engine.has_unfinished_requests() and engine.kv_cache_manager.num_free_blocks == 64
    _serve_one(engine)


@pytest.mark.parametrize("arrival_time", ["now", float("nan"), float("inf"), True, [0.0]])
def test_a_bad_arrival_time_is_refused_at_submission_not_in_a_later_step(arrival_time):
    """Found by trying the kit as a learner: ``add_request(..., arrival_time="now")`` was accepted, and the
    next ``step()`` raised TypeError computing TTFT, which (all or nothing) aborted every other request in
    flight. Now it is refused at submission and the request already running finishes."""
    from tests.robust.helpers import assert_idle, greedy, run_to_completion, tiny_engine

    engine = tiny_engine()
    engine.add_request("ok", [1, 2, 3], greedy(4))
    with pytest.raises(InvalidRequestError, match="arrival_time must be None or a finite number of seconds"):
        engine.add_request("bad", [1, 2, 3], greedy(4), arrival_time=arrival_time)
    assert list(engine.scheduler.requests) == ["ok"]
    outs = run_to_completion(engine, 20)
    assert list(outs) == ["ok"] and outs["ok"].outputs[0].finish_reason == "length"
    assert_idle(engine)
    engine.add_request("given", [1, 2, 3], greedy(2), arrival_time=0)  # a number (int too) is still accepted
    assert engine.scheduler.requests["given"].arrival_time == 0


@pytest.mark.parametrize("model", [123, 4.5, ["model.gguf"], b"model.gguf"])
def test_a_model_of_the_wrong_type_is_a_config_error_naming_it(model):
    """Found by trying the kit as a learner: ``LLM(model=123)`` raised AttributeError: 'int' object has no
    attribute 'config' (taken for a model instance), ``LLMEngine(123)`` a bare TypeError from pathlib."""
    for make in (lambda: LLM(model=model), lambda: LLMEngine(model)):
        with pytest.raises(
            ConfigError, match=f"model must be a model name, a .gguf path .* got {type(model).__name__}"
        ):
            make()


def test_a_model_given_as_a_path_object_is_loaded_by_every_pool_sizing(tmp_path):
    """``LLM(model=pathlib.Path(...))`` was taken for a model instance: a pool sized from memory then failed
    on the Path's ``.config``."""
    from pathlib import Path

    from pagedlab.model.fetch import model_path

    llm = LLM(model=Path(model_path()), kv_cache_memory_bytes=40 * 737_280)
    assert llm.llm_engine.cache_config.num_gpu_blocks == 39  # vLLM's null block is counted in the budget


def test_from_engine_args_names_a_wrong_argument_type():
    with pytest.raises(TypeError, match="from_engine_args takes an EngineArgs, got dict"):
        LLMEngine.from_engine_args({"max_num_seqs": 2})
