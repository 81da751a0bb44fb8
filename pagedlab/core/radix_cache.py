"""Radix-tree prefix cache with SGLang 0.4.6 semantics (``sglang/srt/mem_cache/radix_cache.py``).

Where vLLM names each full block by a hash chain, SGLang keeps one radix tree over every cached
token sequence. Each edge (a ``TreeNode``) holds a run of tokens (``key``) and the KV slot ids of
those tokens (``value``, one per token). Shared prefixes are stored once: ``insert`` returns how
many tokens were already present, and the caller frees its own duplicate slots for that span
(the tree *de-duplicates*, unlike vLLM).

Accounting kept beside the operations that change it (the invariant the tests check after
every step, bug B12, docs/bugs.md#b12)::

    evictable_size_ + protected_size_ == tokens in the tree

A node is *protected* while ``lock_ref > 0`` (a running request uses it); locks are taken on a
node and every ancestor up to the root. ``evict`` frees least-recently-used unlocked *leaves*
first, and pushes a parent onto the heap once it becomes a leaf, so shared ancestors outlive
the branches below them.

Eviction cost: the set of evictable leaves (unlocked, childless, not the root) is kept up to
date by every operation that can change it (insert, match, lock, unlock, evict), as SGLang
0.5.23's ``evictable_leaves`` (0.4.6 collected the leaves by walking the whole tree on every
``evict``). SGLang 0.5.23 still heapifies that set on every call; here a persistent heap keyed by
``(last_access_time, id)`` sits beside it: an entry whose node left the set or was re-stamped is
stale and skipped when popped, and the heap is rebuilt once stale entries outnumber live ones.
Evicting one node is therefore O(log n) amortised, whatever the size of the tree.

Paging: with ``page_size = P > 1`` keys are matched and inserted a whole page at a time (lengths
are truncated to a multiple of P) and children are keyed by the tuple of their first page, so
every node boundary, hence every split, falls on a page boundary.

Namespaces: an optional ``extra_key`` (e.g. ``(("lora", "X"), ("salt", "s"))``) is part of every
child key, so requests with different adapters or salts never share nodes (as SGLang 0.5's
``RadixKey.extra_key``; 0.4.6 had none).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from pagedlab.errors import ConfigError

_node_ids = itertools.count()


class TreeNode:
    """One edge of a radix tree (as SGLang ``TreeNode``): the engine's :class:`RadixCache` and lab 07's
    exercises (``pagedlab.grading.kit`` re-exports it; ``new_tree``, ``split_node``, ``lock``, ``unlock``
    there) build their trees of the same nodes, so a learner's functions run on the engine's own tree
    (the ``radix`` slot, ``pagedlab.parts.radix.GuardedRadixTree``).

    Attributes:
        key: the tokens on this edge (in the engine's ``radix`` slot, one tuple per block of tokens).
        value: the KV slot of each of those tokens, ``len(value) == len(key)``.
        parent: the node above (None for the root).
        children: child nodes keyed by the first token of their ``key`` (``RadixCache``: by
            ``(extra_key, first token)`` or the first page tuple).
        lock_ref: how many running requests use this node; > 0 means it cannot be evicted.
        last_access_time: logical clock of the last match/insert through this node (LRU).
        id: creation number; breaks ties between equal access times (older first).
        extra_key: namespace of the node (None for the default namespace).

    Nodes order by ``(last_access_time, id)``, so ``heapq`` pops the least recently used first.
    """

    __slots__ = ("key", "value", "parent", "children", "lock_ref", "last_access_time", "id", "extra_key")

    def __init__(
        self,
        key: Sequence[Any] = (),
        value: Sequence[int] = (),
        parent: TreeNode | None = None,
        now: int = 0,
        extra_key: Hashable | None = None,
    ) -> None:
        self.key: list[Any] = list(key)
        self.value: list[int] = list(value)
        self.parent = parent
        self.children: dict[Hashable, TreeNode] = {}
        self.lock_ref = 0
        self.last_access_time = now
        self.id = next(_node_ids)
        self.extra_key = extra_key

    def __lt__(self, other: TreeNode) -> bool:
        # Lets a heap of nodes act as an LRU; the id breaks ties deterministically.
        return (self.last_access_time, self.id) < (other.last_access_time, other.id)

    def __repr__(self) -> str:
        more = "..." if len(self.key) > 8 else ""
        return f"TreeNode(key={self.key[:8]}{more}, lock_ref={self.lock_ref}, t={self.last_access_time})"


def _parent(node: TreeNode) -> TreeNode:
    """The parent of a non-root node."""
    assert node.parent is not None, "the root has no parent"
    return node.parent


class RadixCache:
    """Radix tree of cached token sequences (as SGLang 0.4.6 ``RadixCache``).

    Args:
        page_size: tokens per page; matches and inserts are truncated to multiples of it.

    Raises:
        ConfigError: ``page_size`` is not a positive int.
    """

    def __init__(self, page_size: int = 1) -> None:
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ConfigError(f"page_size must be an int >= 1, got {page_size!r}")
        self.page_size = page_size
        self.reset()

    def reset(self) -> None:
        """Empty the tree (the caller is responsible for the slots it held)."""
        self._clock = 0
        self.root_node = TreeNode()
        # The root is permanently locked so it is never evicted and lock walks stop there.
        self.root_node.lock_ref = 1
        self.evictable_size_ = 0
        self.protected_size_ = 0
        # Unlocked leaves other than the root, and an LRU heap over them that may hold stale
        # entries (see the module docstring): ``(last_access_time, id, node)``.
        self._evictable_leaves: set[TreeNode] = set()
        self._evict_heap: list[tuple[int, int, TreeNode]] = []

    # --- keys ---------------------------------------------------------------------------
    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def _child_key(self, key: Sequence[int], extra_key: Hashable | None) -> Hashable:
        first = key[0] if self.page_size == 1 else tuple(key[: self.page_size])
        return first if extra_key is None else (extra_key, first)

    def _key_match(self, node_key: Sequence[int], key: Sequence[int]) -> int:
        """Length of the common prefix, in whole pages."""
        p = self.page_size
        n = min(len(node_key), len(key))
        i = 0
        if p == 1:
            while i < n and node_key[i] == key[i]:
                i += 1
            return i
        while i + p <= n and node_key[i : i + p] == key[i : i + p]:
            i += p
        return i

    def _page_align(self, key: Sequence[int]) -> list[int]:
        return list(key[: len(key) // self.page_size * self.page_size])

    # --- match / insert -----------------------------------------------------------------
    def match_prefix(self, key: Sequence[int], extra_key: Hashable | None = None) -> tuple[list[int], TreeNode]:
        """Longest cached prefix of ``key`` (as SGLang ``match_prefix``).

        Mutates the tree: stamps ``last_access_time`` on the path and splits the last node when
        the match ends inside it, so ``last_node`` covers exactly the matched prefix.

        Args:
            key: token ids; truncated to a multiple of ``page_size``.
            extra_key: namespace.

        Returns:
            ``(value, last_node)``: the matched slot ids (one per matched token) and the deepest
            node of the match (the root if nothing matched).
        """
        key = self._page_align(key)
        now, node, stamped = self._begin_walk()
        value: list[int] = []
        while key:
            hit = self._step_down(node, key, extra_key, now, stamped)
            if hit is None:
                break
            child, n = hit
            if n < len(child.key):
                node = self._split_node(child, n)
                value.extend(node.value)
                break
            value.extend(child.value)
            node = child
            key = key[n:]
        for x in stamped:  # a re-stamped leaf needs a fresh heap entry
            self._refresh_leaf(x)
        return value, node

    def insert(self, key: Sequence[int], value: Sequence[int] | None = None, extra_key: Hashable | None = None) -> int:
        """Insert ``key -> value``; return the number of leading tokens that were already present.

        As SGLang ``insert``: existing nodes keep their own values (the caller frees its duplicate
        slots for the returned span); one new leaf holds the unmatched suffix and is evictable.

        Args:
            key: token ids; truncated to a multiple of ``page_size``.
            value: slot ids, one per token (defaults to ``key`` itself, as SGLang).
            extra_key: namespace.
        """
        key = self._page_align(key)
        value = list(key) if value is None else list(value[: len(key)])
        assert len(value) == len(key), "insert needs one value per token"
        now, node, stamped = self._begin_walk()
        total = 0
        while key:
            hit = self._step_down(node, key, extra_key, now, stamped)
            if hit is None:
                break
            child, n = hit
            total += n
            key, value = key[n:], value[n:]
            node = self._split_node(child, n) if n < len(child.key) else child
        if key:
            leaf = TreeNode(key, value, node, now, extra_key)
            node.children[self._child_key(key, extra_key)] = leaf
            self.evictable_size_ += len(key)
            stamped.append(leaf)
        for x in stamped:  # the new leaf joins the set; its parent, if it was a leaf, leaves it
            self._refresh_leaf(x)
        return total

    def _begin_walk(self) -> tuple[int, TreeNode, list[TreeNode]]:
        """Start a walk from the root: ``(now, root, stamped)``, the root's access time set to ``now``."""
        now = self._tick()
        self.root_node.last_access_time = now
        return now, self.root_node, []

    def _step_down(
        self, node: TreeNode, key: Sequence[int], extra_key: Hashable | None, now: int, stamped: list[TreeNode]
    ) -> tuple[TreeNode, int] | None:
        """One step of the walk shared by ``match_prefix`` and ``insert``.

        Returns:
            ``(child, n)``: the child of ``node`` that ``key`` continues into (its access time set to
            ``now`` and appended to ``stamped``) and how many leading tokens of ``key`` it matches;
            ``None`` when no child starts with ``key``'s first page.
        """
        child = node.children.get(self._child_key(key, extra_key))
        if child is None:
            return None
        child.last_access_time = now
        stamped.append(child)
        return child, self._key_match(child.key, key)

    def _split_node(self, child: TreeNode, split_len: int) -> TreeNode:
        """Cut ``child`` at ``split_len``; return the new parent holding the first part.

        The new node copies ``child.lock_ref``: every lock that pins the child also pins the path
        through the new parent, and the token counts stay in the same bucket (no accounting change).
        """
        parent = _parent(child)
        new = TreeNode(child.key[:split_len], child.value[:split_len], parent, child.last_access_time, child.extra_key)
        new.lock_ref = child.lock_ref
        child.key, child.value = child.key[split_len:], child.value[split_len:]
        child.parent = new
        new.children[self._child_key(child.key, child.extra_key)] = child
        parent.children[self._child_key(new.key, new.extra_key)] = new
        return new

    # --- locks --------------------------------------------------------------------------
    def inc_lock_ref(self, node: TreeNode) -> int:
        """Lock ``node`` and its ancestors; return the change of ``evictable_size_`` (<= 0)."""
        delta, start = 0, node
        while node is not self.root_node:
            if node.lock_ref == 0:
                self.evictable_size_ -= len(node.key)
                self.protected_size_ += len(node.key)
                delta -= len(node.key)
            node.lock_ref += 1
            node = _parent(node)
        self._refresh_leaf(start)  # only the start of a lock path can be a leaf
        return delta

    def dec_lock_ref(self, node: TreeNode) -> int:
        """Undo one ``inc_lock_ref(node)``; return the change of ``evictable_size_`` (>= 0).

        Raises:
            ValueError: some node on the path is not locked (unbalanced unlock; nothing changes).
        """
        walk = node
        while walk is not self.root_node:
            if walk.lock_ref <= 0:
                raise ValueError(f"dec_lock_ref on unlocked node {walk!r}")
            walk = _parent(walk)
        delta, start = 0, node
        while node is not self.root_node:
            if node.lock_ref == 1:
                self.evictable_size_ += len(node.key)
                self.protected_size_ -= len(node.key)
                delta += len(node.key)
            node.lock_ref -= 1
            node = _parent(node)
        self._refresh_leaf(start)
        return delta

    # --- eviction -----------------------------------------------------------------------
    def evict(self, num_tokens: int, evict_callback: Callable[[list[int]], Any]) -> int:
        """Free at least ``num_tokens`` tokens from unlocked leaves, LRU first (as SGLang ``evict``).

        Args:
            num_tokens: tokens to free; eviction stops early when nothing evictable is left.
            evict_callback: receives each evicted node's ``value`` (slot ids) to release them.

        Returns:
            Tokens actually evicted.
        """
        evicted = 0
        while evicted < num_tokens and self._evictable_leaves:
            x = self._pop_lru_leaf()
            evict_callback(x.value)
            evicted += len(x.key)
            self._delete_leaf(x)
            self._refresh_leaf(_parent(x))  # the parent may just have become a leaf
        return evicted

    def _is_evictable_leaf(self, node: TreeNode) -> bool:
        return not node.children and node.lock_ref == 0 and node is not self.root_node

    def _refresh_leaf(self, node: TreeNode) -> None:
        """Bring ``node``'s membership of the evictable-leaf set (and its heap entry) up to date.

        Called after any change of the node's children, lock or ``last_access_time``.
        """
        if not self._is_evictable_leaf(node):
            self._evictable_leaves.discard(node)
            return
        self._evictable_leaves.add(node)
        heapq.heappush(self._evict_heap, (node.last_access_time, node.id, node))
        if len(self._evict_heap) > 2 * len(self._evictable_leaves) + 64:
            # Too many stale entries: rebuild from the live set (amortised O(1) per push).
            self._evict_heap = [(n.last_access_time, n.id, n) for n in self._evictable_leaves]
            heapq.heapify(self._evict_heap)

    def _pop_lru_leaf(self) -> TreeNode:
        """Pop the least recently used evictable leaf, skipping stale heap entries.

        Every member of the set has an entry carrying its current ``last_access_time``
        (``_refresh_leaf`` pushes one whenever membership or the stamp changes), so this
        terminates while the set is non-empty.
        """
        while True:
            stamp, _, node = heapq.heappop(self._evict_heap)
            if node in self._evictable_leaves and node.last_access_time == stamp:
                return node

    def _delete_leaf(self, node: TreeNode) -> None:
        parent = _parent(node)
        del parent.children[self._child_key(node.key, node.extra_key)]
        self.evictable_size_ -= len(node.key)
        self._evictable_leaves.discard(node)

    def evictable_leaves(self) -> list[TreeNode]:
        """The unlocked leaves ``evict`` may take, LRU first (O(k log k); for checks and labs)."""
        return sorted(self._evictable_leaves)

    # --- accounting ---------------------------------------------------------------------
    def evictable_size(self) -> int:
        """Tokens in unlocked nodes."""
        return self.evictable_size_

    def protected_size(self) -> int:
        """Tokens in locked nodes."""
        return self.protected_size_

    def nodes(self) -> list[TreeNode]:
        """Every node except the root, parents before children."""
        out, stack = [], list(self.root_node.children.values())
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(node.children.values())
        return out

    def total_size(self) -> int:
        """Tokens in the tree, summed over nodes (O(nodes); for checks)."""
        return sum(len(n.key) for n in self.nodes())

    def all_values(self) -> list[int]:
        """Every slot id the tree holds (O(tokens); for checks)."""
        return [v for n in self.nodes() for v in n.value]

    def snapshot(self) -> dict[str, Any]:
        """Plain JSON-able tree: nested ``{"id", "key", "value", "lock_ref", "last_access_time",
        "children": [...]}`` under ``"root"``, plus the two size counters."""

        def dump(n: TreeNode) -> dict[str, Any]:
            return {
                "id": n.id,
                "key": list(n.key),
                "value": list(n.value),
                "lock_ref": n.lock_ref,
                "last_access_time": n.last_access_time,
                "children": [dump(c) for c in sorted(n.children.values(), key=lambda c: c.id)],
            }

        return {
            "page_size": self.page_size,
            "evictable_size": self.evictable_size_,
            "protected_size": self.protected_size_,
            "root": dump(self.root_node),
        }

    def pretty_print(self) -> str:
        """Indented text rendering of the tree (one line per node)."""
        lines: list[str] = []

        def walk(n: TreeNode, depth: int) -> None:
            for c in sorted(n.children.values(), key=lambda c: c.id):
                lines.append(
                    f"{'  ' * depth}{c.key[:8]}{'...' if len(c.key) > 8 else ''} len={len(c.key)} lock={c.lock_ref}"
                )
                walk(c, depth + 1)

        walk(self.root_node, 0)
        lines.append(f"evictable={self.evictable_size_} protected={self.protected_size_}")
        return "\n".join(lines)
