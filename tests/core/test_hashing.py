"""Hash chain: SHA-256, seeded root, kind-tagged extra keys."""

from pagedlab.core import hashing
from pagedlab.request import Request


def test_chain_depends_on_every_earlier_token():
    root = hashing.make_none_hash(0)
    h = hashing.get_request_block_hasher(2, root)
    a = Request("a", [1, 2, 3, 4, 5], block_hasher=h)
    b = Request("b", [9, 2, 3, 4, 5], block_hasher=h)
    assert len(a.block_hashes) == 2  # full blocks only
    assert a.block_hashes[1] != b.block_hashes[1]  # same block tokens, different parent
    assert a.block_hashes[0] == hashing.hash_block_tokens(None, [1, 2], None, root)
    assert len(a.block_hashes[0]) == 32


def test_output_tokens_extend_hashes():
    h = hashing.get_request_block_hasher(2, hashing.make_none_hash(0))
    a = Request("a", [1, 2, 3], block_hasher=h)
    assert len(a.block_hashes) == 1
    a.append_output_token_ids(4)
    assert len(a.block_hashes) == 2
    assert a.block_hashes == Request("x", [1, 2, 3, 4], block_hasher=h).block_hashes


def test_seed_is_reproducible_and_default_root_is_random():
    assert hashing.make_none_hash(5) == hashing.make_none_hash(5) != hashing.make_none_hash(6)
    assert hashing.make_none_hash() != hashing.make_none_hash()


def test_salt_only_on_first_block_but_changes_all():
    h = hashing.get_request_block_hasher(2, hashing.make_none_hash(0))
    r = Request("a", [1, 2, 3, 4], block_hasher=h, cache_salt="s")
    assert hashing.generate_block_hash_extra_keys(r, 0) == (("salt", "s"),)
    assert hashing.generate_block_hash_extra_keys(r, 1) is None
    plain = Request("b", [1, 2, 3, 4], block_hasher=h)
    assert all(x != y for x, y in zip(r.block_hashes, plain.block_hashes))
