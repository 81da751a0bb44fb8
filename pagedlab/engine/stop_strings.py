"""Stop strings and the output text, as vLLM 0.32.0's detokenizer finds and cuts them.

vLLM 0.32.0 (``v1/engine/detokenizer.py``, ``BaseIncrementalDetokenizer.update``, lines 96-153) checks stop strings
after every step on the text that step added, for every request that got a token, also one the engine core has
just finished by its length (then ``v1/engine/output_processor.py:768-773`` turns the finish reason into "stop"
with the string as ``stop_reason``):

- only once more than ``min_tokens`` tokens are out (line 134), and only where the string *ends* in the new text
  (line 136 and ``check_stop_strings``' search start, ``1 - new_char_count - len(stop)``, line 349): a stop string
  wholly inside the first ``min_tokens`` tokens' text never stops the request;
- of several strings in the new text, the one that ends first wins, ties in list order (lines 341-365);
- the text is cut before the string, or after it with ``include_stop_str_in_output`` (lines 367-373);
- a request ended by EOS or a stop token decodes without that token unless ``include_stop_str_in_output``
  (line 107), so no stop string is looked for in its text.

The text itself comes from ``tokenizers``' ``DecodeStream`` (``FastIncrementalDetokenizer``, lines 179-233), which
holds back a token whose text ends in U+FFFD (a byte of a multi-byte character still to come) until the character
is whole: a completion that ends inside a character has no U+FFFD at its end (``output_text``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_stop_strings", "output_text"]

_REPLACEMENT = "\ufffd"


def output_text(tokenizer: Any, token_ids: list[int], skip_special_tokens: bool) -> str:
    """The detokenized text of ``token_ids``, less the U+FFFD of a multi-byte character cut off at the end (vLLM's
    ``DecodeStream`` never emits them)."""
    return str(tokenizer.decode(token_ids, skip_special_tokens=skip_special_tokens)).rstrip(_REPLACEMENT)


def check_stop_strings(
    output_text: str, new_char_count: int, stop: list[str], include_in_output: bool
) -> tuple[str, int] | None:
    """vLLM 0.32.0's ``check_stop_strings`` (``v1/engine/detokenizer.py:321``): the stop string that ends first
    within the last ``new_char_count`` characters of ``output_text`` (ties: the first in ``stop``) and where to cut
    the text (-1: not at all), or None."""
    if new_char_count <= 0 or not stop:
        return None
    best: tuple[int, int, str] | None = None  # (end, start, string)
    for s in stop:
        start = output_text.find(s, max(len(output_text) + 1 - new_char_count - len(s), 0))
        if start != -1 and (best is None or start + len(s) < best[0]):
            best = (start + len(s), start, s)
    if best is None:
        return None
    end, start, s = best
    if include_in_output:
        return s, (-1 if end >= len(output_text) else end)
    return s, start
