"""The named differential workloads (issue 25's list), built once per session.

Block sizes are 32: vLLM 0.32's CPU attention takes only multiples of 32. ``num_gpu_blocks`` is vLLM's
``num_gpu_blocks_override`` (one block fewer holds KV: vLLM's null block). Prompts are token ids; the
README workload renders ``data/prompts.jsonl`` through the kit's tokenizer and chat template.
"""

from __future__ import annotations

import json
import random

from pagedlab import data
from pagedlab.twin import EngineSettings, TwinRequest, Workload

VOCAB = 49152  # SmolLM2's


def greedy(max_tokens: int, **kw: object) -> dict[str, object]:
    return {"temperature": 0.0, "max_tokens": max_tokens, **kw}


def ids(rng: random.Random, n: int) -> list[int]:
    """``n`` random ordinary token ids (no special tokens: SmolLM2's are below 17)."""
    return [rng.randrange(100, VOCAB) for _ in range(n)]


def readme(num_prompts: int = 8, max_tokens: int = 24, prefix_caching: bool = True, repeats: int = 4) -> Workload:
    """The README's prompts (``data/prompts.jsonl``, chat template), then ``repeats`` of them asked again.

    The 8 prompts share only their 24-token chat header, under one 32-token block (the block size vLLM
    0.32's CPU attention needs), so on their own they can never hit the prefix cache. The repeats arrive at
    step 2, while the first ones still run: their first block (header and question) is a hit of 32 tokens.
    """
    from pagedlab.engine.llm_engine import load_model_cached

    tok = load_model_cached(None)[1]
    rows = [json.loads(line) for line in data.path("prompts.jsonl").read_text().splitlines() if line.strip()]
    reqs = []
    for row in rows[:num_prompts]:
        enc = tok.apply_chat_template(row["messages"], add_generation_prompt=True, tokenize=True, return_dict=True)
        prompt = [int(t) for t in enc["input_ids"]]
        reqs.append(TwinRequest(row["id"], prompt, greedy(min(row.get("max_tokens", 64), max_tokens))))
    reqs += [
        TwinRequest(f"{r.request_id}_again", r.prompt_token_ids, r.sampling, arrival_step=2) for r in reqs[:repeats]
    ]
    name = "readme" + ("" if prefix_caching else "_no_prefix_caching")
    return Workload(name, EngineSettings(num_gpu_blocks=65, enable_prefix_caching=prefix_caching), reqs)


def pressure(policy: str) -> Workload:
    """Recompute preemption: 6 requests of 2-3 blocks each grow into a pool of 7 usable blocks."""
    rng = random.Random(1)
    reqs = [
        TwinRequest(
            f"p{i}",
            ids(rng, rng.randrange(20, 60)),
            greedy(40, ignore_eos=True),
            arrival_step=i // 2,
            priority=[2, 0, 1, 0, 2, 1][i] if policy == "priority" else 0,
        )
        for i in range(6)
    ]
    settings = EngineSettings(num_gpu_blocks=8, scheduling_policy=policy, max_num_batched_tokens=128)
    return Workload(f"pressure_{policy}", settings, reqs)


def shared_system_prompt() -> Workload:
    rng = random.Random(2)
    system = ids(rng, 96)
    reqs = [
        TwinRequest(f"s{i}", system + ids(rng, rng.randrange(3, 40)), greedy(12, ignore_eos=True), arrival_step=2 * i)
        for i in range(6)
    ]
    return Workload("prefix_shared_system", EngineSettings(num_gpu_blocks=40, enable_prefix_caching=True), reqs)


