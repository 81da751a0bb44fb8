"""Plausible wrong versions of lab 03's ``fork`` / ``append_token`` and lab 07's ``match_prefix`` /
``evict`` (the two-way tests plug them into the real engine's ``fork_cow`` and ``radix`` slots)."""

from __future__ import annotations

import heapq
from typing import Any

from pagedlab.grading.kit import Seq, TreeNode


# --- lab 03 ---------------------------------------------------------------------------------------
def fork_shares_the_list(pool: Any, parent: Seq, child_id: str) -> Seq:
    """Increfs every block, but gives the child the parent's very list (one table for two sequences)."""
    for block_id in parent.block_table:
        pool.incref(block_id)
    return Seq(child_id, parent.block_table, parent.num_tokens)


def fork_without_incref(pool: Any, parent: Seq, child_id: str) -> Seq:
    """Copies the table but forgets that every block gains an owner."""
    return Seq(child_id, list(parent.block_table), parent.num_tokens)


def append_without_free(pool: Any, seq: Seq) -> tuple[int, int] | None:
    """Copies a shared last block but keeps its reference to the source (a leak)."""
    copy = None
    if seq.num_tokens % pool.block_size == 0:
        seq.block_table.append(pool.allocate())
    elif pool.ref_cnt(seq.block_table[-1]) > 1:
        last, new = seq.block_table[-1], pool.allocate()
        seq.block_table[-1] = new
        copy = (last, new)
    seq.num_tokens += 1
    return copy


def append_copies_first_block(pool: Any, seq: Seq) -> tuple[int, int] | None:
    """Checks and copies block 0 instead of the block the token goes into."""
    copy = None
    if seq.num_tokens % pool.block_size == 0:
        seq.block_table.append(pool.allocate())
    elif pool.ref_cnt(seq.block_table[0]) > 1:
        first, new = seq.block_table[0], pool.allocate()
        pool.free(first)
        seq.block_table[0] = new
        copy = (first, new)
    seq.num_tokens += 1
    return copy


# --- lab 07 ---------------------------------------------------------------------------------------
def _leaves(root: TreeNode, locked_too: bool = False) -> list[TreeNode]:
    """The leaves under ``root`` (not the root), unlocked ones only unless ``locked_too``."""
    leaves, stack = [], [root]
    while stack:
        node = stack.pop()
        if node.children:
            stack.extend(node.children.values())
        elif node is not root and (locked_too or node.lock_ref == 0):
            leaves.append(node)
    return leaves


def match_prefix_without_split(root: TreeNode, key: list[Any], now: int) -> tuple[list[int], TreeNode]:
    """Returns the partly matched node itself (and its values up to the match) instead of splitting it."""
    node, value, key = root, [], list(key)
    node.last_access_time = now
    while key and key[0] in node.children:
        child = node.children[key[0]]
        child.last_access_time = now
        n = 0
        while n < min(len(child.key), len(key)) and child.key[n] == key[n]:
            n += 1
        value += child.value[:n]
        node, key = child, key[n:]
        if n < len(child.key):
            break
    return value, node


def evict_ignoring_locks(root: TreeNode, num_tokens: int) -> list[int]:
    """LRU leaves first, but a locked leaf goes too."""
    leaves = _leaves(root, locked_too=True)
    heapq.heapify(leaves)
    freed: list[int] = []
    while len(freed) < num_tokens and leaves:
        x = heapq.heappop(leaves)
        freed += x.value
        parent = x.parent
        del parent.children[x.key[0]]
        if parent is not root and not parent.children:
            heapq.heappush(leaves, parent)
    return freed


def evict_without_unlinking(root: TreeNode, num_tokens: int) -> list[int]:
    """Returns the LRU leaves' values but never removes them from the tree."""
    leaves = _leaves(root)
    freed: list[int] = []
    for x in sorted(leaves):
        if len(freed) >= num_tokens:
            break
        freed += x.value
    return freed


def evict_leaves_only_once(root: TreeNode, num_tokens: int) -> list[int]:
    """Evicts the current leaves but never a parent that becomes a leaf on the way."""
    leaves = _leaves(root)
    heapq.heapify(leaves)
    freed: list[int] = []
    while len(freed) < num_tokens and leaves:
        x = heapq.heappop(leaves)
        freed += x.value
        del x.parent.children[x.key[0]]
    return freed
