"""Re-entry: ``LLM.generate`` / ``chat`` / ``beam_search`` or ``LLMEngine.step`` called while another runs.

Provoked the way it happens: a tokenizer whose ``decode`` (run for stop strings and for the
output text) calls back into the LLM, or hands work to another thread. The inner call raises
``ReentrantCallError`` at once; the outer call returns every result, the same as without the hook.
Was: the inner generate stepped the shared engine, took the outer call's finished outputs and
dropped them, and the outer call ended in a bare ``KeyError``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from pagedlab import LLM, LLMEngine, SamplingParams
from pagedlab.errors import ReentrantCallError
from pagedlab.sampling_params import BeamSearchParams
from tests.kernels.test_engine_triton import tiny_llama
from tests.robust.helpers import assert_idle

PROMPTS = [[3, 14, 15, 9], [26, 5, 35], [8, 9, 7, 9, 3, 2], [1, 2]]
# A stop string that never matches: the engine decodes every step to look for it.
PARAMS = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True, stop=["never"])


class HookTokenizer:
    """A tokenizer (duck-typed as the engine uses one) whose ``decode`` runs ``hook`` once per call."""

    def __init__(self) -> None:
        self.hook: Callable[[], object] | None = None
        self.errors: list[ReentrantCallError] = []

    def __call__(self, text: str) -> dict[str, list[int]]:
        return {"input_ids": [ord(c) % 97 for c in text]}

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        if self.hook is not None:
            self.hook()
        return " ".join(map(str, ids))

    def apply_chat_template(self, conv: list[dict[str, Any]], **_: Any) -> list[int]:
        return [ord(c) % 97 for m in conv for c in m["content"]]


def tiny_llm() -> tuple[LLM, HookTokenizer]:
    llm = LLM(tiny_llama(), block_size=4, num_gpu_blocks=64, max_model_len=128, enable_prefix_caching=False)
    tok = HookTokenizer()
    llm.llm_engine.tokenizer = tok
    return llm, tok


def tokens(outs: list[Any]) -> list[tuple[str | None, list[int], str]]:
    return [(o.prompt, o.outputs[0].token_ids, o.outputs[0].finish_reason) for o in outs]


@pytest.fixture(scope="module")
def reference() -> list[tuple[str | None, list[int], str]]:
    llm, _ = tiny_llm()
    return tokens(llm.generate(PROMPTS, PARAMS))


def catching(tok: HookTokenizer, inner: Callable[[], object]) -> Callable[[], None]:
    """A hook that makes the inner call and records the error it raises (a logging hook that logs and goes on)."""

    def hook() -> None:
        try:
            inner()
        except ReentrantCallError as e:
            tok.errors.append(e)

    return hook


INNER_CALLS: dict[str, Callable[[LLM], object]] = {
    "generate": lambda llm: llm.generate([[5, 6, 7]], SamplingParams(max_tokens=2)),
    "chat": lambda llm: llm.chat([{"role": "user", "content": "hi"}], SamplingParams(max_tokens=2)),
    "beam_search": lambda llm: llm.beam_search([[5, 6, 7]], BeamSearchParams(beam_width=2, max_tokens=2)),
    "engine.step": lambda llm: llm.llm_engine.step(),
}


@pytest.mark.parametrize("inner", sorted(INNER_CALLS))
@pytest.mark.parametrize("outer", ["generate", "chat"])
def test_an_inner_call_from_a_decode_hook_raises_at_once_and_the_outer_call_returns_everything(
    reference: list[Any], inner: str, outer: str
) -> None:
    llm, tok = tiny_llm()
    tok.hook = catching(tok, lambda: INNER_CALLS[inner](llm))
    if outer == "generate":
        outs = llm.generate(PROMPTS, PARAMS)
        assert tokens(outs) == reference  # all four, complete, in order, unchanged by the hook
    else:
        conv = [{"role": "user", "content": "abc"}]
        outs = llm.chat([conv, conv], PARAMS)
        assert len(outs) == 2 and all(o.finished and len(o.outputs[0].token_ids) == 6 for o in outs)
    assert tok.errors, "the hook never ran"
    holder = "LLMEngine.step" if inner == "engine.step" else f"LLM.{outer}"
    name = "LLMEngine.step" if inner == "engine.step" else f"LLM.{inner}"
    msg = str(tok.errors[0])
    assert msg.startswith(f"{name} was called while ") and "not re-entrant" in msg and "from inside it" in msg
    # the inner call came from inside a step: generate and beam_search see the step, step sees itself
    assert f"while {holder} is running" in msg or "while LLMEngine.step is running" in msg
    tok.hook = None
    assert_idle(llm.llm_engine)  # nothing of the inner calls was left queued or holding blocks
    assert tokens(llm.generate(PROMPTS, PARAMS)) == reference


def test_uncaught_the_inner_error_ends_the_outer_call_with_it_and_the_engine_serves_on(
    reference: list[Any],
) -> None:
    llm, tok = tiny_llm()
    tok.hook = lambda: INNER_CALLS["generate"](llm)
    with pytest.raises(ReentrantCallError, match=r"^LLM\.generate was called while .* not re-entrant"):
        llm.generate(PROMPTS, PARAMS)
    tok.hook = None
    assert_idle(llm.llm_engine)  # the outer call aborted its requests and freed their blocks
    assert tokens(llm.generate(PROMPTS, PARAMS)) == reference


def test_a_step_re_entered_from_a_bare_engine_loop_leaves_the_running_step_intact(reference: list[Any]) -> None:
    llm, tok = tiny_llm()
    eng: LLMEngine = llm.llm_engine
    tok.hook = catching(tok, lambda: (eng.step(), llm.generate([[1]])))
    for i, p in enumerate(PROMPTS):
        eng.add_request(str(i), {"prompt_token_ids": p}, PARAMS)
    done: dict[str, Any] = {}
    while eng.has_unfinished_requests():
        done.update((o.request_id, o) for o in eng.step() if o.finished)
    assert tokens([done[str(i)] for i in range(len(PROMPTS))]) == reference
    assert tok.errors and all("while LLMEngine.step is running" in str(e) for e in tok.errors)


def test_beam_search_with_a_hook_that_calls_generate_returns_the_same_beams() -> None:
    params = BeamSearchParams(beam_width=3, max_tokens=5)
    llm, tok = tiny_llm()
    ref = llm.beam_search(PROMPTS[:2], params)
    tok.hook = catching(tok, lambda: INNER_CALLS["generate"](llm))
    got = llm.beam_search(PROMPTS[:2], params)
    assert [[s.tokens for s in o.sequences] for o in got] == [[s.tokens for s in o.sequences] for o in ref]
    assert tok.errors and str(tok.errors[0]).startswith("LLM.generate was called while LLM.beam_search is running")
    assert_idle(llm.llm_engine)


def test_a_second_thread_is_refused_while_generate_runs(reference: list[Any]) -> None:
    llm, tok = tiny_llm()
    seen: list[BaseException] = []

    def other_thread() -> None:
        try:
            llm.generate([[5, 6, 7]], SamplingParams(max_tokens=2))
        except ReentrantCallError as e:
            seen.append(e)

    def hook() -> None:  # run the other thread to its end while this one is inside generate
        if not seen:
            t = threading.Thread(target=other_thread)
            t.start()
            t.join()

    tok.hook = hook
    assert tokens(llm.generate(PROMPTS, PARAMS)) == reference
    assert seen and "from another thread" in str(seen[0]) and "give each thread its own LLM" in str(seen[0])
