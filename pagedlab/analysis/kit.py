"""Small, learner-facing building blocks that some exercises act on.

Lab 03 (copy-on-write) gives the learner a reference-counted block pool and a sequence record;
lab 07 (radix prefix cache) gives a tree node, a node splitter and lock helpers. They are
deliberately smaller than ``pagedlab.core`` so the exercise is the algorithm, not the plumbing::

    from pagedlab.grading.kit import RefCountedPool, Seq            # lab 03
    from pagedlab.grading.kit import TreeNode, new_tree, split_node, lock, unlock   # lab 07

They live here, below ``pagedlab.grading``, so that lab helpers (``analysis.lab03.cow_story``) can
use them; ``pagedlab.grading.kit`` is the learner-facing name and re-exports this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pagedlab.core.block_pool import BlockPool
from pagedlab.core.radix_cache import TreeNode
from pagedlab.errors import DoubleFreeError

__all__ = ["RefCountedPool", "Seq", "TreeNode", "new_tree", "split_node", "lock", "unlock", "tree_size", "format_tree"]


# --- lab 03: a reference-counted block pool ------------------------------------------------------
class RefCountedPool:
    """``num_blocks`` KV blocks of ``block_size`` tokens with reference counts (vLLM semantics).

    A block is free when its ``ref_cnt`` is 0. ``allocate()`` hands out the free queue's front;
    ``free()`` drops one reference and, when none is left, puts the block at that front (no prefix
    caching here, so vLLM 0.32.0's ``BlockPool.free_blocks`` reuses it first; vLLM 0.11.0 appended it).
    Built on ``pagedlab.core.block_pool.BlockPool``.

    Attributes:
        block_size: tokens per block.
        num_blocks: blocks in the pool.
        calls: every call made on the pool, as text (``"allocate() -> 3"``, ``"free(2)"``).
    """

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.block_size = block_size
        self.num_blocks = num_blocks
        self._pool = BlockPool(num_blocks, enable_caching=False)
        self.calls: list[str] = []

    @classmethod
    def over(cls, block_pool: BlockPool, block_size: int) -> RefCountedPool:
        """A view with the same methods over an existing pool (the engine's, for its ``fork_cow`` slot)."""
        view = cls.__new__(cls)
        view.block_size, view.num_blocks, view._pool, view.calls = block_size, block_pool.num_gpu_blocks, block_pool, []
        return view

    def _block(self, block_id: int):
        if isinstance(block_id, bool) or not isinstance(block_id, int) or not 0 <= block_id < self.num_blocks:
            raise ValueError(f"no block {block_id!r} in a pool of {self.num_blocks} blocks")
        return self._pool.blocks[block_id]

    def allocate(self) -> int:
        """Take a free block (ref_cnt 0 -> 1) and return its id.

        Raises:
            NoFreeBlocksError: every block is in use.
        """
        bid = self._pool.get_new_blocks(1)[0].block_id
        self.calls.append(f"allocate() -> {bid}")
        return bid

    def incref(self, block_id: int) -> None:
        """One more owner for a block that is in use.

        Raises:
            ValueError: the block is free (nobody holds it, so there is nothing to share).
        """
        blk = self._block(block_id)
        if blk.ref_cnt == 0:
            raise ValueError(f"incref({block_id}): block {block_id} is free; only a block someone holds can be shared")
        blk.ref_cnt += 1
        self.calls.append(f"incref({block_id})")

    def free(self, block_id: int) -> None:
        """One owner fewer; at 0 the block returns to the free queue.

        Raises:
            DoubleFreeError: the block is already free.
        """
        blk = self._block(block_id)
        if blk.ref_cnt == 0:
            raise DoubleFreeError(f"free({block_id}): block {block_id} is already free (double free)")
        self._pool.free_blocks([blk])
        self.calls.append(f"free({block_id})")

    def ref_cnt(self, block_id: int) -> int:
        """Number of owners of a block (0 = free)."""
        return self._block(block_id).ref_cnt

    @property
    def num_free_blocks(self) -> int:
        return self._pool.get_num_free_blocks()

    def ref_cnts(self) -> list[int]:
        """``ref_cnt`` of every block, by id."""
        return [b.ref_cnt for b in self._pool.blocks]

    def free_queue(self) -> list[int]:
        """Free block ids, next to be allocated first."""
        return [b.block_id for b in self._pool.free_block_queue.get_all_free_blocks()]

    def __repr__(self) -> str:
        return f"RefCountedPool({self.num_blocks} blocks of {self.block_size}, {self.num_free_blocks} free)"


@dataclass
class Seq:
    """One sequence: its block table (physical block ids, one per logical block) and length."""

    seq_id: str
    block_table: list[int] = field(default_factory=list)
    num_tokens: int = 0


# --- lab 07: radix tree nodes (``TreeNode`` is the engine's own, from ``pagedlab.core.radix_cache``) --
def new_tree() -> TreeNode:
    """An empty tree: a root with no key, locked forever so it is never evicted."""
    root = TreeNode()
    root.lock_ref = 1
    return root


def split_node(child: TreeNode, n: int) -> TreeNode:
    """Cut ``child`` after its first ``n`` tokens (``0 < n < len(child.key)``).

    A new node holding ``key[:n]`` takes ``child``'s place under its parent, and ``child`` keeps
    the rest below it. The new node copies ``lock_ref`` and ``last_access_time``. Returns the
    new node.
    """
    if not 0 < n < len(child.key):
        raise ValueError(f"split_node: need 0 < n < {len(child.key)}, got {n}")
    parent = child.parent
    assert parent is not None, "cannot split the root"
    new = TreeNode(child.key[:n], child.value[:n], parent, child.last_access_time)
    new.lock_ref = child.lock_ref
    child.key, child.value = child.key[n:], child.value[n:]
    child.parent = new
    new.children[child.key[0]] = child
    parent.children[new.key[0]] = new
    return new


def lock(node: TreeNode) -> None:
    """A request starts using the path root -> ``node``: lock every node on it (not the root)."""
    while node.parent is not None:
        node.lock_ref += 1
        node = node.parent


def unlock(node: TreeNode) -> None:
    """Undo one :func:`lock` of ``node``."""
    while node.parent is not None:
        if node.lock_ref <= 0:
            raise ValueError(f"unlock: {node!r} is not locked")
        node.lock_ref -= 1
        node = node.parent


def _walk(root: TreeNode):
    stack = [root]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.children.values())


def tree_size(root: TreeNode) -> int:
    """Tokens stored in the tree."""
    return sum(len(n.key) for n in _walk(root))


def format_tree(root: TreeNode) -> str:
    """One line per node, indented by depth."""
    lines: list[str] = []

    def rec(n: TreeNode, depth: int) -> None:
        for c in sorted(n.children.values(), key=lambda c: c.key[0]):  # by first token, as the children's keys
            lines.append(f"{'  ' * depth}{c.key} -> {c.value}  lock={c.lock_ref} t={c.last_access_time}")
            rec(c, depth + 1)

    rec(root, 0)
    return "\n".join(lines) or "(empty tree)"
