"""``Logprob.decoded_token``: each token of a log-probability entry decoded on its own, as vLLM 0.32.0 does.

vLLM 0.32.0 (``v1/engine/logprobs.py``, ``LogprobsProcessor._update_sample_logprobs``) decodes every token of a
position's entry with ``convert_ids_list_to_tokens`` (``tokenizers/detokenizer_utils.py:143``:
``tokenizer.decode([id])``, special tokens kept, plus the leading spaces a Metaspace pre-tokenizer's decode
strips) and then repairs a token whose text ends in U+FFFD (a byte-fallback piece of a multi-byte character)
from up to 4 previously sampled tokens (``_verify_tokens`` / ``_correct_decoded_token``). Without
detokenization (``detokenize=False``, or no tokenizer) ``decoded_token`` stays None.
"""

from __future__ import annotations

import json
from typing import Any

from pagedlab.outputs import TokenLogprobs

__all__ = ["fill_decoded_tokens"]

_REPLACEMENT = "\ufffd"
_MARKER_CACHE = "_pagedlab_space_marker"
_UNSET = object()


def _leading_space_marker(tokenizer: Any) -> str | None:
    """The Metaspace replacement character of the tokenizer's pre-tokenizer, else None (vLLM's
    ``get_leading_space_marker``); cached on the tokenizer."""
    cached = getattr(tokenizer, _MARKER_CACHE, _UNSET)
    if cached is not _UNSET:
        return cached if isinstance(cached, str) else None
    result = None
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        try:
            pre = json.loads(backend.to_str()).get("pre_tokenizer") or {}
        except (AttributeError, TypeError, ValueError):
            pre = {}
        subs = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
        result = next((p.get("replacement", "\u2581") for p in subs if p.get("type") == "Metaspace"), None)
    try:
        setattr(tokenizer, _MARKER_CACHE, result)
    except AttributeError:
        pass
    return result


def _decode_each(tokenizer: Any, ids: list[int]) -> list[str]:
    """vLLM's ``convert_ids_list_to_tokens``: each id decoded alone, leading Metaspace spaces restored."""
    marker = _leading_space_marker(tokenizer)
    texts = [tokenizer.decode([t]) or "" for t in ids]
    if marker is None:
        return texts
    out = []
    for raw, text in zip(tokenizer.convert_ids_to_tokens(ids), texts):
        markers = len(raw) - len(raw.lstrip(marker))
        missing = markers - (len(text) - len(text.lstrip(" ")))
        out.append(" " * missing + text if missing > 0 else text)
    return out


def _corrected(tokenizer: Any, token_id: int, context: list[int]) -> str:
    """vLLM's ``_correct_decoded_token``: the text ``token_id`` completes after the sampled ``context``
    (oldest first), or "" while the byte sequence is still incomplete."""
    for num_ctx in range(1, min(len(context), 4) + 1):
        ctx = context[-num_ctx:]
        full = tokenizer.decode(ctx + [token_id])
        if full.endswith(_REPLACEMENT):
            continue
        clean_end = len(ctx)
        for j in range(len(ctx) - 1, -1, -1):
            if tokenizer.decode([ctx[j]]).endswith(_REPLACEMENT):
                clean_end = j
            else:
                break
        prefix = tokenizer.decode(ctx[:clean_end]) if clean_end > 0 else ""
        if full.startswith(prefix):
            return str(full[len(prefix) :])
        common = 0
        for a, b in zip(prefix, full):
            if a != b:
                break
            common += 1
        return str(full[common:])
    return ""


def fill_decoded_tokens(tokenizer: Any, entry: TokenLogprobs, context: list[int]) -> None:
    """Set ``decoded_token`` of every ``Logprob`` in one position's ``entry`` (token id -> Logprob), as vLLM 0.32.0.

    Args:
        tokenizer: a Hugging Face tokenizer.
        entry: the position's log-probabilities, the sampled token first.
        context: the tokens sampled before this position, oldest first (vLLM uses the last 4).
    """
    ids = list(entry)
    texts = _decode_each(tokenizer, ids)
    for t, text in zip(ids, texts):
        entry[t].decoded_token = _corrected(tokenizer, t, context[-4:]) if text.endswith(_REPLACEMENT) else text
