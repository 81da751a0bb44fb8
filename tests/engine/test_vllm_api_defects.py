"""Issue 35's seven offline-API defects, on the kit alone (tests/twin/test_api_defects.py runs the same calls on
real vLLM 0.32.0 and compares): each test failed before its fix."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest

from pagedlab import LLM, SamplingParams
from pagedlab.errors import ConfigError, InvalidRequestError

SKY = [{"role": "user", "content": "Is the sky blue? Answer with one word."}]


@pytest.fixture(scope="module")
def llm() -> LLM:
    return LLM(dtype="float32", block_size=32, num_gpu_blocks_override=16, max_model_len=480)


def _greedy(**kw: Any) -> SamplingParams:
    return SamplingParams(temperature=0.0, **kw)


# 1. the stop token's text ---------------------------------------------------------------------------------
def test_eos_text_is_left_out_even_with_special_tokens_kept(llm: LLM) -> None:
    out = llm.chat(SKY, _greedy(max_tokens=8, skip_special_tokens=False))[0].outputs[0]
    assert out.finish_reason == "stop" and out.stop_reason is None and out.token_ids[-1] == 2  # EOS kept in ids
    assert out.text == "The sky is not blue."  # was 'The sky is not blue.<|im_end|>'
    kept = llm.chat(SKY, _greedy(max_tokens=8, skip_special_tokens=False, include_stop_str_in_output=True))[0]
    assert kept.outputs[0].text == "The sky is not blue.<|im_end|>"


def test_a_stop_token_ids_text_is_left_out_unless_asked_for(llm: LLM) -> None:
    out = llm.generate("The capital of France is", _greedy(max_tokens=8, stop_token_ids=[30]))[0].outputs[0]
    assert (out.token_ids, out.finish_reason, out.stop_reason) == ([7042, 30], "stop", 30)
    assert out.text == " Paris"  # was ' Paris.'
    kept = llm.generate(
        "The capital of France is", _greedy(max_tokens=8, stop_token_ids=[30], include_stop_str_in_output=True)
    )
    assert kept[0].outputs[0].text == " Paris."


def test_a_length_finish_keeps_its_last_token_in_the_text(llm: LLM) -> None:
    out = llm.generate("The capital of France is", _greedy(max_tokens=2))[0].outputs[0]
    assert out.finish_reason == "length" and out.text == " Paris."


# 2. LLM.chat's arguments and content parts ----------------------------------------------------------------
def test_chat_takes_text_content_parts(llm: LLM) -> None:
    parts = [{"role": "user", "content": [{"type": "text", "text": "Hi"}, "there"]}]
    out = llm.chat(parts, _greedy(max_tokens=2))[0]
    plain = llm.chat([{"role": "user", "content": "Hi\nthere"}], _greedy(max_tokens=2))[0]
    assert out.prompt_token_ids == plain.prompt_token_ids and out.outputs[0].text == plain.outputs[0].text
    with pytest.raises(InvalidRequestError, match="only text parts are implemented"):
        llm.chat([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])


def test_chat_takes_vllms_template_arguments(llm: LLM) -> None:
    template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{{ speaker }}"
    out = llm.chat(
        [{"role": "user", "content": "Hi"}],
        _greedy(max_tokens=2),
        chat_template=template,
        chat_template_kwargs={"speaker": "bot:"},
        priority=0,
    )[0]
    assert out.prompt == "user: Hi\nbot:"
    cont = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "The answer is"}]
    out = llm.chat(cont, _greedy(max_tokens=2), add_generation_prompt=False, continue_final_message=True)[0]
    assert out.prompt is not None and out.prompt.endswith("The answer is")
    with pytest.raises(InvalidRequestError, match="not compatible"):
        llm.chat(cont, _greedy(max_tokens=2), continue_final_message=True)
    parts_template = "{% for m in messages %}{% for p in m['content'] %}[{{ p['text'] }}]{% endfor %}{% endfor %}"
    out = llm.chat([{"role": "user", "content": "Hi"}], _greedy(max_tokens=2), chat_template=parts_template)[0]
    assert out.prompt == "[Hi]"  # "auto" detects the openai content format


@pytest.mark.parametrize("name", ["lora_request", "tokenization_kwargs", "mm_processor_kwargs"])
def test_chats_unimplemented_arguments_are_refused_by_name(llm: LLM, name: str) -> None:
    with pytest.raises(InvalidRequestError, match=f"{name}=...\\) is not implemented"):
        llm.chat(SKY, _greedy(max_tokens=2), **{name: {"x": 1}})


# 3. Logprob.decoded_token ---------------------------------------------------------------------------------
def test_logprobs_carry_decoded_tokens(llm: LLM) -> None:
    out = llm.generate("The capital of France is", _greedy(max_tokens=2, logprobs=2))[0].outputs[0]
    assert out.logprobs is not None
    first = out.logprobs[0]
    assert first[7042].decoded_token == " Paris"  # was None
    assert all(isinstance(lp.decoded_token, str) for e in out.logprobs for lp in e.values())
    raw = llm.generate("The capital of France is", _greedy(max_tokens=2, logprobs=1, detokenize=False))[0]
    assert raw.outputs[0].logprobs is not None
    assert all(lp.decoded_token is None for e in raw.outputs[0].logprobs for lp in e.values())


def test_a_split_character_is_decoded_from_its_context() -> None:
    """vLLM 0.32's ``_correct_decoded_token``: a byte piece decodes to "" until the piece that completes the
    character, which decodes to the whole character (from up to 4 earlier sampled tokens)."""
    from pagedlab.engine.decoded_tokens import fill_decoded_tokens
    from pagedlab.model.loader import load_tokenizer
    from pagedlab.outputs import Logprob

    tok = load_tokenizer()
    ids = tok("漢")["input_ids"]  # one CJK character, three byte-fallback pieces
    assert len(ids) == 3 and all(str(tok.decode([t])).endswith("\ufffd") for t in ids)
    decoded = []
    for i, t in enumerate(ids):
        entry = {t: Logprob(-0.1, rank=1)}
        fill_decoded_tokens(tok, entry, ids[:i])
        decoded.append(entry[t].decoded_token)
    assert decoded == ["", "", "漢"]


# 4. stop strings need detokenization -------------------------------------------------------------------------
def test_stop_strings_without_detokenization_are_refused() -> None:
    with pytest.raises(InvalidRequestError, match="stop strings are only supported when detokenize is True"):
        SamplingParams(stop=["x"], detokenize=False)
    SamplingParams(stop_token_ids=[30], detokenize=False)  # stop tokens need no text


# 5. out-of-vocabulary stop_token_ids ---------------------------------------------------------------------------
def test_out_of_vocabulary_stop_token_ids_are_refused(llm: LLM) -> None:
    with pytest.raises(InvalidRequestError, match=r"\[49157\] in stop_token_ids .* Vocabulary size: 49152") as e:
        llm.generate("Hi", _greedy(max_tokens=2, stop_token_ids=[5, 49157]))
    assert e.value.parameter == "stop_token_ids" and e.value.value == [49157]
    assert not llm.llm_engine.has_unfinished_requests()


# 6. num_gpu_blocks_override with kv_cache_memory_bytes --------------------------------------------------------
def test_an_override_with_a_kv_budget_is_taken_and_wins() -> None:
    from pagedlab.engine.arg_utils import EngineArgs

    args = EngineArgs(num_gpu_blocks_override=16, kv_cache_memory_bytes=1 << 30, block_size=32)
    args.check()  # was: ConfigError "give one KV pool size"
    assert args.engine_kwargs()["num_gpu_blocks"] == 15  # the override, less vLLM's null block
    with pytest.raises(ConfigError, match="give one KV pool size"):
        EngineArgs(num_gpu_blocks=16, kv_cache_memory_bytes=1 << 30).check()
    with pytest.raises(ConfigError, match="kv_cache_memory_bytes gives a KV cache of"):
        EngineArgs(num_gpu_blocks_override=16, kv_cache_memory_bytes=1 << 50).engine_kwargs()


# 7. vllm.exceptions -------------------------------------------------------------------------------------------
def test_invalid_request_error_is_vllms_validation_error_and_a_value_error() -> None:
    from pagedlab.exceptions import VLLMClientError, VLLMError, VLLMValidationError

    assert issubclass(InvalidRequestError, VLLMValidationError) and issubclass(InvalidRequestError, ValueError)
    assert issubclass(VLLMValidationError, VLLMClientError) and issubclass(VLLMClientError, VLLMError)
    assert not issubclass(VLLMValidationError, ValueError)  # as in vLLM 0.32.0
    assert str(InvalidRequestError("bad", parameter="n", value=0)) == "bad (parameter=n, value=0)"


def test_run_vllm_provides_vllm_exceptions(tmp_path: Path) -> None:
    from pagedlab.vllm_compat import run_script

    script = tmp_path / "s.py"
    script.write_text(
        "from vllm import SamplingParams\n"
        "from vllm.exceptions import VLLMValidationError\n"
        "try:\n    SamplingParams(temperature=-1.0)\nexcept VLLMValidationError as e:\n    print('caught', type(e).__name__)\n"
    )
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert run_script(str(script), []) == 0
    assert buf.getvalue() == "caught InvalidRequestError\n"


def test_sampling_params_doc_names_the_release_the_kit_follows() -> None:
    import pagedlab.sampling_params as sp
    from pagedlab.vllm_version import VLLM_VERSION

    doc = sp.__doc__ or ""
    assert f"vLLM {VLLM_VERSION}" in doc and "main branch" not in doc and "0.33" not in doc
    assert "vLLM main" not in (sp.SamplingParams.__doc__ or "") + (sp.BeamSearchParams.__doc__ or "")
