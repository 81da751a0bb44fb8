"""The ``radix`` slot (lab 07): the learner's ``match_prefix`` / ``insert`` / ``evict`` on the engine's
radix tree, checked after every call."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pagedlab.errors import ComponentError
from pagedlab.parts.contracts import EVICT, INSERT, INSERT_MUTATES, MATCH_PREFIX, MATCH_PREFIX_MUTATES, Mutates
from pagedlab.parts.guard import Guard

__all__ = ["RadixOps", "GuardedRadixTree"]


@dataclass(frozen=True)
class RadixOps:
    """What fills the ``radix`` slot: lab 07's ``match_prefix(root, key, now)``, ``insert(root, key,
    value, now)`` and ``evict(root, num_tokens)``, with the learner kit's tree helpers they work on
    (``new_tree``, ``lock``, ``unlock`` of ``pagedlab.grading.kit``; passed in because the engine sits
    below the kit). ``yours``: which of the three functions are the learner's (the rest are the
    references); :meth:`merge` combines two partial fillings."""

    match_prefix: Callable[[Any, list[Any], int], tuple[list[int], Any]]
    insert: Callable[[Any, list[Any], list[int], int], int]
    evict: Callable[[Any, int], list[int]]
    new_tree: Callable[[], Any]
    lock: Callable[[Any], None]
    unlock: Callable[[Any], None]
    yours: frozenset[str] = frozenset()

    def merge(self, other: RadixOps) -> RadixOps:
        """``self`` with ``other``'s learner functions taking their places."""
        return replace(self, **{n: getattr(other, n) for n in other.yours}, yours=self.yours | other.yours)


def _walk_tree(root: Any, limit: int = 100_000) -> list[Any]:
    """Every node under ``root`` (root first); stops at ``limit`` nodes (a cycle)."""
    nodes: list[Any] = []
    stack = [root]
    while stack and len(nodes) < limit:
        node = stack.pop()
        nodes.append(node)
        stack.extend(getattr(node, "children", {}).values())
    return nodes


