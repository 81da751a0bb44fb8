"""Measure what copy-on-write sharing saves (the vLLM paper's Figs. 14-15 experiment, on block counts).

Both helpers drive the real ``KVCacheManager`` (no prefix caching) through a decoding
algorithm built from ``fork`` / ``allocate_slots`` / ``free`` (vLLM paper section 5) and compare,
at every decode step, the blocks actually held (shared blocks counted once) with the blocks
the same sequences would hold with private copies (sum of table lengths). The paper defines
the saving as ``(without - with) / without``; we report it time-averaged over decode steps.
"""

from __future__ import annotations

import random

from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.request import Request


def _result(with_sharing: list[int], without: list[int], copies: int) -> dict[str, float]:
    w, wo = sum(with_sharing), sum(without)
    return {
        "blocks_with_sharing": w / len(with_sharing),
        "blocks_without_sharing": wo / len(without),
        "saving": (wo - w) / wo if wo else 0.0,
        "cow_copies": copies,
        "final_saving": (without[-1] - with_sharing[-1]) / without[-1] if without[-1] else 0.0,
    }


def _decode_one(m: KVCacheManager, req: Request, token: int) -> None:
    req.append_output_token_ids(token)
    if m.allocate_slots(req, 1) is None:
        raise RuntimeError("pool too small for the sharing experiment")
    req.num_computed_tokens += 1


def parallel_sampling_savings(n: int, prompt_len: int, output_len: int, block_size: int = 16) -> dict[str, float]:
    """Blocks saved by sharing the prompt among ``n`` samples (``SamplingParams(n)``, vLLM v0 CoW).

    The prompt is prefilled once, forked ``n - 1`` times, then every sample decodes
    ``output_len`` distinct tokens; the shared partial last prompt block is copied on first write.

    Args:
        n: samples per prompt, >= 1.
        prompt_len: prompt tokens, >= 1.
        output_len: tokens generated per sample, >= 1.
        block_size: tokens per block.

    Returns:
        dict with ``blocks_with_sharing`` / ``blocks_without_sharing`` (mean over decode steps),
        ``saving`` (their relative difference), ``final_saving`` and ``cow_copies``.
    """
    num_blocks = n * (-(-(prompt_len + output_len) // block_size) + 1)
    m = KVCacheManager(block_size, num_blocks, prompt_len + output_len + 1)
    parent = Request("s0", [7] * prompt_len)
    m.allocate_slots(parent, prompt_len)
    parent.num_computed_tokens = prompt_len
    seqs = [parent]
    for i in range(1, n):
        child = Request(f"s{i}", parent.all_token_ids)
        m.fork(parent, child)
        seqs.append(child)
    with_s: list[int] = []
    without: list[int] = []
    copies = 0
    for step in range(output_len):
        for i, s in enumerate(seqs):
            _decode_one(m, s, 1000 * i + step)  # samples differ from their first token
        copies += len(m.take_pending_copies())
        with_s.append(m.num_held_blocks())
        without.append(m.num_blocks_without_sharing())
    return _result(with_s, without, copies)


def beam_search_savings(
    beam_width: int, prompt_len: int, output_len: int, block_size: int = 16, seed: int = 0, keep_best: float = 0.6
) -> dict[str, float]:
    """Blocks saved by sharing among beams (vLLM v0 beam search on CoW forks).

    Each step keeps ``beam_width`` candidates drawn from the current beams; a beam that is
    chosen twice is forked, a beam not chosen is freed. ``keep_best`` is the probability that
    a candidate comes from the currently best beam (beams converge on shared prefixes, which
    is what makes beam search save more than parallel sampling). Seeded, so repeatable.

    Args:
        beam_width: beams kept per step, >= 1.
        prompt_len / output_len / block_size: as ``parallel_sampling_savings``.
        seed: RNG seed of the candidate choice.
        keep_best: probability a survivor extends beam 0, in [0, 1].

    Returns:
        the same dict as ``parallel_sampling_savings``.
    """
    rng = random.Random(seed)
    num_blocks = 2 * beam_width * (-(-(prompt_len + output_len) // block_size) + 2)
    m = KVCacheManager(block_size, num_blocks, prompt_len + output_len + 1)
    root = Request("b0", [7] * prompt_len)
    m.allocate_slots(root, prompt_len)
    root.num_computed_tokens = prompt_len
    beams, next_id = [root], 1
    with_s: list[int] = []
    without: list[int] = []
    copies = 0
    for step in range(output_len):
        parents = [beams[0] if rng.random() < keep_best else rng.choice(beams) for _ in range(beam_width)]
        survivors: list[Request] = []
        used: set[str] = set()
        for p in parents:  # first pick continues the beam, later picks fork it
            if p.request_id not in used:
                used.add(p.request_id)
                survivors.append(p)
            else:
                child = Request(f"b{next_id}", p.all_token_ids)
                next_id += 1
                m.fork(p, child)
                survivors.append(child)
        for b in beams:
            if b.request_id not in used:
                m.free(b)
        for i, s in enumerate(survivors):
            _decode_one(m, s, 1000 * i + step)
        copies += len(m.take_pending_copies())
        beams = survivors
        with_s.append(m.num_held_blocks())
        without.append(m.num_blocks_without_sharing())
    return _result(with_s, without, copies)
