"""Turn logits into next tokens: greedy, temperature, top-k, top-p, seeded per request."""
from __future__ import annotations

from typing import List, Optional, Sequence

import torch

from pagedlab.sampling_params import SamplingParams


def apply_top_k_top_p(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Mask (to -inf) tokens outside the top-k and outside the top-p nucleus of one row ``[V]``."""
    if top_k and top_k > 0 and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=False)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        remove = cum <= 1 - top_p
        remove[-1] = False          # always keep the most likely token
        logits = logits.masked_fill(remove.scatter(0, order, remove), float("-inf"))
    return logits


def sample(logits: torch.Tensor, params: Sequence[SamplingParams],
           generators: Sequence[Optional[torch.Generator]]) -> List[int]:
    """Sample one token per row.

    Args:
        logits: fp32 ``[N, vocab]``.
        params: one ``SamplingParams`` per row.
        generators: one ``torch.Generator`` per row (seeded requests) or ``None`` (global RNG).
    Returns:
        ``N`` token ids. Rows with ``temperature == 0`` take the argmax.
    """
    out = logits.argmax(dim=-1).tolist()
    for i, sp in enumerate(params):
        if sp.greedy:
            continue
        row = apply_top_k_top_p(logits[i] / sp.temperature, sp.top_k, sp.top_p)
        probs = torch.softmax(row, dim=-1)
        out[i] = int(torch.multinomial(probs, 1, generator=generators[i]).item())
    return out
