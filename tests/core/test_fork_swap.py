"""Copy-on-write fork and swap (vLLM v0 semantics) on KVCacheManager."""

import pytest

from pagedlab.core.kv_cache_manager import KVCacheManager
from pagedlab.errors import InvalidRequestError, NoFreeBlocksError
from pagedlab.request import RequestStatus

from .helpers import check_manager, make_request, state_of

MODES = [
    dict(enable_caching=False),
    dict(enable_caching=True, prefix_cache="hash"),
    dict(enable_caching=True, prefix_cache="radix"),
]


def mgr(blocks=16, cpu=0, **kw):
    return KVCacheManager(4, blocks, 1024, num_cpu_blocks=cpu, hash_seed=0, **kw)


def prefill(m, req):
    hits, n = m.get_computed_blocks(req)
    assert m.allocate_slots(req, req.num_tokens - n, n, hits) is not None
    req.num_computed_tokens = req.num_tokens


def decode(m, req, token):
    req.append_output_token_ids(token)
    out = m.allocate_slots(req, 1)
    if out is not None:
        req.num_computed_tokens += 1
    return out


def fork_n(m, parent, n):
    kids = []
    for i in range(n):
        kid = make_request(m, f"{parent.request_id}.{i}", parent.all_token_ids)
        m.fork(parent, kid)
        kids.append(kid)
    return kids


@pytest.mark.parametrize("kw", MODES)
def test_fork_adds_one_ref_per_block_and_allocates_nothing(kw):
    m = mgr(**kw)
    p = make_request(m, "p", range(10))
    prefill(m, p)
    free = m.block_pool.get_num_free_blocks()
    kids = fork_n(m, p, 3)
    assert m.block_pool.get_num_free_blocks() == free
    assert all(m.block_pool.blocks[b].ref_cnt == 4 for b in m.get_block_ids("p"))
    assert all(m.get_block_ids(k.request_id) == m.get_block_ids("p") for k in kids)
    assert all(k.num_computed_tokens == 10 for k in kids)
    assert m.num_held_blocks() == 3 and m.num_blocks_without_sharing() == 12
    check_manager(m)


@pytest.mark.parametrize("kw", MODES)
def test_writing_into_shared_partial_block_copies_it(kw):
    m = mgr(**kw)
    p = make_request(m, "p", range(10))  # last block holds 2 of 4 tokens
    prefill(m, p)
    (kid,) = fork_n(m, p, 1)
    last = m.get_block_ids("p")[2]
    decode(m, kid, 7)
    copies = m.take_pending_copies()
    assert len(copies) == 1 and copies[0][0] == last
    dst = copies[0][1]
    assert m.get_block_ids(kid.request_id) == m.get_block_ids("p")[:2] + [dst]
    assert m.block_pool.blocks[last].ref_cnt == 1 and m.block_pool.blocks[dst].ref_cnt == 1
    assert m.take_pending_copies() == []
    decode(m, p, 8)  # the parent is now the only owner: it writes in place
    assert m.take_pending_copies() == [] and m.get_block_ids("p")[2] == last
    check_manager(m)


def test_several_children_first_n_minus_1_copy_last_writes_in_place():
    m = mgr()
    p = make_request(m, "p", range(6))
    prefill(m, p)
    kids = fork_n(m, p, 3)
    m.free(p)
    for i, k in enumerate(kids):
        decode(m, k, 100 + i)
    assert len(m.take_pending_copies()) == 2
    check_manager(m)


def test_fork_at_block_boundary_copies_nothing():
    m = mgr()
    p = make_request(m, "p", range(8))
    prefill(m, p)
    for k in fork_n(m, p, 2):
        decode(m, k, 1)
    assert m.take_pending_copies() == []
    check_manager(m)


def test_cow_counts_against_capacity_and_fails_cleanly():
    m = mgr(blocks=4)
    p = make_request(m, "p", range(10))
    prefill(m, p)
    (kid,) = fork_n(m, p, 1)
    other = make_request(m, "o", range(50, 53))
    prefill(m, other)  # pool is now full
    before = state_of(m)
    kid.append_output_token_ids(5)
    assert m.allocate_slots(kid, 1) is None
    assert state_of(m) == before and m.take_pending_copies() == []