def repeated_prompts() -> Workload:
    """The same prompts again: one of 70 tokens, one of exactly two blocks (its last block is recomputed)."""
    rng = random.Random(3)
    a, b = ids(rng, 70), ids(rng, 64)
    reqs = [
        TwinRequest(f"r{i}", (a, b)[i % 2], greedy(6, ignore_eos=True), arrival_step=3 * (i // 2)) for i in range(6)
    ]
    return Workload("prefix_repeated", EngineSettings(num_gpu_blocks=30, enable_prefix_caching=True), reqs)


def eviction_under_pressure() -> Workload:
    """Cached blocks are evicted by later distinct prompts, then a first prompt comes back."""
    rng = random.Random(4)
    first = ids(rng, 80)
    reqs = [TwinRequest("e0", first, greedy(8, ignore_eos=True))]
    reqs += [TwinRequest(f"e{i}", ids(rng, 70), greedy(8, ignore_eos=True), arrival_step=4 * i) for i in range(1, 5)]
    reqs += [TwinRequest("e_again", first + ids(rng, 5), greedy(8, ignore_eos=True), arrival_step=22)]
    return Workload("prefix_eviction", EngineSettings(num_gpu_blocks=10, enable_prefix_caching=True), reqs)


def chunked_long(threshold: int) -> Workload:
    rng = random.Random(5)
    reqs = [
        TwinRequest(f"c{i}", ids(rng, n), greedy(6, ignore_eos=True), arrival_step=i)
        for i, n in enumerate([420, 300, 40, 510])
    ]
    settings = EngineSettings(num_gpu_blocks=80, max_num_batched_tokens=256, long_prefill_token_threshold=threshold)
    return Workload(f"chunked_long_threshold_{threshold}", settings, reqs)


def no_chunking_oversized() -> Workload:
    """Chunking off: the second prompt is larger than the budget the first left; vLLM 0.32 stops admitting
    there (``break``; 0.11 skipped it and admitted the third)."""
    rng = random.Random(6)
    reqs = [TwinRequest(f"n{i}", ids(rng, n), greedy(6, ignore_eos=True)) for i, n in enumerate([60, 100, 30, 50])]
    settings = EngineSettings(
        num_gpu_blocks=40, max_num_batched_tokens=128, enable_chunked_prefill=False, max_model_len=128
    )
    return Workload("no_chunking_oversized", settings, reqs)


def few_seqs() -> Workload:
    rng = random.Random(7)
    reqs = [TwinRequest(f"q{i}", ids(rng, rng.randrange(5, 50)), greedy(rng.randrange(2, 10))) for i in range(7)]
    return Workload("max_num_seqs_2", EngineSettings(num_gpu_blocks=30, max_num_seqs=2), reqs)


def abort_mid_run() -> Workload:
    rng = random.Random(8)
    reqs = [
        TwinRequest("a0", ids(rng, 30), greedy(20, ignore_eos=True), abort_step=4),  # running
        TwinRequest("a1", ids(rng, 40), greedy(20, ignore_eos=True)),
        TwinRequest("a2", ids(rng, 20), greedy(20, ignore_eos=True), abort_step=2),  # still waiting
        TwinRequest("a3", ids(rng, 25), greedy(6, ignore_eos=True), arrival_step=1),
    ]
    return Workload("abort_mid_run", EngineSettings(num_gpu_blocks=30, max_num_seqs=2), reqs)


def parallel_sampling() -> Workload:
    """``n > 1`` with seeded random sampling (vLLM 0.32 refuses n > 1 greedy): n child requests on vLLM,
    ``parallel_sampling="requests"`` on the kit. The second and later children of a prompt of more than one
    block hit the first one's full blocks in the same step; m2 is aborted mid-run, all its children with it.
    ``ignore_eos`` keeps every schedule independent of the sampled tokens (the two samplers draw differently)."""
    rng = random.Random(9)

    def sampled(n: int, seed: int) -> dict[str, object]:
        return {"temperature": 0.8, "seed": seed, "n": n, "max_tokens": 8, "ignore_eos": True}

    reqs = [
        TwinRequest("m0", ids(rng, 20), sampled(2, 7)),
        TwinRequest("m1", ids(rng, 70), sampled(3, 8)),
        TwinRequest("m2", ids(rng, 45), sampled(2, 9), arrival_step=2, abort_step=5),
    ]
    return Workload("n_greater_than_one", EngineSettings(num_gpu_blocks=30, enable_prefix_caching=True), reqs)


def named() -> list[Workload]:
    """Every named workload whose schedule and greedy tokens must match (``parallel_sampling``, whose
    sampled tokens differ, is compared apart)."""
    return [
        readme(),
        readme(prefix_caching=False),
        pressure("fcfs"),
        pressure("priority"),
        shared_system_prompt(),
        repeated_prompts(),
        eviction_under_pressure(),
        chunked_long(0),
        chunked_long(48),
        no_chunking_oversized(),
        few_seqs(),
        abort_mid_run(),
    ]
