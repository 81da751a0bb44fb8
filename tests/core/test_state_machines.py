"""Hypothesis stateful tests: BlockPool, KVCacheManager (fork/CoW/free/swap, both prefix caches),
RadixCache. Every step is followed by the invariant checks of engines.md sections 1.9, 2.2 and 6.

Beyond the structural invariants, the manager machine keeps a *shadow KV*: every slot written
holds ``(namespace, tokens[:pos+1])``. After every step each running request's computed
positions must still hold exactly its own prefix, so a wrong hit, a missed CoW, a swap that
loses sharing or an overwrite of a shared block all fail here.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from pagedlab.core.block_pool import BlockPool
from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.core.radix_cache import RadixCache
from pagedlab.errors import DoubleFreeError, NoFreeBlocksError
from pagedlab.request import Request
from pagedlab.trace import Tracer, _PoolState

from .helpers import check_manager, check_pool, state_of

OPS = {"n": 0}


def _settings(examples: int, steps: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        derandomize=False,
    )


# --- BlockPool ---------------------------------------------------------------------------
class _FakeReq:
    request_id = "r"

    def __init__(self, h):
        self.block_hashes = [h]


class BlockPoolMachine(RuleBasedStateMachine):
    N = 8
    CACHING = True

    def __init__(self):
        super().__init__()
        self.pool = BlockPool(self.N, enable_caching=self.CACHING)
        self.queue = list(range(self.N))  # model of the free queue, LRU first
        self.ref = [0] * self.N
        self.hash = {}  # block_id -> hash

    @rule(n=st.integers(0, 10))
    def get_new_blocks(self, n):
        OPS["n"] += 1
        if n > len(self.queue):
            before = self.pool.snapshot()
            try:
                self.pool.get_new_blocks(n)
                raise AssertionError("over-allocation must raise")
            except NoFreeBlocksError:
                assert self.pool.snapshot() == before
            return
        got = [b.block_id for b in self.pool.get_new_blocks(n)]
        assert got == self.queue[:n]  # LRU front first
        del self.queue[:n]
        for b in got:
            self.ref[b] = 1
            self.hash.pop(b, None)  # lazy eviction on reuse

    @rule(b=st.integers(0, N - 1))
    def touch(self, b):
        OPS["n"] += 1
        self.pool.touch([self.pool.blocks[b]])
        if self.ref[b] == 0:
            self.queue.remove(b)
        self.ref[b] += 1

    @rule(bs=st.lists(st.integers(0, N - 1), max_size=4))
    def free_blocks(self, bs):
        OPS["n"] += 1
        need = {b: bs.count(b) for b in bs}
        if any(need[b] > self.ref[b] for b in need):
            before = self.pool.snapshot()
            try:
                self.pool.free_blocks([self.pool.blocks[b] for b in bs])
                raise AssertionError("double free must raise")
            except DoubleFreeError:
                assert self.pool.snapshot() == before
            return
        self.pool.free_blocks([self.pool.blocks[b] for b in bs])
        # vLLM 0.32.0's rule: reaching 0, an unhashed block (any block, caching off) goes to the front,
        # a hashed one to the tail, each group in the order freed
        front, tail = [], []
        for b in bs:
            self.ref[b] -= 1
            if self.ref[b] == 0:
                (tail if self.CACHING and b in self.hash else front).append(b)
        self.queue = front + self.queue + tail

    @rule(b=st.integers(0, N - 1), h=st.sampled_from([b"a", b"b", b"c"]))
    def cache(self, b, h):
        OPS["n"] += 1
        if self.ref[b] == 0 or b in self.hash:
            return
        self.pool.cache_full_blocks(_FakeReq(h), [self.pool.blocks[b]], 0, 1, 4)
        if self.CACHING:  # with caching off nothing is published
            self.hash[b] = h

    @rule(h=st.sampled_from([b"a", b"b", b"c"]))
    def lookup(self, h):
        OPS["n"] += 1
        found = self.pool.get_cached_block(h)
        holders = {b for b, x in self.hash.items() if x == h}
        assert (found is None) == (not holders)
        if found is not None:
            assert found.block_id in holders and found.block_hash == h

    @invariant()
    def consistent(self):
        check_pool(self.pool)
        assert [b.block_id for b in self.pool.free_block_queue.get_all_free_blocks()] == self.queue
        assert [b.ref_cnt for b in self.pool.blocks] == self.ref


class BlockPoolNoCachingMachine(BlockPoolMachine):
    CACHING = False


# --- KVCacheManager ----------------------------------------------------------------------
PREFIXES = [[], [1, 2, 3, 4], [1, 2, 3, 4, 5, 6, 7], [9, 9]]


class ManagerMachine(RuleBasedStateMachine):
    BS, NBLK, NCPU, MAXLEN = 2, 10, 6, 24
    kwargs: dict = {}

    def __init__(self):
        super().__init__()
        self.tracer = Tracer()
        self.m = KVCacheManager(
            self.BS, self.NBLK, self.MAXLEN, num_cpu_blocks=self.NCPU, hash_seed=0, tracer=self.tracer, **self.kwargs
        )
        self.replay = _PoolState(self.NBLK)
        self.seen = 0
        self.reqs = {}  # live requests by id
        self.swapped = set()
        self.gpu = {}  # slot -> content
        self.cpu = {}
        self.count = 0

    # helpers
    def _content(self, r, p):
        return (r.lora_name, r.cache_salt, tuple(r.all_token_ids[: p + 1]))

    def _slot(self, table, p):
        return table[p // self.BS] * self.BS + p % self.BS

    def _running(self):
        return sorted(rid for rid in self.reqs if rid in self.m.req_to_blocks)

    def _apply_copies(self):
        for src, dst in self.m.take_pending_copies():
            for o in range(self.BS):
                if src * self.BS + o in self.gpu:
                    self.gpu[dst * self.BS + o] = self.gpu[src * self.BS + o]
                else:
                    self.gpu.pop(dst * self.BS + o, None)

    def _write(self, r, start, end):
        table = self.m.req_to_blocks[r.request_id]
        for p in range(start, end):
            blk = table[p // self.BS]
            assert blk.ref_cnt == 1, f"write into shared block {blk.block_id} (ref {blk.ref_cnt})"
            self.gpu[self._slot([b.block_id for b in table], p)] = self._content(r, p)

    # rules
    @rule(
        prefix=st.sampled_from(PREFIXES),
        suffix=st.lists(st.integers(0, 3), max_size=6),
        tag=st.sampled_from([None, "salt", "lora"]),
    )
    def add_request(self, prefix, suffix, tag):
        OPS["n"] += 1
        tokens = (prefix + suffix) or [0]
        self.count += 1
        rid = f"r{self.count}"
        self.reqs[rid] = Request(
            rid,
            tokens,
            block_hasher=self.m.block_hasher,
            cache_salt="X" if tag == "salt" else None,
            lora_name="X" if tag == "lora" else None,
        )

    @precondition(lambda self: self.reqs)
    @rule(data=st.data(), budget=st.integers(1, 7), token=st.integers(0, 3))
    def schedule(self, data, budget, token):
        OPS["n"] += 1
        rid = data.draw(st.sampled_from(sorted(self.reqs)))
        r = self.reqs[rid]
        if rid in self.swapped:
            return
        held = rid in self.m.req_to_blocks
        if held and r.num_computed_tokens == r.num_tokens:
            r.append_output_token_ids(token)  # decode: the sampled token needs a slot
        if r.num_tokens >= self.MAXLEN:
            return
        hits, n = [], 0
        if not held:
            assert r.num_computed_tokens == 0
            hits, n = self.m.get_computed_blocks(r)
            assert n % self.BS == 0 and n <= r.num_tokens - 1 and n == len(hits) * self.BS
            for p in range(n):  # a hit must hold exactly this request's KV
                assert self.gpu.get(self._slot([b.block_id for b in hits], p)) == self._content(r, p)
        chunk = min(budget, r.num_tokens - r.num_computed_tokens - n)
        before = state_of(self.m)
        out = self.m.allocate_slots(r, chunk, n, hits)
        if out is None:
            assert state_of(self.m) == before
            return
        self._apply_copies()
        start = r.num_computed_tokens + n
        self._write(r, start, start + chunk)
        r.num_computed_tokens = start + chunk

    @precondition(lambda self: self.reqs)
    @rule(data=st.data())
    def fork(self, data):
        OPS["n"] += 1
        running = self._running()
        if not running:
            return
        parent = self.reqs[data.draw(st.sampled_from(running))]
        self.count += 1
        child = Request(
            f"r{self.count}",
            parent.all_token_ids,
            block_hasher=self.m.block_hasher,
            cache_salt=parent.cache_salt,
            lora_name=parent.lora_name,
        )
        self.m.fork(parent, child)
        self.reqs[child.request_id] = child

    @precondition(lambda self: self.reqs)
    @rule(data=st.data(), preempt=st.booleans())
    def free(self, data, preempt):
        OPS["n"] += 1
        rid = data.draw(st.sampled_from(sorted(self.reqs)))
        r = self.reqs[rid]
        self.m.free(r)
        self.swapped.discard(rid)
        if preempt:
            r.num_computed_tokens = 0  # recompute preemption keeps the tokens
        else:
            del self.reqs[rid]

    @precondition(lambda self: self.reqs)
    @rule(data=st.data())
    def swap_out(self, data):
        OPS["n"] += 1
        running = self._running()
        if not running:
            return
        group = [
            self.reqs[x] for x in data.draw(st.lists(st.sampled_from(running), min_size=1, max_size=3, unique=True))
        ]
        if not self.m.can_swap_out(group):
            before = state_of(self.m)
            try:
                self.m.swap_out(group)
                raise AssertionError("swap_out without space must raise")
            except NoFreeBlocksError:
                assert state_of(self.m) == before
            return
        for g, c in self.m.swap_out(group):
            for o in range(self.BS):
                self.cpu[c * self.BS + o] = self.gpu.get(g * self.BS + o)
        self.swapped.update(r.request_id for r in group)

    @precondition(lambda self: self.swapped)
    @rule(data=st.data())
    def swap_in(self, data):
        OPS["n"] += 1
        group = [
            self.reqs[x]
            for x in data.draw(st.lists(st.sampled_from(sorted(self.swapped)), min_size=1, max_size=3, unique=True))
        ]
        if not self.m.can_swap_in(group):
            before = state_of(self.m)
            try:
                self.m.swap_in(group)
                raise AssertionError("swap_in without space must raise")
            except NoFreeBlocksError:
                assert state_of(self.m) == before
            return
        for c, g in self.m.swap_in(group):
            for o in range(self.BS):
                self.gpu[g * self.BS + o] = self.cpu.get(c * self.BS + o)
        self.swapped.difference_update(r.request_id for r in group)

    @rule(b=st.integers(0, NBLK - 1))
    def double_free_is_refused(self, b):
        OPS["n"] += 1
        blk = self.m.block_pool.blocks[b]
        if blk.ref_cnt:
            return
        before = state_of(self.m)
        try:
            self.m.block_pool.free_blocks([blk])
            raise AssertionError("double free must raise")
        except DoubleFreeError:
            assert state_of(self.m) == before

    @invariant()
    def consistent(self):
        check_manager(self.m)
        for rid in self._running():  # every computed position still holds this request's KV
            r = self.reqs[rid]
            ids = self.m.get_block_ids(rid)
            for p in range(r.num_computed_tokens):
                assert self.gpu.get(self._slot(ids, p)) == self._content(r, p), (rid, p)
        for rid in self.swapped:
            r = self.reqs[rid]
            ids = [b.block_id for b in self.m.req_to_cpu_blocks[rid]]
            for p in range(r.num_computed_tokens):
                assert self.cpu.get(self._slot(ids, p)) == self._content(r, p)
        # The trace rebuilds exactly the live pool.
        for ev in self.tracer.events[self.seen :]:
            self.replay.apply(ev)
        self.seen = len(self.tracer.events)
        live, rebuilt = self.m.snapshot(), self.replay.freeze(0)
        for key in ("free_queue", "blocks", "cpu_blocks", "num_free_blocks"):
            assert live[key] == rebuilt[key], key


class NoCacheMachine(ManagerMachine):
    kwargs = dict(enable_caching=False)


class HashMachine(ManagerMachine):
    kwargs = dict(enable_caching=True, prefix_cache="hash")


class RadixManagerMachine(ManagerMachine):
    kwargs = dict(enable_caching=True, prefix_cache="radix")


# --- RadixCache --------------------------------------------------------------------------
class RadixMachine(RuleBasedStateMachine):
    page_size = 1

    def __init__(self):
        super().__init__()
        self.rc = RadixCache(self.page_size)
        self.token_of = {}  # slot -> token
        self.next_slot = 0
        self.released = set()  # duplicates handed back + evicted
        self.locks = []

    @rule(key=st.lists(st.integers(0, 3), max_size=10))
    def insert(self, key):
        OPS["n"] += 1
        slots = list(range(self.next_slot, self.next_slot + len(key)))
        self.next_slot += len(key)
        for s, t in zip(slots, key):
            self.token_of[s] = t
        present = self.rc.insert(key, slots)
        aligned = len(key) // self.page_size * self.page_size
        assert present % self.page_size == 0 and present <= aligned
        self.released.update(slots[:present])  # caller frees its duplicates (SGLang)
        self.released.update(slots[aligned:])  # and the unaligned tail

    @rule(key=st.lists(st.integers(0, 3), max_size=10), lock=st.booleans())
    def match(self, key, lock):
        OPS["n"] += 1
        value, node = self.rc.match_prefix(key)
        assert len(value) % self.page_size == 0
        assert [self.token_of[s] for s in value] == key[: len(value)]
        cur, depth = node, 0
        while cur is not self.rc.root_node:
            depth += len(cur.key)
            cur = cur.parent
        assert depth == len(value)  # last_node covers exactly the match
        if lock and node is not self.rc.root_node:
            self.rc.inc_lock_ref(node)
            self.locks.append(node)

    @precondition(lambda self: self.locks)
    @rule(data=st.data())
    def unlock(self, data):
        OPS["n"] += 1
        self.rc.dec_lock_ref(self.locks.pop(data.draw(st.integers(0, len(self.locks) - 1))))

    @rule(n=st.integers(0, 12))
    def evict(self, n):
        OPS["n"] += 1
        evictable = self.rc.evictable_size()
        out = []
        got = self.rc.evict(n, out.extend)
        assert got == len(out) and (got >= n or self.rc.evictable_size() == 0 or got >= evictable)
        self.released.update(out)
        for node in self.locks:  # locked nodes survive any eviction, attached to the root
            cur = node
            while cur is not self.rc.root_node:
                assert cur.parent.children.get(self.rc._child_key(cur.key, cur.extra_key)) is cur
                cur = cur.parent

    @invariant()
    def accounting(self):
        rc = self.rc
        nodes = rc.nodes()
        assert rc.evictable_size() + rc.protected_size() == sum(len(x.key) for x in nodes)
        assert rc.protected_size() == sum(len(x.key) for x in nodes if x.lock_ref > 0)
        for x in nodes:
            assert x.key and len(x.key) == len(x.value) and len(x.key) % self.page_size == 0
            assert x.lock_ref <= (x.parent.lock_ref if x.parent is not rc.root_node else x.lock_ref)
        held = rc.all_values()
        assert len(held) == len(set(held)) and not set(held) & self.released
        assert set(held) | self.released == set(range(self.next_slot))  # nothing leaked


class PagedRadixMachine(RadixMachine):
    page_size = 2


MACHINES = [
    (BlockPoolMachine, 60, 50),
    (BlockPoolNoCachingMachine, 30, 50),
    (NoCacheMachine, 50, 60),
    (HashMachine, 100, 60),
    (RadixManagerMachine, 100, 60),
    (RadixMachine, 50, 60),
    (PagedRadixMachine, 50, 60),
]


def test_state_machines_run_at_least_10000_operations():
    start = OPS["n"]
    for machine, examples, steps in MACHINES:
        before = OPS["n"]
        run_state_machine_as_test(machine, settings=_settings(examples, steps))
        assert OPS["n"] > before, machine.__name__
    assert OPS["n"] - start >= 10_000, OPS["n"] - start