@pytest.mark.parametrize("kw", MODES)
def test_free_parent_before_child_and_vice_versa(kw):
    for first in ("parent", "child"):
        m = mgr(**kw)
        p = make_request(m, "p", range(10))
        prefill(m, p)
        (kid,) = fork_n(m, p, 1)
        decode(m, kid, 3)
        order = [p, kid] if first == "parent" else [kid, p]
        for r in order:
            m.free(r)
            check_manager(m)
        assert not m.req_to_blocks
        assert all(b.ref_cnt == (1 if b.block_id in m.prefix.owned_block_ids() else 0) for b in m.block_pool.blocks)


def test_forking_bad_requests_is_an_error_and_changes_nothing():
    m = mgr()
    p = make_request(m, "p", range(6))
    prefill(m, p)
    before = state_of(m)
    done = make_request(m, "done", range(6))
    prefill(m, done)
    done.status = RequestStatus.FINISHED_STOPPED
    before = state_of(m)
    with pytest.raises(InvalidRequestError):
        m.fork(done, make_request(m, "k1", range(6)))
    with pytest.raises(InvalidRequestError):
        m.fork(make_request(m, "ghost", range(6)), make_request(m, "k2", range(6)))
    with pytest.raises(InvalidRequestError):
        m.fork(p, done)  # child already holds blocks
    with pytest.raises(InvalidRequestError):
        m.fork(p, make_request(m, "k3", range(1, 7)))  # different tokens
    assert state_of(m) == before


@pytest.mark.parametrize("kw", MODES)
def test_swap_out_moves_shared_block_once_and_keeps_refs(kw):
    m = mgr(blocks=12, cpu=8, **kw)
    p = make_request(m, "p", range(10))
    prefill(m, p)
    kids = fork_n(m, p, 2)
    decode(m, kids[0], 1)
    m.take_pending_copies()
    group = [p] + kids
    held = m.num_held_blocks()
    assert m.can_swap_out(group)
    mapping = m.swap_out(group)
    assert len(mapping) == held  # each distinct block once
    cpu = {c: m.cpu_block_pool.blocks[c].ref_cnt for _, c in mapping}
    assert sorted(cpu.values()) == [1, 2, 3, 3]  # two full blocks (all 3), old last block (p, kid1), copy
    check_manager(m)
    assert m.can_swap_in(group)
    back = m.swap_in(group)
    assert [c for c, _ in back] == [c for _, c in mapping]
    assert sorted(m.block_pool.blocks[g].ref_cnt for _, g in back) == [1, 2, 3, 3]
    assert m.get_block_ids("p")[:2] == m.get_block_ids(kids[0].request_id)[:2]
    check_manager(m)
    for r in group:
        decode(m, r, 9)
        check_manager(m)


def test_swap_out_block_held_outside_group_is_copied_not_moved():
    m = mgr(cpu=8)
    p = make_request(m, "p", range(10))
    prefill(m, p)
    (kid,) = fork_n(m, p, 1)
    mapping = m.swap_out([kid])
    assert len(mapping) == 3
    assert all(m.block_pool.blocks[g].ref_cnt == 1 for g, _ in mapping)  # still held by p
    check_manager(m)


def test_swap_in_without_space_is_refused_and_changes_nothing():
    m = mgr(blocks=4, cpu=4)
    a = make_request(m, "a", range(12))
    prefill(m, a)
    m.swap_out([a])
    b = make_request(m, "b", range(100, 104))
    prefill(m, b)  # 3 free; a needs 3 blocks + 1 for its next decode
    assert not m.can_swap_in([a])
    before = state_of(m)
    with pytest.raises(NoFreeBlocksError):
        m.swap_in([a])
    assert state_of(m) == before
    with pytest.raises(ValueError):
        m.allocate_slots(a, 1)  # swapped out
    m.free(a)  # frees its CPU blocks
    assert m.cpu_block_pool.get_num_free_blocks() == 4
    check_manager(m)


def test_swap_out_without_cpu_space_is_refused():
    m = mgr(cpu=2)
    a = make_request(m, "a", range(12))
    prefill(m, a)
    assert not m.can_swap_out([a])
    before = state_of(m)
    with pytest.raises(NoFreeBlocksError):
        m.swap_out([a])
    with pytest.raises(InvalidRequestError):
        m.swap_out([a, a])
    assert state_of(m) == before
    assert not mgr(cpu=0).can_swap_out([a])
