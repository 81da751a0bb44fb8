"""The end-of-lab self-check questions, by lab (``"00"`` ... ``"09"``), for :func:`pagedlab.viz.quiz.self_check`.

Drawn from each lab and from the course's source lectures (the self-test lists that close each
section). Claims about vLLM describe vLLM 0.11.0 (v1), about SGLang 0.4.6/0.5.x, unless a question
names another version. Each lab's notebook ends with ``self_check(SELF_CHECKS["NN"])``.
"""

from __future__ import annotations

from pagedlab.viz.quiz import Question, SelfCheck, self_check

__all__ = ["SELF_CHECKS", "lab_self_check"]

Q = Question


def _rotate(questions: list[Question]) -> list[Question]:
    """Question ``i`` with its choices rotated left by ``i``, so the right answer moves between buttons."""
    out = []
    for i, q in enumerate(questions):
        k = i % len(q.choices)
        out.append(Question(q.prompt, q.choices[k:] + q.choices[:k], (q.answer - k) % len(q.choices), q.explain))
    return out


_WRITTEN: dict[str, list[Question]] = {
    "00": [
        Q(
            "What does the KV cache store?",
            (
                "the model's weights",
                ("the keys and values of every earlier token, per layer"),
                "the sampled output text",
            ),
            1,
            "Each new token attends to all earlier tokens; keeping their K and V avoids recomputing them.",
        ),
        Q(
            "How does a request's KV cache grow while it decodes?",
            (
                ("by one token's K and V per step, in every layer"),
                "by one whole block per step",
                "not at all after the prompt",
            ),
            0,
            "One new token per step; a new block is taken only when the last one is full.",
        ),
        Q(
            "With block_size=16, when does a running request take a new block?",
            ("every step", ("when its last block is full and a token must be written"), "only at admission"),
            1,
            "Blocks are taken on demand, one each time a token starts a new logical block.",
        ),
        Q(
            "What limits how many requests run together in this lab?",
            ("the number of CPU cores", ("max_num_seqs and the free blocks of the pool"), "the tokenizer"),
            1,
            "Seats (max_num_seqs) and KV blocks: a request needs both to run.",
        ),
        Q(
            "Reserving max_model_len tokens per request, as older servers did, in this 32-block pool would...",
            ("fit all six prompts", "not fit even one request", "fit exactly two"),
            1,
            "The summary's last line: max_model_len needs more blocks than the whole pool holds.",
        ),
    ],
    "01": [
        Q(
            "KV bytes per token of a model with L layers, H_kv KV heads of size d, in b-byte elements:",
            ("L x H_kv x d x b", "2 x L x H_kv x d x b", "2 x H_kv x d x b"),
            1,
            "K and V (x2), in every layer, for every KV head.",
        ),
        Q(
            "OPT-13B / LLaMA-13B (40 layers, hidden 5120, multi-head) in fp16 need per token about:",
            ("160 KB", "800 KB", "8 MB"),
            1,
            "2 x 40 x 5120 x 2 bytes = 800 KB (the vLLM paper's figure).",
        ),
        Q(
            "Reserving max_model_len per request wastes memory in which ways?",
            (
                "only external fragmentation",
                "reserved-but-unused future slots, internal waste, and external holes",
                "none, if lengths are known",
            ),
            1,
            "Reservation, internal and external fragmentation: the three kinds the lab measures.",
        ),
        Q(
            "Max-length reservation: a reservation of M slots is on average filled to...",
            ("M, always", "L / M, with L the mean number of tokens a running request holds", "block_size / M"),
            1,
            "A request holds P + t tokens at its step t; averaged over its steps that is L, far below M.",
        ),
        Q(
            "What waste is left with small fixed-size blocks allocated on demand?",
            ("none at all", "the unused tail of each request's last block", "half of every block"),
            1,
            "On average about half a block per request: internal waste in the last block only.",
        ),
        Q(
            "Why does even the Oracle allocator (which knows each final length) still waste memory?",
            (
                "it reserves the final length from the start, before the tokens exist, and leaves holes",
                "it uses blocks",
                "it cannot: the Oracle wastes nothing",
            ),
            0,
            "Reserved-ahead slots sit empty until generated, and freed regions leave external holes.",
        ),
    ],
    "02": [
        Q(
            "slot(pos) in a paged KV cache is:",
            (
                "block_table[pos] * block_size",
                ("block_table[pos // block_size] * block_size + pos % block_size"),
                "pos % num_gpu_blocks",
            ),
            1,
            "The logical block picks the physical block; the offset is the position within it.",
        ),
        Q(
            "Why is vLLM's free queue a doubly linked list threaded through the blocks?",
            (
                "to save memory",
                "so a free block can be removed from the middle in O(1) on a prefix-cache hit",
                "to sort blocks",
            ),
            1,
            "A cached free block can be claimed back; a deque's remove would search the whole queue.",
        ),
        Q(
            "What are the sentinel blocks at the ends of the queue for?",
            (
                "they store the cache's hashes",
                "every real block always has two neighbours: no special cases at the ends",
                "to reserve memory",
            ),
            1,
            "fake_free_list_head / fake_free_list_tail.",
        ),
        Q(
            "In vLLM 0.11.0 (v1), a finishing request's blocks join the free queue...",
            (("at the front, first block first"), "at the back, last block first", "in random order"),
            1,
            "free_blocks(reversed(blocks)): the tail is evicted first and the shared head of a chain lasts longest.",
        ),
        Q(
            "In the OS analogy, the block table plays the role of...",
            ("the TLB", "the page table", "the swap file"),
            1,
            "Logical block -> physical block, as virtual page -> physical frame.",
        ),
        Q(
            "Doubling block_size from 16 to 32 on long requests roughly...",
            (
                "halves the tail waste",
                "doubles the tail waste and halves the block-table length",
                "leaves both unchanged",
            ),
            1,
            "About half a block is wasted per request; the table has half as many entries.",
        ),
    ],
    "03": [
        Q(
            "What does fork copy?",
            ("the KV of every block", ("the block table, adding one reference per distinct block"), "nothing"),
            1,
            "KV is shared; only the table and the reference counts change.",
        ),
        Q(
            "Which block ever needs copying after a fork?",
            (
                "every shared block",
                ("a shared, partly filled last block, at the first write into it"),
                "the first block",
            ),
            1,
            "Full blocks are never written again; only the partial last block can diverge.",
        ),
        Q(
            "Two sequences share a partial last block (ref_cnt 2). The first appends: what happens?",
            (
                "it writes in place",
                ("it copies the block to a new one and writes there; the other keeps the original"),
                "both copy",
            ),
            1,
            "Copy-on-write: the last remaining owner may write in place.",
        ),
        Q(
            "In the OS analogy, fork + copy-on-write corresponds to...",
            (("Unix fork(): pages shared read-only until one side writes"), "malloc", "a page fault to disk"),
            0,
            "The same trick, per block instead of per page.",
        ),
        Q(
            "Which workload saves the most from sharing?",
            ("short prompts, long outputs", ("long prompts, short outputs, many samples"), "one sample per prompt"),
            1,
            "The saving is the shared prefix's share of each sequence's blocks.",
        ),
        Q(
            "vLLM 0.11.0 (v1) gets the saving for n > 1 from...",
            (
                "fork and CoW, as v0",
                ("prefix caching on full blocks; the partial block is recomputed"),
                "it does not share",
            ),
            1,
            "v1 has no fork: the children hit the parent's full blocks in the prefix cache.",
        ),
    ],
    "04": [
        Q(
            "Static batching holds each seat until...",
            ("its own request finishes", ("the slowest request of the batch finishes"), "every step"),
            1,
            "The batch lives and dies together.",
        ),
        Q(
            "Continuous (iteration-level) batching re-forms the batch...",
            ("once per request", ("at every forward pass"), "every 16 tokens"),
            1,
            "A finished request's seat is reused in the next step.",
        ),
        Q(
            "Why does continuous batching need paged memory?",
            (
                "it does not",
                ("a newcomer must find memory in the step it joins; reservation admits few requests and fragments"),
                "for speed of matmuls",
            ),
            1,
            "With max-length reservation the admitted batch collapses to what whole reservations allow.",
        ),
        Q(
            "Does batching change a request's greedy answer?",
            ("yes, slightly", "no", "only for long prompts"),
            1,
            "Each row attends only to its own KV: outputs were identical under both schedulers.",
        ),
        Q(
            "The request state machine: a preempted request (recompute) goes back to...",
            ("FINISHED", "the head of the waiting queue", "the tail of the running queue"),
            1,
            "It is WAITING again (PREEMPTED in vLLM 0.11.0) and resumes before newcomers.",
        ),
        Q(
            "Orca's 36.9x is a comparison of...",
            ("raw throughput", "throughput at equal latency", "memory use"),
            1,
            "At a given latency target; raw throughput gains are smaller.",
        ),
    ],
    "05": [
        Q(
            "Without a token budget, a long prompt arriving while others decode...",
            ("waits", "stalls every running decode for its whole prefill step", "is dropped"),
            1,
            "A prefill shares its step with every decode.",
        ),
        Q(
            "The chunk a request gets is n = min(missing, threshold if > 0, ...)",
            ("max_num_seqs", "budget left in the step", "block_size"),
            1,
            "Decodes first, then prefills, from one budget.",
        ),
        Q(
            "In vLLM 0.11.0 (v1), chunked prefill is...",
            ("always on, no switch", ("on by default; enable_chunked_prefill=False is honoured"), "off by default"),
            1,
            "With it off, a waiting prompt that does not fit the budget whole waits.",
        ),
        Q(
            "The price of chunking for the long prompt itself:",
            ("nothing", "a later first token", "a different answer"),
            1,
            "Its prefill is spread over several steps.",
        ),
        Q(
            "Chunking changes the greedy outputs:",
            ("yes", "no"),
            1,
            "Every chunk reads the KV its earlier chunks wrote.",
        ),
    ],
    "06": [
        Q(
            "vLLM 0.11.0 (v1) with the fcfs policy preempts...",
            ("the oldest running request", "the newest running request (LIFO)", "the longest"),
            1,
            "Priority mode takes the largest (priority, arrival) instead.",
        ),
        Q(
            "Recompute preemption...",
            (
                "copies the blocks to CPU",
                ("frees the blocks, sets num_computed_tokens = 0, keeps the outputs"),
                "drops the request",
            ),
            1,
            "It re-prefills prompt + outputs when resumed.",
        ),
        Q(
            "Swap vs recompute: the ratio of their costs depends on the sequence length T?",
            ("yes, linearly", "no: T cancels", "only for T > 4096"),
            1,
            "2T·kv/PCIe vs 2P·T/FLOPs: T appears on both sides.",
        ),
        Q(
            "Does vLLM 0.11.0 (v1) swap to CPU on preemption?",
            ("yes", "no: it recomputes (swap was v0 only)"),
            1,
            "Recompute, helped by the prefix cache.",
        ),
        Q(
            "As the pool shrinks, preemptions per finished request...",
            ("stay at zero", ("rise: the engine recomputes the same tokens again and again (thrashing)"), "fall"),
            1,
            "Watch vLLM's num_preemptions: a rising count means the pool is too small for the load.",
        ),
        Q(
            "SGLang retracts which decode first?",
            ("the one with the fewest generated tokens", "the newest", "the oldest"),
            0,
            "retract_decode sorts by generated tokens, ties to the longest prompt.",
        ),
    ],
    "07": [
        Q(
            "A block's hash in vLLM's chain names...",
            ("its 16 tokens only", ("its whole prefix, through the parent's hash"), "its block id"),
            1,
            "H_i = sha256(H_{i-1}, tokens_i, extra keys).",
        ),
        Q(
            "Why must the root of the chain be random per process (bug B1, docs/bugs.md#b1)?",
            ("speed", "so an attacker cannot precompute colliding hashes", "to save memory"),
            1,
            "hash(None) became a constant in Python 3.12.",
        ),
        Q(
            "A 12-token prompt, block_size 4, fully cached: how many tokens does vLLM compute?",
            ("0", "1", "4"),
            2,
            "At most num_tokens - 1 can hit, block-aligned: the whole last block is recomputed.",
        ),
        Q(
            "Two identical prompts in one step, vLLM 0.11.0: ...",
            (
                "merged into one block table",
                "both keep their own copies; block tables stay append-only",
                "the second is rejected",
            ),
            1,
            "SGLang's radix insert de-duplicates instead.",
        ),
        Q(
            "SGLang evicts...",
            ("any node", "unlocked leaves, least recently used first", "the root first"),
            1,
            "Shared ancestors survive until they become leaves.",
        ),
        Q(
            "When does SGLang (0.4.6 / 0.5.x) insert a running request's prompt into the tree?",
            (
                "only when it finishes",
                "right after prefill (cache_unfinished_req), so concurrent requests hit it",
                "never",
            ),
            1,
            "pagedlab inserts on finish only; SGLang also inserts after prefill and each chunk.",
        ),
    ],
    "08": [
        Q(
            "How does a paged attention kernel read K and V?",
            (
                "it first gathers them into a contiguous copy",
                "through the block table, block by block",
                "from the model weights",
            ),
            1,
            "Position p is row p % block_size of block block_table[p // block_size].",
        ),
        Q(
            "One program per (sequence, KV head) in a GQA model serves...",
            ("one query head", ("all the query heads sharing that KV head"), "all heads of all sequences"),
            1,
            "Each key is loaded once for its whole group (3 query heads per KV head in SmolLM2).",
        ),
        Q(
            "Lanes past seq_len must be masked...",
            ("only in the scores", "in the loads, table lookup included", "not at all"),
            1,
            "Stale memory can hold NaN; NaN x 0 is NaN.",
        ),
        Q(
            "Decode attention speed on a GPU is bounded by...",
            ("FLOPs", "memory bandwidth", "PCIe"),
            1,
            "One query per sequence reads all its KV: little arithmetic per byte.",
        ),
        Q(
            "Does the kernel's tile size have to equal block_size?",
            ("yes", ("no: tiles and blocks are independent")),
            1,
            "The table lookup happens per lane.",
        ),
    ],
    "09": [
        Q(
            "TTFT is...",
            ("time per output token", "queueing plus prefill, until the first token", "total time"),
            1,
            "What a user waits before the answer starts.",
        ),
        Q(
            "TPOT is governed by...",
            ("the prompt length only", ("the length of each decode step, shared by the batch"), "the tokenizer"),
            1,
            "Every running request advances once per step.",
        ),
        Q(
            "At a few times the Azure trace's rate, one H100 with Llama-2-7B is first limited by...",
            ("compute", "its KV pool", "the network"),
            1,
            "Then preemptions and queueing follow.",
        ),
        Q(
            "What changes to run a pagedlab.LLM script on vllm.LLM?",
            ("everything", "one line (the import)", "the sampling parameters"),
            1,
            "The names and semantics are vLLM's.",
        ),
        Q(
            "The engine's per-step cost on this CPU is modelled as...",
            ("a fixed part plus a part per token", "constant", "quadratic in the batch"),
            0,
            "Fitted from two numbers, it reproduces the per-request latencies with the same scheduler.",
        ),
    ],
}


SELF_CHECKS: dict[str, list[Question]] = {lab: _rotate(qs) for lab, qs in _WRITTEN.items()}


def lab_self_check(lab: str) -> SelfCheck:
    """The self-check widget of lab ``lab`` (``"00"`` ... ``"09"``).

    Raises:
        KeyError: no questions for that lab.
    """
    if lab not in SELF_CHECKS:
        raise KeyError(f"no self-check for lab {lab!r}; labs with one: {sorted(SELF_CHECKS)}")
    return self_check(SELF_CHECKS[lab], title=f"Self-check, lab {lab}: click an answer to see if it is right")
