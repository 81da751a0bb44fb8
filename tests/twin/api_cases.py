"""The offline-API calls of issue 35's seven defects, run unchanged on real vLLM 0.32.0 and on the kit.

Standard library only: ``tests/twin/test_api_defects.py`` loads this file by path inside vLLM's interpreter
(``python -I``, no pagedlab there) and imports it on the kit's side, and hands ``run_cases`` each engine's
``LLM`` instance, ``SamplingParams`` and ``VLLMValidationError``. Every answer is plain JSON data.
"""

from __future__ import annotations

from typing import Any

#: Engine settings both engines start with (vLLM's names): the twin's block size and an override together
#: with an explicit KV budget (issue 35: the kit refused the two together; vLLM's override wins).
ENGINE = {
    "dtype": "float32",
    "block_size": 32,
    "max_model_len": 480,
    "num_gpu_blocks_override": 16,
    "kv_cache_memory_bytes": 1 << 30,
    "seed": 0,
}
#: The model's vocabulary size (SmolLM2-135M): a stop token id past it is out of vocabulary.
VOCAB_SIZE = 49152
#: Answers in 6 tokens and EOS on both (greedy, float32).
SKY = [{"role": "user", "content": "Is the sky blue? Answer with one word."}]
#: A template that renders each message's content parts: vLLM's "auto" detects the "openai" format in it.
PARTS_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}:{% for p in m['content'] %} [{{ p['text'] }}]{% endfor %}\n"
    "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
)
#: A plain template with a variable that ``chat_template_kwargs`` sets.
PLAIN_TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{{ speaker }}"
PARTS = [{"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]}]


def _completion(out: Any) -> dict[str, Any]:
    c = out.outputs[0]
    return {
        "prompt": out.prompt,
        "prompt_token_ids": list(out.prompt_token_ids),
        "text": c.text,
        "token_ids": list(c.token_ids),
        "finish_reason": c.finish_reason,
        "stop_reason": c.stop_reason,
    }


def _refusal(call: Any, validation_error: type) -> dict[str, Any]:
    try:
        call()
    except Exception as e:  # noqa: BLE001 - the kind of refusal is what is compared
        return {
            "refused": True,
            "validation_error": isinstance(e, validation_error),
            "value_error": isinstance(e, ValueError),
            "message": str(e),
        }
    return {"refused": False}


def _decoded(out: Any) -> list[dict[str, Any]]:
    """Per generated token: token id (as str, for JSON) -> ``decoded_token``."""
    return [{str(t): lp.decoded_token for t, lp in entry.items()} for entry in out.outputs[0].logprobs]


def run_cases(llm: Any, sampling_params: type, validation_error: type) -> dict[str, Any]:
    """Each case's answer on the engine behind ``llm`` (greedy, a few tokens each)."""

    def greedy(**kw: Any) -> Any:
        return sampling_params(temperature=0.0, **kw)

    out: dict[str, Any] = {}
    # 1. the stop token's text: left out unless include_stop_str_in_output
    for name, kw in {
        "eos_special_tokens_kept": {"skip_special_tokens": False},
        "eos_special_tokens_kept_included": {"skip_special_tokens": False, "include_stop_str_in_output": True},
    }.items():
        out[name] = _completion(llm.chat(SKY, greedy(max_tokens=8, **kw), use_tqdm=False)[0])
    for name, kw in {"stop_token_id": {}, "stop_token_id_included": {"include_stop_str_in_output": True}}.items():
        params = greedy(max_tokens=8, stop_token_ids=[30], **kw)
        out[name] = _completion(llm.generate("The capital of France is", params, use_tqdm=False)[0])
    # 2. LLM.chat's arguments and OpenAI-style content parts
    out["chat_content_parts"] = _completion(llm.chat(PARTS, greedy(max_tokens=3), use_tqdm=False)[0])
    out["chat_content_parts_openai_template"] = _completion(
        llm.chat(PARTS, greedy(max_tokens=3), use_tqdm=False, chat_template=PARTS_TEMPLATE)[0]
    )
    cont = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "The answer is"}]
    out["chat_continue_final_message"] = _completion(
        llm.chat(cont, greedy(max_tokens=3), use_tqdm=False, add_generation_prompt=False, continue_final_message=True)[
            0
        ]
    )
    out["chat_template_and_kwargs"] = _completion(
        llm.chat(
            [{"role": "user", "content": "Hi"}],
            greedy(max_tokens=3),
            use_tqdm=False,
            chat_template=PLAIN_TEMPLATE,
            chat_template_kwargs={"speaker": "bot:"},
            priority=0,
        )[0]
    )
    out["chat_continue_with_generation_prompt"] = _refusal(
        lambda: llm.chat(SKY, greedy(max_tokens=2), use_tqdm=False, continue_final_message=True), validation_error
    )
    # 3. Logprob.decoded_token
    out["decoded_tokens"] = _decoded(
        llm.generate("The capital of France is", greedy(max_tokens=4, logprobs=2), use_tqdm=False)[0]
    )
    out["decoded_tokens_without_detokenize"] = _decoded(
        llm.generate("The capital of France is", greedy(max_tokens=2, logprobs=1, detokenize=False), use_tqdm=False)[0]
    )
    # 4. stop strings need detokenization
    out["stop_without_detokenize"] = _refusal(lambda: sampling_params(stop=["x"], detokenize=False), validation_error)
    # 5. out-of-vocabulary stop_token_ids
    out["stop_token_id_out_of_vocabulary"] = _refusal(
        lambda: llm.generate("Hi", greedy(max_tokens=2, stop_token_ids=[VOCAB_SIZE + 5]), use_tqdm=False),
        validation_error,
    )
    # 7. the exception classes: what a script catching VLLMValidationError or ValueError sees
    out["temperature_refusal"] = _refusal(lambda: sampling_params(temperature=-1.0), validation_error)
    return out


#: A vLLM 0.32 script that imports ``vllm.exceptions`` and catches its ``VLLMValidationError`` (issue 35:
#: failed to import under ``pagedlab run-vllm``); it prints the same lines on both.
SCRIPT = """\
from vllm import SamplingParams
from vllm.exceptions import VLLMClientError, VLLMError, VLLMValidationError

for kw in ({"temperature": -1.0}, {"stop": ["x"], "detokenize": False}, {"top_p": 0.0}, {"max_tokens": 3}):
    try:
        SamplingParams(**kw)
        print(sorted(kw), "accepted")
    except VLLMValidationError as e:
        print(sorted(kw), "VLLMValidationError", isinstance(e, VLLMClientError), isinstance(e, VLLMError))
print("VLLMValidationError is a ValueError:", issubclass(VLLMValidationError, ValueError))
"""
