"""Turn logits into next tokens, as vLLM v1's ``Sampler`` (``vllm/v1/sample/sampler.py``, vLLM main, 2026-12-01).

Order per row: ``min_tokens`` masks EOS / ``stop_token_ids`` -> presence, frequency and repetition
penalties -> greedy argmax, or temperature -> ``min_p`` -> top-k / top-p -> a draw. Log-probabilities
(``SamplingParams.logprobs``) are vLLM's default "raw" ones: ``log_softmax`` of the model's logits
before any of these steps. A greedy row without penalties or ``min_tokens`` is a plain argmax of the
model's logits, exactly as before these features existed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from pagedlab.outputs import Logprob, TokenLogprobs
from pagedlab.sampling_params import SamplingParams

if TYPE_CHECKING:
    from pagedlab.request import Request


def apply_top_k_top_p(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Mask (to -inf) tokens outside the top-k and outside the top-p nucleus of one row ``[V]``."""
    if top_k and top_k > 0 and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=False)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        remove = cum <= 1 - top_p
        remove[-1] = False  # always keep the most likely token
        logits = logits.masked_fill(remove.scatter(0, order, remove), float("-inf"))
    return logits


def apply_min_p(logits: torch.Tensor, min_p: float) -> torch.Tensor:
    """Mask tokens of one row ``[V]`` whose probability is below ``min_p`` x the largest one's."""
    if min_p <= 0.0:
        return logits
    probs = torch.softmax(logits, dim=-1)
    return logits.masked_fill(probs < min_p * probs.max(), float("-inf"))


def apply_penalties(
    logits: torch.Tensor, sp: SamplingParams, prompt_ids: Sequence[int], output_ids: Sequence[int]
) -> torch.Tensor:
    """vLLM's penalties on one row ``[V]`` (returns a new tensor).

    Repetition: tokens seen in the prompt or the output have positive logits divided by, negative
    logits multiplied by ``repetition_penalty``. Frequency / presence: each token's logit drops by
    ``frequency_penalty`` x its count in the output and by ``presence_penalty`` if it occurs there.
    """
    logits = logits.clone()
    vocab = logits.shape[-1]
    if sp.repetition_penalty != 1.0:
        seen = torch.zeros(vocab, dtype=torch.bool)
        seen[torch.tensor(list(prompt_ids) + list(output_ids), dtype=torch.int64)] = True
        scaled = torch.where(logits > 0, logits / sp.repetition_penalty, logits * sp.repetition_penalty)
        logits = torch.where(seen, scaled, logits)
    if output_ids and (sp.frequency_penalty or sp.presence_penalty):
        counts = torch.bincount(torch.tensor(list(output_ids), dtype=torch.int64), minlength=vocab)[:vocab]
        logits = logits - sp.frequency_penalty * counts.to(logits.dtype)
        logits = logits - sp.presence_penalty * (counts > 0).to(logits.dtype)
    return logits


def _process_row(logits: torch.Tensor, sp: SamplingParams, req: Request | None) -> torch.Tensor:
    """``min_tokens`` mask and penalties for one row; the row itself when neither applies."""
    if req is None:
        return logits
    if sp.min_tokens and req.num_output_tokens < sp.min_tokens:
        stops = list(sp.stop_token_ids or [])
        if req.eos_token_id is not None:  # with ignore_eos too: vLLM 0.32.0 adds EOS to all_stop_token_ids
            stops.append(req.eos_token_id)  # whatever ignore_eos says (sampling_params.py:781-784)
        if stops:
            logits = logits.index_fill(0, torch.tensor(stops, dtype=torch.int64), float("-inf"))
    if sp.needs_penalties:
        logits = apply_penalties(logits, sp, req.prompt_token_ids, req.output_token_ids)
    return logits


def top_logprobs(raw_logits: torch.Tensor, token: int, k: int) -> TokenLogprobs:
    """The sampled token's log-probability and the ``k`` most likely ones (``k=-1``: all), with ranks.

    Args:
        raw_logits: the model's fp32 logits of one row ``[V]``.
    """
    lp = torch.log_softmax(raw_logits.float(), dim=-1)
    k = lp.shape[-1] if k == -1 else min(k, lp.shape[-1])
    top = torch.topk(lp, k) if k > 0 else None
    out: TokenLogprobs = {}
    chosen = float(lp[token])
    out[token] = Logprob(chosen, rank=int((lp > lp[token]).sum()) + 1)
    if top is not None:
        for r, (v, t) in enumerate(zip(top.values.tolist(), top.indices.tolist()), start=1):
            if t != token:
                out[int(t)] = Logprob(float(v), rank=r)
    return out


def sample(
    logits: torch.Tensor,
    params: Sequence[SamplingParams],
    generators: Sequence[torch.Generator | None],
    requests: Sequence[Request | None] | None = None,
) -> list[int]:
    """Sample one token per row.

    Args:
        logits: fp32 ``[N, vocab]``.
        params: one ``SamplingParams`` per row.
        generators: one ``torch.Generator`` per row (seeded requests) or ``None`` (global RNG).
        requests: the request each row samples for (its prompt/output ids drive penalties and
            ``min_tokens``); None skips both (callers without request state).
    Returns:
        ``N`` token ids. Greedy rows take the argmax of the (penalised) logits.
    """
    out: list[int] = logits.argmax(dim=-1).tolist()
    for i, sp in enumerate(params):
        base = logits[i]
        row = _process_row(base, sp, requests[i] if requests is not None else None)
        if sp.greedy:
            if row is not base:
                out[i] = int(row.argmax())
            continue
        row = apply_min_p(row / sp.temperature, sp.min_p)
        row = apply_top_k_top_p(row, sp.top_k, sp.top_p)
        probs = torch.softmax(row, dim=-1)
        out[i] = int(torch.multinomial(probs, 1, generator=generators[i]).item())
    return out
