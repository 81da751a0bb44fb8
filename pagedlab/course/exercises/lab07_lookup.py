"""Lab 07 - the hash-chain prefix lookup of vLLM v1 (0.9 - 0.11): ``get_computed_blocks``.

* ``07.get_computed_blocks`` - ``get_computed_blocks(request, block_pool, block_size) ->
  (blocks, num_computed_tokens)``: walk ``request.block_hashes`` through
  ``BlockPool.get_cached_block``, stop at the first miss, and never hit the request's last token
  (at most ``(num_tokens - 1) // block_size`` blocks; vLLM v1 ``KVCacheManager.get_computed_blocks``
  passes ``max_cache_hit_length = num_tokens - 1`` to ``find_longest_cache_hit``). A lookup only:
  reference counts and the free queue are left alone (``allocate_slots`` touches the hits later).

The tests run on a real :class:`pagedlab.core.block_pool.BlockPool` filled through its public
calls (``get_new_blocks``, ``cache_full_blocks``, ``free_blocks``). The reference agrees with
``pagedlab.core.kv_cache_manager.KVCacheManager.get_computed_blocks`` (checked in ``tests/grading``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from pagedlab.core import hashing
from pagedlab.core.block_pool import BlockPool
from pagedlab.grading.contract import observe_contract, observe_read_only, snapshot
from pagedlab.grading.registry import Exercise, register
from pagedlab.parts import contracts
from pagedlab.request import Request
from pagedlab.viz import render_block_pool

#: Chain root of the tests (a fixed seed: both runs of a test see the same hashes).
NONE_HASH = hashing.make_none_hash(7)


def _render(state: dict[str, Any], expected: Any, path: Any) -> str:

    chain = state.get("chain", [])
    got = state.get("hit_blocks")
    hits: list[Any] = got if isinstance(got, list) else []
    walk = " ".join(f"#{i}->{b if b is not None else 'miss'}" for i, b in enumerate(chain)) or "no full block"
    title = f"returned {hits} (underlined); cache: {walk}"
    return render_block_pool(state["pool"], highlight=[b for b in hits if isinstance(b, int)], title=title)


LOOKUP = register(
    Exercise(
        "07.get_computed_blocks",
        "get_computed_blocks",
        "vLLM's prefix lookup: walk the hash chain, stop at the first miss, never hit the last token",
        render=_render,
        components=("prefix_lookup", "get_computed_blocks"),
    )
)


def make_request(rid: str, tokens: Sequence[int], block_size: int) -> Request:
    """A request whose ``block_hashes`` chain its full blocks from :data:`NONE_HASH`."""
    return Request(rid, list(tokens), block_hasher=hashing.get_request_block_hasher(block_size, NONE_HASH))


def cache_prompt(
    pool: BlockPool, rid: str, tokens: Sequence[int], block_size: int, *, free: bool = True, skip_first: int = 0
) -> list[int]:
    """Run ``tokens`` as a request: pop its blocks, publish its full blocks (all but the first
    ``skip_first``, as if those had been evicted), then free them tail first when ``free``.

    Returns:
        The pool block ids the request used.
    """
    req = make_request(rid, tokens, block_size)
    blocks = pool.get_new_blocks(-(-len(tokens) // block_size), owner=rid)
    pool.cache_full_blocks(req, blocks, skip_first, len(tokens) // block_size, block_size)
    if free:
        pool.free_blocks(reversed(blocks), owner=rid)
    return [b.block_id for b in blocks]


def pool_state(pool: BlockPool) -> dict[str, Any]:
    """Reference counts, free-queue order and the cached-block map (block id -> hash, shortened)."""
    return {
        "ref_cnt": [b.ref_cnt for b in pool.blocks],
        "free_queue": [b.block_id for b in pool.free_block_queue.get_all_free_blocks()],
        "cached": {bid: h.hex()[:8] for h, m in pool.cached_block_hash_to_block.items() for bid in m},
    }


def _blocks_hint(num_tokens: int, block_size: int, chain: list[int | None]) -> Any:
    def hint(expected: Any, got: Any, state: Any) -> str | None:
        if not isinstance(got, list) or not isinstance(expected, list):
            return "return a pair (list of the hit KVCacheBlock objects, number of tokens they hold)"
        limit = (num_tokens - 1) // block_size
        if len(got) > len(expected) and len(got) > limit:
            return (
                f"never hit the last token: with {num_tokens} tokens at most (num_tokens - 1) // block_size = "
                f"{limit} block(s) may hit, so at least one token is left to compute the next token's logits"
            )
        if len(got) > len(expected):
            return (
                "stop at the first miss: a block after a missing one cannot be reused, even if its hash is "
                "cached (its KV was computed after tokens this request does not have in cache)"
            )
        if len(got) < len(expected):
            return (
                f"every block up to the first miss hits, as long as the hit leaves a token to compute "
                f"(here up to {limit} block(s)): get_cached_block(request.block_hashes[i]) for i = 0, 1, ..."
            )
        return "block i of the hit is whatever block_pool.get_cached_block(request.block_hashes[i]) returns"

    return hint


def _blocks_of(pool: BlockPool, got: Any) -> Any:
    if not isinstance(got, (list, tuple)):
        return f"<{type(got).__name__}>"
    return [
        b.block_id if any(b is x for x in pool.blocks) else f"<not a block of the pool: {type(b).__name__}>"
        for b in got
    ]


def lookup(fn: Any, rec: Any, pool: BlockPool, tokens: Sequence[int], block_size: int) -> None:
    """Record one call of ``fn`` on a new request holding ``tokens``: the hit, then the pool after."""
    req = make_request("new", tokens, block_size)
    chain = [b.block_id if (b := pool.get_cached_block(h)) is not None else None for h in req.block_hashes]
    rec.step(f"get_computed_blocks(request with {len(tokens)} tokens, block_pool, block_size={block_size})")
    before = pool_state(pool)
    hashes = snapshot(contracts.GET_COMPUTED_BLOCKS_MUTATES, **{"request.block_hashes": req.block_hashes})
    out = fn(req, pool, block_size)
    observe_contract(rec, contracts.GET_COMPUTED_BLOCKS, out)
    observe_read_only(rec, contracts.GET_COMPUTED_BLOCKS_MUTATES, hashes, **{"request.block_hashes": req.block_hashes})
    try:
        got, num = out
    except (TypeError, ValueError):
        rec.fail(
            f"get_computed_blocks must return a pair (blocks, num_computed_tokens); it returned {type(out).__name__}"
        )
    hit = _blocks_of(pool, got)
    rec.state(
        {
            "pool": pool.snapshot(),
            "chain": chain,
            "hit_blocks": hit,
            "num_tokens": len(tokens),
            "block_size": block_size,
        }
    )
    rec.observe("hit blocks (pool block ids, in order)", hit, hint=_blocks_hint(len(tokens), block_size, chain))
    rec.observe(
        "num_computed_tokens",
        num,
        hint="num_computed_tokens counts tokens: len(blocks) * block_size (a hit is block-aligned)",
    )
    after = pool_state(pool)
    rec.observe(
        "block pool after the lookup (ref counts, free queue, cached map)",
        after,
        hint=lambda e, g, s: _pool_hint(before, g),
    )


def _pool_hint(before: dict[str, Any], got: Any) -> str:
    if isinstance(got, dict) and got.get("ref_cnt") != before["ref_cnt"]:
        return (
            "lookup only: do not touch the hits or change a ref_cnt - the scheduler may still decide not to "
            "admit the request; allocate_slots claims the blocks when it does"
        )
    return "lookup only: leave the free queue and the cached-block map as they are"


def tokens(seed: int, n: int) -> list[int]:
    """``n`` deterministic token ids."""
    return [(seed * 31 + 7 * i) % 101 for i in range(n)]


def _cache_then_lookup(
    title: str, num_blocks: int, block_size: int, cached: list[tuple[str, int, int, bool]], asked: list[tuple[int, int]]
) -> None:
    """Register test ``title``: cache each ``(request id, token seed, length, finished)`` prompt of
    ``cached`` (a finished one's blocks are freed, cached and free; a running one's stay held), then
    record one lookup per ``(token seed, length)`` of ``asked``."""

    @LOOKUP.test(title)
    def _(fn: Any, rec: Any) -> None:
        pool = BlockPool(num_blocks, enable_caching=True)
        for rid, seed, n, finished in cached:
            cache_prompt(pool, rid, tokens(seed, n), block_size, free=finished)
        for seed, n in asked:
            lookup(fn, rec, pool, tokens(seed, n), block_size)


# fmt: off
_LOOKUP_TESTS: list[tuple[str, int, int, list[tuple[str, int, int, bool]], list[tuple[int, int]]]] = [
    ("an empty cache hits nothing",
     8, 4, [], [(1, 9)]),
    ("a cached prefix hits whole blocks; the request's partial last block is computed",
     12, 4, [("a", 1, 12, True)], [(1, 10), (1, 14)]),
    ("never hit the last token: k cached full blocks hit k - 1",
     12, 4, [("a", 2, 12, True)], [(2, 12), (2, 8), (2, 4)]),
    ("held and free cached blocks: the lookup changes no ref count and no queue",
     10, 2, [("a", 5, 8, False), ("b", 6, 6, True)], [(5, 9), (6, 7)]),
]
# fmt: on
for _args in _LOOKUP_TESTS:
    _cache_then_lookup(*_args)


@LOOKUP.test("the walk stops at the first miss, even when a later block is cached")
def _(fn: Any, rec: Any) -> None:
    pool = BlockPool(12, enable_caching=True)
    cache_prompt(pool, "a", tokens(3, 16), 4, skip_first=1)  # block 0 evicted, blocks 1-3 still cached
    lookup(fn, rec, pool, tokens(3, 17), 4)
    cache_prompt(pool, "b", tokens(3, 5), 4)  # block 0 back: the chain is whole again
    lookup(fn, rec, pool, tokens(3, 17), 4)


@LOOKUP.test("one different token changes every later hash: the hit ends before it")
def _(fn: Any, rec: Any) -> None:
    pool = BlockPool(12, enable_caching=True)
    cache_prompt(pool, "a", tokens(4, 16), 4)
    other = tokens(4, 16)
    other[5] = 100
    lookup(fn, rec, pool, other, 4)


@LOOKUP.test("random prompts and block sizes against the reference")
def _(fn: Any, rec: Any) -> None:
    rng = random.Random(7)
    for bs in (1, 3, 4):
        pool = BlockPool(40, enable_caching=True)
        for i in range(4):
            base = rng.randint(1, 3)
            cache_prompt(pool, f"r{i}", tokens(base, rng.randint(1, 10)), bs, free=rng.random() < 0.7)
        for _ in range(4):
            lookup(fn, rec, pool, tokens(rng.randint(1, 3), rng.randint(1, 12)), bs)


# --- differential test (random cases against the reference, pagedlab.grading.differential) -------------
# One case: a pool of 4-64 blocks of 1, 2, 4 or 16 tokens, filled by 1-5 requests as the engine runs them
# (each prompt an earlier one cut anywhere plus new tokens: shared prefixes; finished ones freed tail first
# and still cached, running ones holding their blocks, some published from a later block on as if the
# first had been evicted; with a cache salt or not), then 1-3 lookups of new requests, some of them
# preempted requests coming back (their generated tokens hashed too). Token ids from the whole
# vocabulary. Each lookup records the result's type, the hit, the token count, the pool and the request.
from hypothesis import strategies as st  # noqa: E402

from pagedlab.grading.differential import differential  # noqa: E402


@st.composite
def _lookup_case(draw: Any) -> dict[str, Any]:
    bs = draw(st.sampled_from([1, 2, 4, 16]))
    alphabet = draw(st.lists(st.integers(0, 50_000), min_size=1, max_size=3, unique=True))
    tok = st.sampled_from(alphabet)
    # a prompt: the first `cut` tokens of an earlier one (index `src`; -1: none), then `tail`; new prompts
    # of up to 5 blocks, and many an earlier prompt whole and more (a repeated system prompt, a next turn)
    fresh = st.tuples(st.just(-1), st.just(0), st.lists(tok, min_size=1, max_size=5 * bs))
    cut = st.tuples(st.integers(0, 5), st.integers(0, 6 * bs), st.lists(tok, max_size=2 * bs))
    again = st.tuples(st.integers(0, 5), st.just(10**6), st.lists(tok, max_size=2 * bs))
    prompt = st.one_of(fresh, cut, again)
    ran = st.tuples(prompt, st.booleans(), st.sampled_from([0, 0, 1, 2]), st.sampled_from([None, None, "tenant-b"]))
    asked = st.tuples(st.one_of(cut, again), st.integers(0, 2 * bs), st.sampled_from([None, None, "tenant-b"]))
    return {
        "block_size": bs,
        "num_blocks": draw(st.integers(4, 64)),
        "ran": draw(st.lists(ran, min_size=1, max_size=5)),  # (prompt, finished, blocks not published, salt)
        "asked": draw(st.lists(asked, min_size=1, max_size=3)),  # (prompt, tokens generated before, salt)
    }


def _prompt_tokens(earlier: list[list[int]], spec: Any, fallback: int) -> list[int]:
    src, cut, tail = spec
    out = (list(earlier[int(src) % len(earlier)][: int(cut)]) if earlier and src >= 0 else []) + list(tail)
    out = out or [fallback]
    earlier.append(out)
    return out


def _request(rid: str, tokens: list[int], bs: int, generated: int, salt: Any) -> Request:
    """A request over ``tokens``; the last ``generated`` of them were generated before a preemption."""
    n = max(1, len(tokens) - generated)
    req = Request(
        rid,
        [int(str(t)) for t in tokens[:n]],
        block_hasher=hashing.get_request_block_hasher(bs, NONE_HASH),
        cache_salt=salt,
    )
    if tokens[n:]:
        req.append_output_token_ids([int(str(t)) for t in tokens[n:]])
    return req


def _request_state(req: Request) -> dict[str, Any]:
    return {
        "all_token_ids": list(req.all_token_ids),
        "block_hashes": [h.hex()[:8] for h in req.block_hashes],
        "num_computed_tokens": req.num_computed_tokens,
        "num_cached_tokens": req.num_cached_tokens,
        "status": str(req.status),
    }


def _describe_lookup(case: Any) -> str:
    bs, first = case["block_size"], 0
    earlier: list[list[int]] = []
    ran = []
    for i, (spec, finished, skip, salt) in enumerate(case["ran"]):
        toks = _prompt_tokens(earlier, spec, first)
        ran.append(
            f"r{i} {len(toks)} tokens {toks[:12]}{'...' if len(toks) > 12 else ''}"
            f"{' finished' if finished else ' running'}{' (first block evicted)' if skip else ''}"
            f"{f' salt {salt}' if salt else ''}"
        )
    asked = []
    for spec, generated, salt in case["asked"]:
        toks = _prompt_tokens(earlier, spec, first)
        asked.append(
            f"{len(toks)} tokens {toks[:12]}{'...' if len(toks) > 12 else ''}"
            + (f" ({min(generated, len(toks) - 1)} generated before a preemption)" if generated else "")
            + (f" salt {salt}" if salt else "")
        )
    return (
        f"{case['num_blocks']} blocks of {bs} tokens; ran: {'; '.join(ran) or 'nothing'}; "
        f"then lookups of: {'; '.join(asked)}"
    )


@differential(
    LOOKUP,
    _lookup_case(),
    examples=60,
    describe=_describe_lookup,
    draws=(
        "a pool of 4-64 blocks of 1, 2, 4 or 16 tokens filled by 1-5 requests (new prompts of up to 5 blocks, "
        "earlier ones cut anywhere or whole and more, token ids 0-50000; finished and freed tail first, or running; some with their first block "
        "evicted; with a cache salt or not), then 1-3 lookups, some by preempted requests with generated tokens"
    ),
)
def _(fn: Any, case: Any, rec: Any) -> None:
    bs = int(case["block_size"])
    pool = BlockPool(int(case["num_blocks"]), enable_caching=True)
    earlier: list[list[int]] = []
    for i, (spec, finished, skip, salt) in enumerate(case["ran"]):
        toks = _prompt_tokens(earlier, spec, 0)
        need = -(-len(toks) // bs)
        if need > pool.get_num_free_blocks():
            continue  # the engine would not admit it now
        req = _request(f"r{i}", toks, bs, 0, salt)
        blocks = pool.get_new_blocks(need, owner=req.request_id)
        pool.cache_full_blocks(req, blocks, min(int(skip), len(toks) // bs), len(toks) // bs, bs)
        if finished:
            pool.free_blocks(reversed(blocks), owner=req.request_id)
    for j, (spec, generated, salt) in enumerate(case["asked"]):
        toks = _prompt_tokens(earlier, spec, 0)
        req = _request(f"new{j}", toks, bs, int(generated), salt)
        chain = [b.block_id if (b := pool.get_cached_block(h)) is not None else None for h in req.block_hashes]
        rec.step(
            f"get_computed_blocks(request with {req.num_tokens} tokens ({req.num_output_tokens} generated), "
            f"block_pool, block_size={bs})"
        )
        before, req_before = pool_state(pool), _request_state(req)
        out = fn(req, pool, bs)
        observe_contract(rec, contracts.GET_COMPUTED_BLOCKS, out)
        try:
            got, num = out
        except (TypeError, ValueError):
            rec.fail(
                f"get_computed_blocks must return a pair (blocks, num_computed_tokens); it returned {type(out).__name__}"
            )
        hit = _blocks_of(pool, got)
        rec.state(
            {"pool": pool.snapshot(), "chain": chain, "hit_blocks": hit, "num_tokens": len(toks), "block_size": bs}
        )
        rec.observe("hit blocks (pool block ids, in order)", hit, hint=_blocks_hint(req.num_tokens, bs, chain))
        rec.observe(
            "num_computed_tokens",
            num,
            hint="num_computed_tokens counts tokens: len(blocks) * block_size (a hit is block-aligned)",
        )
        after = pool_state(pool)
        rec.observe(
            "block pool after the lookup (ref counts, free queue, cached map)",
            after,
            hint=lambda e, g, s, before=before: _pool_hint(before, g),
        )
        rec.observe(
            "the request after the lookup (its tokens, block hashes, counters, status)",
            _request_state(req),
            hint=(
                "lookup only: leave the request as it is (its block_hashes, num_computed_tokens, status) - the "
                f"scheduler updates it once it admits the request; it was {req_before['num_computed_tokens']} "
                f"computed tokens and {len(req_before['block_hashes'])} block hashes"
            ),
        )
