"""HF transformers' greedy decoding of the kit's model: the parity oracle the kit is compared with.

One loop, used by the capstone's recorded reference (``pagedlab.course.capstone.record_hf_reference``), the
engine tests' ``hf_greedy`` fixture and ``benchmarks/bench_engine.py``'s batch-1 HF row:
:func:`load_hf_model` loads the bundled SmolLM2-135M GGUF de-quantized to float32 (what the kit computes
with), :func:`hf_greedy` runs ``generate`` on one prompt at batch 1, greedy, and returns the new tokens.

transformers is imported when a function is called (loading it takes ~30 s on a small CPU).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from pagedlab.model.fetch import ensure_model

__all__ = ["EOS_TOKEN_ID", "hf_greedy", "load_hf_model"]

#: SmolLM2-Instruct's end of turn (``<|im_end|>``): generation stops there, and pads with it.
EOS_TOKEN_ID = 2


def load_hf_model(folder: str | Path | None = None, **kwargs: Any) -> Any:
    """``AutoModelForCausalLM`` in eval mode, float32: from the bundled GGUF (fetched if missing), or from a
    Hugging Face ``folder`` (``pagedlab.twin.hf_model``'s converted one). ``kwargs`` go to ``from_pretrained``
    (``attn_implementation="sdpa"`` ...). transformers' GGUF-conversion warnings are silenced."""
    from transformers import AutoModelForCausalLM  # lazy: transformers takes ~30 s to import on a small CPU

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model: Any
        if folder is not None:
            model = AutoModelForCausalLM.from_pretrained(str(folder), **{"dtype": torch.float32, **kwargs})
        else:
            gguf = Path(ensure_model())
            model = AutoModelForCausalLM.from_pretrained(
                str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32, **kwargs
            )
    return model.eval()


def hf_greedy(
    model: Any, prompt_ids: Sequence[int], max_new_tokens: int, *, ignore_eos: bool = False, streamer: Any = None
) -> list[int]:
    """The tokens ``model.generate`` adds to ``prompt_ids``: batch 1, greedy, at most ``max_new_tokens``,
    stopping at :data:`EOS_TOKEN_ID` unless ``ignore_eos`` (then exactly ``max_new_tokens``). ``streamer``
    goes to ``generate`` (a benchmark's token clock).

    Raises:
        ValueError: an empty prompt or ``max_new_tokens < 1``.
    """
    ids = [int(t) for t in prompt_ids]
    if not ids or max_new_tokens < 1:
        raise ValueError(
            f"hf_greedy needs a non-empty prompt and max_new_tokens >= 1, got {len(ids)} and {max_new_tokens}"
        )
    with torch.inference_mode():
        out = model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            do_sample=False,
            max_new_tokens=max_new_tokens,
            min_new_tokens=max_new_tokens if ignore_eos else None,
            eos_token_id=-1 if ignore_eos else EOS_TOKEN_ID,
            pad_token_id=EOS_TOKEN_ID,
            streamer=streamer,
        )
    return [int(t) for t in out[0, len(ids) :].tolist()]
