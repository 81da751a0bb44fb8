"""``allocate_slots(..., full_sequence_must_fit=True)``: vLLM 0.32.0's admission check
(``vllm/v1/core/kv_cache_manager.py:522-538``). Blocks for ``min(request.num_tokens, max_model_len)``
tokens, less the request's prefix hits, plus the hits sitting in the free queue, plus the
watermark, must not exceed the free blocks (cached-but-free blocks count as free); else None and
nothing changes. Every case allocates only a 4-token first chunk, which the first-chunk rule
(``full_sequence_must_fit=False``) would always admit."""

import pytest

from pagedlab.core.kv_cache_manager import KVCacheManager

from .helpers import check_manager, make_request

BS = 4


def mgr(blocks=10, max_model_len=1024, cache="hash"):
    return KVCacheManager(BS, blocks, max_model_len, enable_caching=True, prefix_cache=cache, hash_seed=0)


def admit(m, r, full=True, watermark=0):
    """Admit ``r`` with a first chunk of one block (after its prefix hit); None if refused."""
    hits, n = m.get_computed_blocks(r)
    before = (m.num_free_blocks, m.get_block_ids(r.request_id))
    new = m.allocate_slots(r, BS, n, hits, watermark, full_sequence_must_fit=full)
    if new is None:  # all-or-nothing
        assert (m.num_free_blocks, m.get_block_ids(r.request_id)) == before
    check_manager(m)
    return new


def run(m, rid, tokens):
    """A request that holds its whole prompt (running)."""
    r = make_request(m, rid, tokens)
    hits, n = m.get_computed_blocks(r)
    assert m.allocate_slots(r, r.num_tokens - n, n, hits) is not None
    r.num_computed_tokens = r.num_tokens
    return r


@pytest.mark.parametrize(("n_tokens", "fits"), [(40, True), (37, True), (41, False), (44, False)])
def test_the_whole_prompt_must_fit_exactly_fits_or_one_block_short(n_tokens, fits):
    m = mgr(blocks=10)  # 10 blocks hold 40 tokens
    r = make_request(m, "r", range(n_tokens))
    assert (admit(m, r) is not None) is fits
    m = mgr(blocks=10)
    assert admit(m, make_request(m, "r", range(n_tokens)), full=False) is not None  # first-chunk rule


def test_the_first_chunk_rule_admits_what_the_full_sequence_rule_refuses():
    m = mgr(blocks=10)
    assert admit(m, make_request(m, "r", range(41)), full=True) is None
    assert admit(m, make_request(m, "r", range(41)), full=False) is not None
    assert len(m.get_block_ids("r")) == 1  # only the chunk's block is taken: nothing is reserved


@pytest.mark.parametrize(("extra", "fits"), [(24, True), (28, False)])
def test_prefix_hits_held_by_a_running_request_need_no_block(extra, fits):
    m = mgr(blocks=10)
    run(m, "a", range(16))  # 4 blocks held, 6 free
    # b: a's first 12 tokens (3 hit blocks, already held) + ``extra``: 9 or 10 blocks, 6 or 7 new
    b = make_request(m, "b", list(range(12)) + list(range(500, 500 + extra)))
    assert m.get_computed_blocks(b)[1] == 12
    assert (admit(m, b) is not None) is fits


@pytest.mark.parametrize("cache", ["hash", "radix"])
@pytest.mark.parametrize(("extra", "fits"), [(28, True), (32, False)])
def test_prefix_hits_in_the_free_queue_are_counted_as_taken(cache, extra, fits):
    m = mgr(blocks=10, cache=cache)
    a = run(m, "a", range(16))
    a.num_computed_tokens = 16
    m.free(a)  # its 4 blocks stay cached, evictable: all 10 blocks count as free
    assert m.num_free_blocks == 10
    # b: 3 hit blocks that must leave the free queue + 7 or 8 new = 10 (fits) or 11 (one short)
    b = make_request(m, "b", list(range(12)) + list(range(500, 500 + extra)))
    assert m.get_computed_blocks(b)[1] == 12
    assert (admit(m, b) is not None) is fits


@pytest.mark.parametrize("cache", ["hash", "radix"])
def test_evictable_cached_blocks_count_as_free(cache):
    m = mgr(blocks=10, cache=cache)
    a = run(m, "a", range(16))
    m.free(a)
    b = make_request(m, "b", range(300, 340))  # 10 blocks, no hit: fits only by evicting a's 4
    assert admit(m, b) is not None


@pytest.mark.parametrize(("watermark", "fits"), [(2, True), (3, False)])
def test_the_watermark_is_added_to_the_full_sequence(watermark, fits):
    m = mgr(blocks=10)
    r = make_request(m, "r", range(32))  # 8 blocks; 8 + 2 <= 10 < 8 + 3
    assert (admit(m, r, watermark=watermark) is not None) is fits


@pytest.mark.parametrize(("n_output", "fits"), [(4, True), (5, False)])
def test_a_resumed_preempted_request_needs_prompt_plus_generated_tokens(n_output, fits):
    m = mgr(blocks=8)
    r = make_request(m, "r", range(28))  # 7 blocks of prompt
    for t in range(n_output):
        r.append_output_token_ids(900 + t)
    assert (admit(m, r) is not None) is fits  # 32 tokens = 8 blocks fit, 33 = 9 do not


@pytest.mark.parametrize(("max_model_len", "fits"), [(16, True), (20, False)])
def test_the_sequence_is_capped_at_max_model_len(max_model_len, fits):
    m = mgr(blocks=4, max_model_len=max_model_len)
    r = make_request(m, "r", range(20))  # 5 blocks, but only min(20, max_model_len) tokens are counted
    assert (admit(m, r) is not None) is fits