class GuardedRadixTree:
    """The engine's radix tree (:class:`~pagedlab.core.prefix_cache.RadixTree`) run by a learner's
    lab 07 functions on ``TreeNode``s (the class ``RadixCache`` uses too), checked after every call.

    Pages as tokens: the engine caches whole blocks, so each element of a key is one block of tokens
    (a tuple, prefixed by the request's namespace when it has one) and each value is that block's id;
    lab 07's page-size-1 code then works unchanged (SGLang keys pages by tuples the same way).

    Invariants checked (the guard names the slot, the step and the broken one, with the tree):
    the links (``child.parent is node``, children keyed by ``key[0]``, no empty key), one value per
    key element; the key and value lists handed in are unchanged; a match is a path from the root spelling
    a prefix of the key, its values those of the path; an insert leaves the whole key in the tree with the
    new values after the span that was present, and returns that span; both stamp ``now`` on every node of
    the path, the root included; an eviction removes only unlocked nodes (whole subtrees), frees exactly
    their values, frees enough while unlocked nodes remain, stops once enough is freed and keeps no
    unlocked leaf used less recently than one it removed.

    Args:
        ops: the functions (:class:`RadixOps`).
        page_size: tokens per block.
        guard: the ``radix`` guard.
    """

    def __init__(self, ops: RadixOps, page_size: int, guard: Guard) -> None:
        self.ops, self.page_size, self.guard = ops, page_size, guard
        self.reset()

    def reset(self) -> None:
        """An empty tree (the kit's ``new_tree``)."""
        self.root = self.ops.new_tree()
        self._clock = 0

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def _pages(self, key: Sequence[int], extra_key: Hashable | None) -> list[Hashable]:
        p = self.page_size
        pages: list[Hashable] = [tuple(key[i : i + p]) for i in range(0, len(key) // p * p, p)]
        return pages if extra_key is None else [(extra_key, page) for page in pages]

    def _slots(self, block_ids: list[int]) -> list[int]:
        return [b * self.page_size + j for b in block_ids for j in range(self.page_size)]

    def _fail(self, invariant: str) -> ComponentError:
        hint = (
            f"\n(in the engine each key element is a page: a tuple of {self.page_size} token ids, compared "
            "with ==, so code that works only on single ints, e.g. through numpy arrays, breaks here)"
        )
        return self.guard.fail(invariant, detail=hint + "\n" + _format_nodes(self.root), state={"root": self.root})

    def _check_links(self, op: str) -> list[Any]:
        nodes = _walk_tree(self.root)
        for node in nodes:
            if node is not self.root and (not node.key or len(node.key) != len(node.value)):
                raise self._fail(
                    f"after {op}, node {node!r} has {len(node.key)} key elements and {len(node.value)} values "
                    "(one value per token, never an empty key)"
                )
            for k, child in node.children.items():
                if child.parent is not node or not child.key or k != child.key[0]:
                    raise self._fail(f"after {op}, the link between {node!r} and its child {child!r} is broken")
        return nodes

    def _path(self, node: Any) -> tuple[list[Any], list[int]] | None:
        """Keys and values from the root down to ``node``; None when ``node`` is not in this tree."""
        keys: list[Any] = []
        values: list[int] = []
        for _ in range(100_000):
            if node is self.root:
                return keys, values
            if node is None or not hasattr(node, "key"):
                return None
            keys[:0], values[:0] = list(node.key), list(node.value)
            node = node.parent
        return None

    def _peek(self, pages: list[Hashable]) -> list[int]:
        """The values of the longest cached prefix of ``pages``, changing nothing."""
        node, values, i = self.root, [], 0
        while i < len(pages) and pages[i] in node.children:
            child = node.children[pages[i]]
            n = 0
            while n < len(child.key) and i + n < len(pages) and child.key[n] == pages[i + n]:
                n += 1
            values += child.value[:n]
            i += n
            if n < len(child.key):
                break
            node = child
        return values

    def _check_unchanged(self, rule: Mutates, **given: tuple[list[Any], list[Any]]) -> None:
        """Each ``name=(the list handed to the part, what it held)`` is unchanged: ``rule`` reads them only."""
        for name, (handed, held) in given.items():
            if handed != held:
                raise self._fail(f"{rule.changed(name)} (now {len(handed)} elements, was {len(held)})")

    def _nodes_along(self, pages: list[Hashable]) -> list[Any]:
        """The root and every node the path of ``pages`` (a prefix in the tree) goes through."""
        node, nodes, i = self.root, [self.root], 0
        while i < len(pages) and pages[i] in node.children:
            node = node.children[pages[i]]
            nodes.append(node)
            i += len(node.key)
        return nodes

    def _check_stamped(self, op: str, nodes: list[Any], now: int) -> None:
        """Every node of the path ``op`` walked carries ``now`` (the LRU eviction order reads it)."""
        stale = [n for n in nodes if n.last_access_time != now]
        if stale:
            where = "the root" if stale[0] is self.root else repr(stale[0])
            raise self._fail(
                f"after {op}(now={now}), {where} on the path has last_access_time {stale[0].last_access_time}: "
                "stamp last_access_time = now on every node the walk goes through, the root included (eviction "
                "takes the least recently used first)"
            )

    def match_prefix(self, key: Sequence[int], extra_key: Hashable | None = None) -> tuple[list[int], Any]:
        """``ops.match_prefix`` on the block-pages of ``key``; returns per-token slots and the last node."""
        pages = self._pages(key, extra_key)
        given, now = list(pages), self._tick()
        got = self.guard.call(self.ops.match_prefix, self.root, given, now)
        self._check_unchanged(MATCH_PREFIX_MUTATES, key=(given, pages))
        problem = MATCH_PREFIX.problem(got)
        if problem is not None:
            raise self._fail(problem)
        value, node = got
        self._check_links("match_prefix")
        path = self._path(node)
        if path is None:
            raise self._fail(f"match_prefix returned {node!r} as the last node, which is not in the tree")
        if path[0] != pages[: len(path[0])] or path[1] != value:
            raise self._fail(
                f"match_prefix returned {len(value)} values and a node whose path spells {len(path[0])} "
                "elements: the matched prefix is not a prefix of the key, or its values are not the path's"
            )
        if len(value) != len(self._peek(pages)):
            raise self._fail(
                f"match_prefix matched {len(value)} elements; the longest cached prefix has {len(self._peek(pages))}"
            )
        self._check_stamped("match_prefix", self._nodes_along(pages[: len(value)]), now)
        return self._slots(value), node

    def insert(self, key: Sequence[int], value: Sequence[int] | None = None, extra_key: Hashable | None = None) -> int:
        """``ops.insert`` of the block-pages of ``key`` with their block ids; returns tokens already present."""
        pages = self._pages(key, extra_key)
        slots = list(value) if value is not None else list(key)
        ids = [s // self.page_size for s in slots[: len(pages) * self.page_size : self.page_size]]
        present = self._peek(pages)
        given_key, given_value, now = list(pages), list(ids), self._tick()
        n = self.guard.call(self.ops.insert, self.root, given_key, given_value, now)
        self._check_unchanged(INSERT_MUTATES, key=(given_key, pages), value=(given_value, ids))
        problem = INSERT.problem(n)
        if problem is not None:
            raise self._fail(problem)
        n = int(n)
        self._check_links("insert")
        after = self._peek(pages)
        if n != len(present):
            raise self._fail(f"insert returned {n}, but {len(present)} leading elements of the key were in the tree")
        if after != present + ids[len(present) :]:
            raise self._fail("after insert the key is not in the tree with the old values, then the new ones")
        self._check_stamped("insert", self._nodes_along(pages), now)
        inserted: int = n * self.page_size
        return inserted

    def inc_lock_ref(self, node: Any) -> int:
        """The kit's ``lock`` (the engine asks for no size change back)."""
        self.ops.lock(node)
        return 0

    def dec_lock_ref(self, node: Any) -> int:
        """The kit's ``unlock``."""
        self.ops.unlock(node)
        return 0

    def _check_lru(self, before: dict[int, Any], after: set[int], removed: list[Any], locked: dict[int, int]) -> None:
        """No unlocked leaf that stays was used less recently than a node evicted (least recently used first)."""
        if not removed:
            return
        kept = [
            n
            for i, n in before.items()
            if i in after
            and n is not self.root
            and not n.children
            and locked[i] == 0
            and i not in self._parents(removed)
        ]
        newest = max(removed, key=lambda n: n.last_access_time)
        older = [n for n in kept if n.last_access_time < newest.last_access_time]
        if older:
            raise self._fail(
                f"evict removed {newest!r} but kept {older[0]!r}, used less recently: evict the least recently "
                "used leaf first (smallest last_access_time)"
            )

    @staticmethod
    def _parents(nodes: list[Any]) -> set[int]:
        return {id(n.parent) for n in nodes}

    def evictable_size(self) -> int:
        """Tokens in unlocked nodes (each evictable once its children go)."""
        return sum(len(n.key) for n in _walk_tree(self.root) if n is not self.root and n.lock_ref == 0) * self.page_size

    def evict(self, num_tokens: int, evict_callback: Callable[[list[int]], Any]) -> int:
        """``ops.evict`` for ``num_tokens`` (whole blocks); hands the freed slots to ``evict_callback``."""
        want = -(-num_tokens // self.page_size)
        before = {id(n): n for n in _walk_tree(self.root)}
        locked = {id(n): n.lock_ref for n in before.values()}
        freed = self.guard.call(self.ops.evict, self.root, want)
        problem = EVICT.problem(freed)
        if problem is not None:
            raise self._fail(problem)
        after = {id(n) for n in self._check_links("evict")}
        removed = [n for i, n in before.items() if i not in after]
        bad = [n for n in removed if locked[id(n)] > 0]
        if bad:
            raise self._fail(f"evict removed {bad[0]!r}, which is locked (a running request uses it)")
        if sorted(freed) != sorted(v for n in removed for v in n.value):
            raise self._fail(
                f"evict returned {len(freed)} freed slots that are not the values of the {len(removed)} removed nodes"
            )
        if len(freed) < want and self.evictable_size():
            raise self._fail(f"evict freed {len(freed)} of {want} elements while unlocked leaves remain")
        # the last node evicted is one whose parent stayed (a parent goes after its children): without it,
        # whichever it was, the rest must still be short of what was asked
        tops = [n for n in removed if all(n.parent is not m for m in removed)]
        if tops and len(freed) - max(len(n.key) for n in tops) >= want:
            raise self._fail(
                f"evict freed {len(freed)} elements when {want} were asked: it went on after enough was freed "
                "(count the tokens of each evicted node, stop once they reach num_tokens)"
            )
        self._check_lru(before, after, removed, locked)
        if freed:
            evict_callback(self._slots(freed))
        return len(freed) * self.page_size


def _format_nodes(root: Any) -> str:
    """One line per node, indented by depth (the tree where a radix guard tripped)."""
    lines: list[str] = []
    stack = [(c, 0) for c in getattr(root, "children", {}).values()]
    while stack and len(lines) < 40:
        node, depth = stack.pop()
        lines.append(f"{'  ' * depth}{len(node.key)} blocks -> {list(node.value)} lock={node.lock_ref}")
        stack.extend((c, depth + 1) for c in node.children.values())
    return "tree:\n" + ("\n".join(lines) or "(empty)")
