"""Lab 03 helpers: copy-on-write, played with the learner's functions, and measured on the real engine.

* :func:`cow_story` runs a fixed fork-and-append story on the kit's ``RefCountedPool`` with any
  ``fork`` / ``append_token`` pair (the learner's, or the reference) and returns pool snapshots
  to play with ``render_block_pool``.
* :func:`group_blocks` reads, from an ``LLMEngine``'s ``KVCacheManager``, how many distinct blocks each
  prompt's sequences hold and how many they would hold without sharing.
* :func:`parallel_sampling_sharing` and :func:`beam_search_sharing` run ``SamplingParams(n)`` and
  ``LLM.beam_search`` on the real engine and report the paper's saving,
  ``(blocks without sharing - blocks with sharing) / blocks without sharing``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pagedlab import SamplingParams
from pagedlab.analysis.kit import RefCountedPool, Seq
from pagedlab.inputs import TokensPrompt
from pagedlab.sampling_params import BeamSearchParams
from pagedlab.sim import CostModel
from pagedlab.viz.pictures import pool_snapshot

if TYPE_CHECKING:
    from pagedlab.engine.llm_engine import LLMEngine

__all__ = ["cow_story", "group_blocks", "parallel_sampling_sharing", "beam_search_sharing", "saving", "cow_copy_cost"]


def cow_story(
    fork: Callable[..., Any], append_token: Callable[..., Any], block_size: int = 4, num_blocks: int = 12
) -> list[tuple[dict[str, Any], str]]:
    """Prefill 6 tokens, fork twice, let the three sequences write, then free one.

    Returns:
        ``(snapshot, caption)`` pairs; a snapshot is in ``pagedlab.trace`` format, with the copy made
        in that frame (if any) as ``pending_copies``.
    """
    pool = RefCountedPool(num_blocks, block_size)
    seqs: dict[str, Seq] = {}
    frames: list[tuple[dict[str, Any], str]] = []

    def snap(caption: str, copies: Sequence[tuple[int, int]] = ()) -> None:
        tables = {sid: list(s.block_table) for sid, s in seqs.items()}
        frames.append(
            (
                pool_snapshot(
                    pool.ref_cnts(), tables, pool.free_queue(), step=len(frames), cow_pairs=[list(c) for c in copies]
                ),
                caption,
            )
        )

    parent = Seq("0", [pool.allocate() for _ in range(-(-6 // block_size))], 6)
    seqs["0"] = parent
    snap(
        f"prefill: the prompt (6 tokens) fills block {parent.block_table[0]} and part of block {parent.block_table[1]}"
    )
    for cid in ("0#1", "0#2"):
        seqs[cid] = fork(pool, parent, cid)
        snap(
            f"fork -> {cid}: no new block; every block of 0 gains a reference "
            f"(ref_cnt {pool.ref_cnt(parent.block_table[0])})"
        )
    for _ in range(3):
        for sid in ("0#1", "0#2", "0"):
            seq = seqs[sid]
            pos = seq.num_tokens
            copy = append_token(pool, seq)
            if copy:
                what = f"block {copy[0]} is shared, so it is copied to block {copy[1]} first (CoW)"
            elif pos % block_size == 0:
                what = f"a new block starts: block {seq.block_table[-1]}"
            else:
                what = f"block {seq.block_table[-1]} is its own (ref_cnt 1): written in place"
            snap(f"{sid} writes token {pos}: {what}", [copy] if copy else ())
    victim = seqs.pop("0#2")
    for b in reversed(victim.block_table):
        pool.free(b)
    snap("0#2 finishes: each of its blocks loses one reference; blocks nobody holds go back to the free queue")
    return frames


def group_blocks(engine: LLMEngine) -> dict[str, tuple[int, int]]:
    """Per submitted request of an ``LLMEngine`` (its fork children counted with it, by the engine's
    structural ``get_request_group_id``, never by parsing ids): ``(distinct blocks held, blocks
    without sharing)``. Requests the engine does not group (beam search's) count on their own."""
    held: dict[str, set[int]] = defaultdict(set)
    without: dict[str, int] = defaultdict(int)
    for rid, blocks in engine.kv_cache_manager.req_to_blocks.items():
        group = engine.get_request_group_id(rid) or rid
        ids = {b.block_id for b in blocks}
        held[group] |= ids
        without[group] += len(ids)
    return {g: (len(held[g]), without[g]) for g in held}


def saving(with_sharing: Sequence[int], without_sharing: Sequence[int]) -> float:
    """``1 - sum(with) / sum(without)``: the share of block-steps that sharing saved (time average)."""
    total = sum(without_sharing)
    return 1 - sum(with_sharing) / total if total else 0.0


def parallel_sampling_sharing(
    llm: Any, prompts: dict[str, list[int]], ns: Sequence[int], max_tokens: int, temperature: float = 0.8, seed: int = 0
) -> dict[tuple[str, int], dict[str, Any]]:
    """Run every (prompt, n) pair as one request with ``SamplingParams(n)``, all in one batch.

    Every sample generates exactly ``max_tokens`` tokens (``ignore_eos``), so all pairs are
    measured over the same steps. The engine must be idle.

    Returns:
        ``{(prompt name, n): {"with": [...], "without": [...], "saving", "final_saving"}}``, where
        ``with`` / ``without`` are the block counts after each step.
    """
    engine = llm.llm_engine
    groups = {}
    for name, ids in prompts.items():
        for n in ns:
            rid = f"{name}-n{n}"
            engine.add_request(
                rid,
                {"prompt_token_ids": list(ids)},
                SamplingParams(n=n, temperature=temperature, seed=seed, max_tokens=max_tokens, ignore_eos=True),
            )
            groups[rid] = (name, n)
    hist: dict[str, tuple[list[int], list[int]]] = {rid: ([], []) for rid in groups}
    while engine.has_unfinished_requests():
        engine.step()
        for rid, (held, alone) in group_blocks(engine).items():
            if rid in hist:
                hist[rid][0].append(held)
                hist[rid][1].append(alone)
    out = {}
    for rid, (name, n) in groups.items():
        w, wo = hist[rid]
        out[(name, n)] = {
            "with": w,
            "without": wo,
            "saving": saving(w, wo),
            "final_saving": 1 - w[-1] / wo[-1] if wo and wo[-1] else 0.0,
        }
    return out


def beam_search_sharing(
    llm: Any, prompts: dict[str, list[int]], widths: Sequence[int], max_tokens: int
) -> dict[tuple[str, int], dict[str, Any]]:
    """``LLM.beam_search`` for every (prompt, beam width) pair, one after the other.

    Returns:
        ``{(prompt name, width): {"with", "without", "saving", "final_saving", "peak_saving", "cow_copies",
        "text"}}``;
        ``peak_saving`` is ``BeamSearchOutput.memory_saving`` (at the step with the most blocks).
    """
    out = {}
    for name, ids in prompts.items():
        for w in widths:
            res = llm.beam_search(
                [TokensPrompt(prompt_token_ids=list(ids))], BeamSearchParams(beam_width=w, max_tokens=max_tokens)
            )[0]
            out[(name, w)] = {
                "with": res.blocks_with_sharing,
                "without": res.blocks_without_sharing,
                "saving": saving(res.blocks_with_sharing, res.blocks_without_sharing),
                "final_saving": (
                    1 - res.blocks_with_sharing[-1] / res.blocks_without_sharing[-1]
                    if res.blocks_without_sharing and res.blocks_without_sharing[-1]
                    else 0.0
                ),
                "peak_saving": res.memory_saving,
                "cow_copies": res.num_cow_copies,
                "text": res.sequences[0].text if res.sequences else "",
            }
    return out


def cow_copy_cost(
    model: Any, gpu: Any, block_size: int, num_copies: int, num_steps: int, batch: int, context_len: int
) -> dict[str, float]:
    """What copy-on-write costs at GPU scale: a copy reads and writes one block of every layer's K and V
    (``block_size * model.kv_bytes_per_token`` bytes each way, at HBM bandwidth), against the decode steps
    of the same run (``batch`` sequences of ``context_len`` tokens, the simulator's roofline).

    Args:
        model, gpu: a ``pagedlab.sim`` ``ModelSpec`` and ``GPUSpec``.
        block_size: tokens per block. num_copies: copies in the run. num_steps: decode steps in the run.
        batch, context_len: the decode steps' batch size and tokens of context per sequence.

    Returns:
        ``block_bytes``, ``copy_us`` (one copy), ``step_ms`` (one decode step) and ``share`` (all copies'
        time over all steps' time).
    """
    if min(block_size, num_steps, batch) < 1 or num_copies < 0 or context_len < 0:
        raise ValueError(
            "cow_copy_cost needs block_size, num_steps and batch >= 1 and num_copies, context_len >= 0, got "
            f"{block_size=}, {num_steps=}, {batch=}, {num_copies=}, {context_len=}"
        )
    block_bytes = block_size * model.kv_bytes_per_token
    copy_s = 2 * block_bytes / gpu.hbm_bandwidth
    step_s = CostModel(model, gpu).decode_step_time([context_len] * batch)
    return {
        "block_bytes": float(block_bytes),
        "copy_us": 1e6 * copy_s,
        "step_ms": 1e3 * step_s,
        "share": num_copies * copy_s / (num_steps * step_s),
    }
