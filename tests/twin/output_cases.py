"""Output-processing workloads and bad inputs, played unchanged on real vLLM 0.32.0 and on the kit.

Standard library only, like ``api_cases.py``: the vLLM probe (``tests/twin/conftest.py``) loads this file by path
inside vLLM's interpreter and the kit's side imports it; both hand ``play`` their ``LLM`` and ``SamplingParams``.
A *call* is plain JSON, drawn by ``tests/twin/test_output_fuzz.py``::

    {"api": "generate", "prompts": [str | {"prompt_token_ids": [...]}], "params": [{SamplingParams kwargs}]}
    {"api": "chat", "prompts": [conversation, ...], "params": [...], "chat": {LLM.chat keyword arguments}}

``play`` makes each call once (every workload of a call in one ``generate`` / ``chat``, one ``SamplingParams``
each) and answers, per request, everything a script reads from a ``RequestOutput`` (``record``). ``refuse``
makes each bad call and answers the *kind* of its refusal (``refusal``).
"""

from __future__ import annotations

from typing import Any


def _logprobs(entries: Any) -> Any:
    """Per position: ``[token id, rank, logprob, decoded_token]`` of every token of the entry, by id."""
    if entries is None:
        return None
    return [
        [[int(t), lp.rank, float(lp.logprob), lp.decoded_token] for t, lp in sorted(entry.items())] for entry in entries
    ]


def record(out: Any) -> dict[str, Any]:
    """What a vLLM 0.32 script reads from one ``RequestOutput`` (its first completion: every draw has n=1)."""
    c = out.outputs[0]
    return {
        "prompt": out.prompt,
        "prompt_token_ids": list(out.prompt_token_ids),
        "prompt_logprobs": out.prompt_logprobs,
        "num_cached_tokens": out.num_cached_tokens,
        "finished": out.finished,
        "num_outputs": len(out.outputs),
        "text": c.text,
        "token_ids": list(c.token_ids),
        "finish_reason": c.finish_reason,
        "stop_reason": c.stop_reason,
        "cumulative_logprob": c.cumulative_logprob,
        "logprobs": _logprobs(c.logprobs),
    }


def _invoke(llm: Any, sampling_params: type, call: dict[str, Any]) -> Any:
    params = [sampling_params(**p) for p in call["params"]]
    if call["api"] == "generate":
        return llm.generate(call["prompts"], params, use_tqdm=False)
    return llm.chat(call["prompts"], params, use_tqdm=False, **call.get("chat", {}))


def play(llm: Any, sampling_params: type, calls: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Each call's records, one per request in the call's order (the prefix cache reset first)."""
    llm.reset_prefix_cache()
    return [[record(o) for o in _invoke(llm, sampling_params, call)] for call in calls]


#: What a refusal can be: the request's validation (vLLM's ``VLLMValidationError``, ``ValueError`` or
#: ``TypeError``, raised before anything runs) or a failure from inside the engine (anything else).
VALIDATION = ("VLLMValidationError", "ValueError", "TypeError")


def refusal(call: Any, validation_error: type) -> dict[str, Any]:
    """How ``call()`` ends: accepted, or refused with which class (and whether it is vLLM's validation error,
    a ``ValueError``, a ``TypeError``) and message."""
    try:
        call()
    except Exception as e:  # noqa: BLE001 - the kind of refusal is what is compared
        names = [k.__name__ for k in type(e).__mro__]
        return {
            "refused": True,
            "class": type(e).__name__,
            "validation": isinstance(e, (validation_error, ValueError, TypeError)),
            "validation_error": isinstance(e, validation_error),
            "value_error": isinstance(e, ValueError),
            "type_error": isinstance(e, TypeError),
            "mro": names,
            "message": str(e)[:300],
        }
    return {"refused": False}


def refuse(llm: Any, sampling_params: type, validation_error: type, calls: list[dict[str, Any]]) -> list[Any]:
    """Each bad call's ``refusal``; ``{"only_params": true}`` calls build their ``SamplingParams`` only."""
    answers = []
    for call in calls:
        if call.get("only_params"):
            answers.append(refusal(lambda c=call: [sampling_params(**p) for p in c["params"]], validation_error))
        else:
            answers.append(refusal(lambda c=call: _invoke(llm, sampling_params, c), validation_error))
    return answers
