"""Block hash chain for prefix caching (as vLLM v1 ``kv_cache_utils.hash_block_tokens``).

A block's hash names the *whole prefix* that ends with it::

    H_i = sha256(pickle((H_{i-1} or NONE_HASH, tuple(tokens of block i), extra_keys_i)))

so two blocks share a hash only if every token before them (and every extra key) matched.
Only full blocks are hashed. Three safety choices, each a fixed public bug:

* SHA-256, a collision-resistant hash, so no token comparison is needed on a hit (vLLM's choice;
  nano-vllm instead compares the stored tokens).
* ``NONE_HASH``, the root of every chain, is 32 random bytes per process unless a seed is given
  (bug B1, docs/bugs.md#b1: ``hash(None)`` is a constant in Python 3.12, so chains were predictable).
* Extra keys are tagged by kind: ``("salt", s)`` on the first block only (the chain carries it to
  every later block) and ``("lora", name)`` on every block, so a salt can never collide with an
  adapter name of the same spelling (bug B2, docs/bugs.md#b2).
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pagedlab.request import Request

BlockHash = bytes


def sha256_hash(obj: Any) -> BlockHash:
    """32-byte SHA-256 digest of ``pickle.dumps(obj)`` (vLLM's ``sha256`` hash function)."""
    return hashlib.sha256(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def make_none_hash(seed: int | None = None) -> BlockHash:
    """Root of the hash chain: 32 random bytes, or a digest of ``seed`` when one is given.

    Args:
        seed: any picklable value (an int in practice); None means random (per call).

    Returns:
        32 bytes.
    """
    if seed is None:
        return os.urandom(32)
    return sha256_hash(("pagedlab-none-hash", seed))


# Per-process root, as vLLM's ``init_none_hash``: random unless ``init_none_hash(seed)`` is called.
NONE_HASH: BlockHash = make_none_hash(None)


def init_none_hash(seed: int | None = None) -> BlockHash:
    """Reset the process-wide ``NONE_HASH`` (random if ``seed`` is None) and return it."""
    global NONE_HASH
    NONE_HASH = make_none_hash(seed)
    return NONE_HASH


def hash_block_tokens(
    parent_block_hash: BlockHash | None,
    token_ids: Sequence[int],
    extra_keys: tuple[Any, ...] | None = None,
    none_hash: BlockHash | None = None,
) -> BlockHash:
    """Hash of one block given its parent's hash (as vLLM v1 ``hash_block_tokens``).

    Args:
        parent_block_hash: hash of the previous block, or None for the first block.
        token_ids: the block's token ids (``block_size`` of them).
        extra_keys: kind-tagged keys such as ``(("lora", "X"),)``, or None.
        none_hash: root used when there is no parent; defaults to the process ``NONE_HASH``.

    Returns:
        32 bytes.
    """
    if parent_block_hash is None:
        parent_block_hash = NONE_HASH if none_hash is None else none_hash
    return sha256_hash((parent_block_hash, tuple(token_ids), extra_keys))


def generate_block_hash_extra_keys(request: Request, block_index: int) -> tuple[Any, ...] | None:
    """Kind-tagged extra keys of block ``block_index`` of ``request`` (None when there are none).

    ``("lora", request.lora_name)`` goes on every block, ``("salt", request.cache_salt)`` on block 0
    only, as vLLM's ``generate_block_hash_extra_keys`` but with tags, which fixes bug B2, docs/bugs.md#b2.
    """
    keys: list[tuple[str, Any]] = []
    lora = getattr(request, "lora_name", None)
    salt = getattr(request, "cache_salt", None)
    if lora is not None:
        keys.append(("lora", lora))
    if salt is not None and block_index == 0:
        keys.append(("salt", salt))
    return tuple(keys) if keys else None


def get_request_block_hasher(
    block_size: int, none_hash: BlockHash | None = None
) -> Callable[[Request], list[BlockHash]]:
    """Make the ``block_hasher`` callable a ``Request`` calls whenever tokens are appended.

    The callable returns the hashes of the request's full blocks that ``request.block_hashes``
    does not cover yet, so ``request.block_hashes`` always has ``num_tokens // block_size``
    entries, generated tokens included (as vLLM v1 ``get_request_block_hasher``).

    Args:
        block_size: tokens per block, >= 1.
        none_hash: chain root; None means the process ``NONE_HASH`` at call time.
    """

    def request_block_hasher(request: Request) -> list[BlockHash]:
        tokens = request.all_token_ids
        start = len(request.block_hashes)
        parent = request.block_hashes[-1] if start else None
        new: list[BlockHash] = []
        for i in range(start, len(tokens) // block_size):
            parent = hash_block_tokens(
                parent,
                tokens[i * block_size : (i + 1) * block_size],
                generate_block_hash_extra_keys(request, i),
                none_hash,
            )
            new.append(parent)
        return new

    return request_block_hasher
