"""Stop strings as vLLM 0.32.0's detokenizer applies them (``pagedlab.engine.stop_strings``); found by the
output-processing twin (``tests/twin/test_output_fuzz.py``), each case checked there against real vLLM.

SmolLM2 (float32, greedy) continues "The capital of France is" with `` Paris`` ``.`` ``\\n`` ``\\n`` ``The``
`` answer`` `` is`` ``:``.
"""

from __future__ import annotations

from typing import Any

import pytest

from pagedlab.engine.stop_strings import check_stop_strings, output_text

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def llm() -> Any:
    from pagedlab import LLM

    return LLM(dtype="float32", block_size=32, max_model_len=480, num_gpu_blocks_override=16, seed=0)


def _run(llm: Any, **kw: Any) -> Any:
    from pagedlab import SamplingParams

    return llm.generate(PROMPT, SamplingParams(temperature=0.0, **kw))[0].outputs[0]


def test_the_continuation_the_cases_rely_on(llm: Any) -> None:
    out = _run(llm, max_tokens=8)
    assert out.text == " Paris.\n\nThe answer is:" and len(out.token_ids) == 8


@pytest.mark.parametrize("include", [False, True])
def test_a_stop_string_completed_by_the_last_allowed_token_stops(llm: Any, include: bool) -> None:
    """vLLM checks the text of a request the length has just finished too, and its finish reason becomes "stop"
    (v1/engine/output_processor.py:768-773); the kit said "length" and kept the string in the text."""
    out = _run(llm, max_tokens=7, stop=[" is"], include_stop_str_in_output=include)
    assert (out.finish_reason, out.stop_reason) == ("stop", " is")
    assert out.text == (" Paris.\n\nThe answer is" if include else " Paris.\n\nThe answer")
    assert len(out.token_ids) == 7


def test_a_stop_string_inside_the_first_min_tokens_is_ignored(llm: Any) -> None:
    """vLLM looks for stop strings only in the text after the first ``min_tokens`` tokens
    (v1/engine/detokenizer.py:134-136); the kit searched the whole text once ``min_tokens`` were out."""
    out = _run(llm, max_tokens=8, stop=["."], min_tokens=3)
    assert (out.text, out.finish_reason, out.stop_reason) == (" Paris.\n\nThe answer is:", "length", None)
    out = _run(llm, max_tokens=8, stop=["."], min_tokens=1)  # the "." token is the second: past min_tokens
    assert (out.text, out.finish_reason, out.stop_reason, len(out.token_ids)) == (" Paris", "stop", ".", 2)


def test_check_stop_strings_is_vllms() -> None:
    """Only strings ending in the new characters; the one ending first wins, ties in list order; cut before the
    string or after it (-1: nothing to cut) - vLLM 0.32.0's ``check_stop_strings``."""
    text = "ab cd ef"
    assert check_stop_strings(text, 2, ["ab", "cd"], False) is None  # both end before the last 2 characters
    assert check_stop_strings(text, 3, ["ef", " e"], False) == (" e", 5)  # " e" ends first
    assert check_stop_strings(text, 3, [" ef", "ef"], False) == (" ef", 5)  # same end: the first listed
    assert check_stop_strings(text, 3, ["d e"], True) == ("d e", 7)
    assert check_stop_strings(text, 3, ["ef"], True) == ("ef", -1)
    assert check_stop_strings(text, 0, ["ef"], False) is None
    assert check_stop_strings(text, 1, ["cd ef"], False) == ("cd ef", 3)  # may start before the new text


class _Tok:
    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join({1: "a", 2: "\ufffd", 3: "\ufffdb"}[i] for i in ids)


def test_the_text_leaves_out_a_character_cut_off_at_its_end() -> None:
    """vLLM's DecodeStream holds back a token whose text ends in U+FFFD (a partial character): a completion that
    ends inside a character has no U+FFFD at its end; one inside the text stays."""
    assert output_text(_Tok(), [1, 2, 2], True) == "a"
    assert output_text(_Tok(), [1, 3], True) == "a\ufffdb"
