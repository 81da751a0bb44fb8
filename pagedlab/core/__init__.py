"""The memory system: block pool, prefix caching (hash chain and radix tree), CoW fork, swap.
Pure Python, no torch. (The contiguous-reservation baseline of lab 01 lives in ``pagedlab.analysis``.)"""

from pagedlab.core.block_pool import BlockPool, FreeKVCacheBlockQueue, KVCacheBlock
from pagedlab.core.hashing import get_request_block_hasher, hash_block_tokens, init_none_hash
from pagedlab.core.kv_cache_manager import KVCacheManager, PrefixCacheStats
from pagedlab.core.radix_cache import RadixCache, TreeNode

__all__ = [
    "BlockPool",
    "FreeKVCacheBlockQueue",
    "KVCacheBlock",
    "KVCacheManager",
    "PrefixCacheStats",
    "RadixCache",
    "TreeNode",
    "get_request_block_hasher",
    "hash_block_tokens",
    "init_none_hash",
]
