"""Lab 07 - the radix-tree prefix cache (SGLang ``RadixCache``, page size 1).

The learner writes three functions over :class:`pagedlab.grading.kit.TreeNode` (``split_node``,
``lock`` / ``unlock`` are provided):

* ``07.match_prefix`` - ``match_prefix(root, key, now) -> (value, last_node)``;
* ``07.insert`` - ``insert(root, key, value, now) -> int`` (tokens already present);
* ``07.evict`` - ``evict(root, num_tokens) -> list`` of freed slots, LRU leaves first, never a locked node.

Each test builds its trees with the *reference* of the other two functions, so an error in one
never hides behind another. The references agree with ``pagedlab.core.radix_cache.RadixCache``
(checked in ``tests/grading``). The three exercises' differential tests are in ``lab07_differential.py``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from pagedlab.grading.contract import observe_contract, observe_read_only, snapshot
from pagedlab.grading.judge import first_difference
from pagedlab.grading.kit import TreeNode, lock, new_tree
from pagedlab.grading.registry import Exercise, get, register
from pagedlab.grading.snapshots import tree_state
from pagedlab.parts import contracts
from pagedlab.viz import render_radix_tree


def _walk(tree: dict[str, Any]):
    stack = [tree]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n["children"])


def _path_tokens(node: Any, root: TreeNode) -> Any:
    """Tokens from the root down to ``node`` (follows parent pointers)."""
    if node is None:
        return "<None>"
    out: list[int] = []
    seen = 0
    while node is not None and node is not root and seen < 10_000:
        out = list(getattr(node, "key", [])) + out
        node = getattr(node, "parent", None)
        seen += 1
    return out if node is root else "<not a node of this tree>"


def _render(state: dict[str, Any], expected: Any, path: Any) -> str:

    return render_radix_tree({"root": state["tree"]}, title=state.get("title", "radix tree"))


def _exercise(eid: str, name: str, summary: str) -> Exercise:
    ex = register(Exercise(eid, name, summary, render=_render, components=("radix",)))

    @ex.invariant("children are keyed by the first token of their key")
    def _(s: dict[str, Any]) -> str | None:
        for n in _walk(s["tree"]):
            for c in n["children"]:
                if not c["key"] or c["child_key"] != c["key"][0]:
                    return (
                        f"the node with key {c['key'][:8]} is stored under children[{c['child_key']!r}]; "
                        "store each child under its first token"
                    )
        return None

    @ex.invariant("every node has one slot per token, and a parent pointer to its parent")
    def _(s: dict[str, Any]) -> str | None:
        for n in _walk(s["tree"]):
            if len(n["key"]) != len(n["value"]):
                return f"the node with key {n['key'][:8]} has {len(n['key'])} tokens but {len(n['value'])} slots"
            if n["child_key"] is not None and not n["parent_ok"]:
                return f"the node with key {n['key'][:8]} has a .parent that is not the node it hangs under"
        return None

    return ex


MATCH = _exercise("07.match_prefix", "match_prefix", "longest cached prefix of a key; split a node the match ends in")
INSERT = _exercise("07.insert", "insert", "cache a key: keep existing slots, one new leaf for the rest")
EVICT = _exercise("07.evict", "evict", "free tokens from unlocked leaves, least recently used first")


def _ref(eid: str) -> Any:
    return get(eid).get_reference()


def _build(keys: Sequence[Sequence[int]], start: int = 1) -> TreeNode:
    """A tree holding ``keys`` inserted at times start, start+1, ... (slot = 100 + token index)."""
    insert = _ref("07.insert")
    root = new_tree()
    slot = 100
    for t, k in enumerate(keys, start):
        insert(root, k, list(range(slot, slot + len(k))), t)
        slot += len(k)
    return root


def _record_tree(rec: Any, root: TreeNode, title: str, hint: Any = None) -> None:
    rec.state({"tree": tree_state(root), "title": title})
    rec.observe("tree", tree_state(root), hint=_tree_hint if hint is None else hint)


def _tree_hint(expected: Any, got: Any, state: Any) -> str | None:
    """Names the field of the first node that differs (time stamp, slots, shape)."""
    path = first_difference(expected, got)
    field = next((p for p in reversed(path or ()) if isinstance(p, str) and not p.startswith("<")), None)
    if field == "last_access_time":
        return (
            "stamp last_access_time = now on every node you walk through, the root included (and on a leaf you create)"
        )
    if field == "value":
        return (
            "tokens already in the tree keep the slots they have; only the new leaf gets slots from `value` "
            "(the part for its own tokens)"
        )
    if field in ("key", "children", "child_key"):
        return "the tree's shape differs: split a node where the key leaves it (split_node), one new leaf for the rest"
    return None


# --- match_prefix --------------------------------------------------------------------------------------
def _last_node_hint(expected: Any, got: Any, state: Any) -> str:
    """A last_node above the match's end (split done, its parent returned) from one below it (no split)."""
    if (
        isinstance(got, list)
        and isinstance(expected, list)
        and len(got) < len(expected)
        and got == expected[: len(got)]
    ):
        return (
            "last_node stops short of the last matched token: return the node whose path ends exactly where the "
            "match ends (after a split, the node split_node gives back, not its parent)"
        )
    return "last_node must cover exactly the matched tokens: split the node the match ends in (split_node)"


def _match(fn: Any, rec: Any, root: TreeNode, key: list[int], now: int) -> None:
    rec.step(f"match_prefix(root, {key}, now={now})")
    key = list(key)
    before = snapshot(contracts.MATCH_PREFIX_MUTATES, key=key)
    out = fn(root, key, now)
    observe_contract(rec, contracts.MATCH_PREFIX, out)
    try:
        value, node = out
    except (TypeError, ValueError):
        rec.fail(f"match_prefix must return a pair (value, last_node); it returned {type(out).__name__}")
    rec.observe("matched slots", value, hint="the slots of every matched token, in order, across the nodes walked")
    rec.observe("tokens from the root to last_node", _path_tokens(node, root), hint=_last_node_hint)
    observe_read_only(rec, contracts.MATCH_PREFIX_MUTATES, before, key=key)
    _record_tree(rec, root, f"after match_prefix({key[:8]}, now={now})")


@MATCH.test("an empty tree matches nothing and returns the root")
def _(fn: Any, rec: Any) -> None:
    root = new_tree()
    _match(fn, rec, root, [1, 2, 3], 5)


@MATCH.test("a whole node matches; the path is stamped with now")
def _(fn: Any, rec: Any) -> None:
    root = _build([[1, 2, 3]])
    _match(fn, rec, root, [1, 2, 3, 4], 7)
    _match(fn, rec, root, [1, 2, 3], 8)
    _match(fn, rec, root, [9], 9)


@MATCH.test("a match that ends inside a node splits it")
def _(fn: Any, rec: Any) -> None:
    root = _build([[1, 2, 3, 4, 5]])
    _match(fn, rec, root, [1, 2, 3, 9], 4)
    _match(fn, rec, root, [1, 2, 3, 4, 5, 6], 5)
    _match(fn, rec, root, [1, 7], 6)


@MATCH.test("walking down several nodes of a branching tree")
def _(fn: Any, rec: Any) -> None:
    root = _build([[1, 2, 3, 4], [1, 2, 5, 6], [7, 8], [1, 2, 5, 9, 9]])
    for t, key in enumerate([[1, 2, 5, 9, 9, 1], [1, 2, 3], [7, 8, 1], [1, 2, 5, 6], [4]], 10):
        _match(fn, rec, root, key, t)


@MATCH.test("60 random inserts and matches against the reference")
def _(fn: Any, rec: Any) -> None:
    rng = random.Random(11)
    insert = _ref("07.insert")
    root = new_tree()
    for t in range(1, 61):
        key = [rng.randint(1, 3) for _ in range(rng.randint(1, 7))]
        if rng.random() < 0.5:
            insert(root, key, [1000 + t * 10 + i for i in range(len(key))], t)
        else:
            _match(fn, rec, root, key, t)


# --- insert --------------------------------------------------------------------------------------------
def call_insert(fn: Any, rec: Any, root: TreeNode, key: list[Any], value: list[int], now: int, hint: str) -> Any:
    """``fn(root, key, value, now)`` observed as every ``07.insert`` test observes it (the differential one
    too): the contract, the count returned (``hint`` when it is wrong), ``key`` and ``value`` left as they were.
    Returns what ``fn`` returned."""
    before = snapshot(contracts.INSERT_MUTATES, key=key, value=value)
    got = fn(root, key, value, now)
    observe_contract(rec, contracts.INSERT, got)
    rec.observe("returned (tokens already cached)", got, hint=hint)
    observe_read_only(rec, contracts.INSERT_MUTATES, before, key=key, value=value)
    return got


def _insert(fn: Any, rec: Any, root: TreeNode, key: list[int], now: int, slot0: int) -> None:
    value = list(range(slot0, slot0 + len(key)))
    rec.step(f"insert(root, {key}, slots {value[0] if value else ''}..., now={now})")
    key = list(key)
    call_insert(
        fn, rec, root, key, value, now, hint="count the leading tokens of the key that were already in the tree"
    )
    _record_tree(rec, root, f"after insert({key[:8]}, now={now})")


@INSERT.test("into an empty tree: one leaf")
def _(fn: Any, rec: Any) -> None:
    root = new_tree()
    _insert(fn, rec, root, [1, 2, 3], 1, 10)


@INSERT.test("a key already cached: existing slots are kept, its length is returned")
def _(fn: Any, rec: Any) -> None:
    root = _build([[1, 2, 3, 4]])
    _insert(fn, rec, root, [1, 2, 3, 4], 5, 50)
    _insert(fn, rec, root, [1, 2], 6, 60)


@INSERT.test("a key that leaves a node in the middle splits it")
def _(fn: Any, rec: Any) -> None:
    root = _build([[1, 2, 3, 4, 5]])
    _insert(fn, rec, root, [1, 2, 3, 8, 9], 5, 50)
    _insert(fn, rec, root, [1, 2, 7], 6, 60)
    _insert(fn, rec, root, [6, 6], 7, 70)


@INSERT.test("a key that extends a leaf adds a child below it")
def _(fn: Any, rec: Any) -> None:
    root = _build([[4, 5]])
    _insert(fn, rec, root, [4, 5, 6, 7], 3, 30)
    _insert(fn, rec, root, [4, 5, 6, 7, 8], 4, 40)


@INSERT.test("60 random inserts against the reference")
def _(fn: Any, rec: Any) -> None:
    rng = random.Random(12)
    root = new_tree()
    for t in range(1, 61):
        key = [rng.randint(1, 3) for _ in range(rng.randint(1, 7))]
        _insert(fn, rec, root, key, t, 1000 + 10 * t)


# --- evict ---------------------------------------------------------------------------------------------
def _find(root: TreeNode, tokens: Sequence[int]) -> TreeNode:
    node, rest = root, list(tokens)
    while rest:
        node = node.children[rest[0]]
        rest = rest[len(node.key) :]
    return node


def _evict(fn: Any, rec: Any, root: TreeNode, n: int, locked: Sequence[TreeNode] = ()) -> None:
    rec.step(f"evict(root, {n})")
    inner = {s for x in _nodes(root) if x.children and x is not root for s in x.value}
    got = fn(root, n)
    observe_contract(rec, contracts.EVICT, got)
    alive = {id(x) for x in _nodes(root)}
    for node in locked:
        if id(node) not in alive:
            rec.fail(
                f"the node with key {node.key[:8]} was evicted although it is locked (lock_ref "
                f"{node.lock_ref}): a running request still reads it",
                invariant="a locked node is never evicted",
            )
    rec.observe("slots freed, in eviction order", got, hint=lambda e, g, s, inner=inner: _evict_hint(e, g, inner))
    _record_tree(
        rec, root, f"after evict({n})", hint="an evicted node leaves the tree: delete it from its parent's children"
    )


def _evict_hint(expected: Any, got: Any, inner: set[int]) -> str:
    """Explains a wrong list of freed slots; ``inner`` holds the slots of nodes that had children before the call."""
    if not isinstance(got, list) or not isinstance(expected, list):
        return "return the list of slots freed (each evicted node's value, in eviction order)"
    if any(isinstance(s, list) for s in got):
        return (
            "return one flat list of slots: add each evicted node's slots to it (extend, +=), not the node's "
            "value list as one item"
        )
    early = [s for s in got if s in inner and s not in expected]
    if early:
        return (
            f"slot {early[0]} belongs to a node that still had children when you evicted it: a parent becomes "
            "a candidate only once its last child is gone (check that no children are left before pushing it)"
        )
    if got[: len(expected)] == expected:
        return (
            f"the first {len(expected)} slots are right, then you evicted more: stop as soon as the tokens freed "
            "(count tokens - len(node.key) - not nodes) reach num_tokens"
        )
    if expected[: len(got)] == got:
        return "you stopped too early: keep evicting while fewer than num_tokens tokens are freed"
    if any(s in inner for s in expected) and not any(s in inner for s in got):
        return (
            "a parent left without children (unlocked, not the root) is a leaf too: put it among the "
            "candidates as soon as its last child goes"
        )
    return (
        "evict in LRU order: always the leaf with the smallest (last_access_time, id) first (a heap of "
        "the candidate leaves)"
    )


def _nodes(root: TreeNode) -> list[TreeNode]:
    out, stack = [], [root]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(getattr(n, "children", {}).values())
    return out


@EVICT.test("the least recently used leaf goes first")
def _(fn: Any, rec: Any) -> None:
    root = _build([[1, 2], [3, 4], [5, 6]])
    _ref("07.match_prefix")(root, [1, 2], 10)  # [1, 2] is now the most recently used
    rec.step("the test matches [1, 2] at now=10")
    _record_tree(rec, root, "before eviction")
    _evict(fn, rec, root, 2)
    _evict(fn, rec, root, 1)


@EVICT.test("a parent left without children becomes a leaf and can go too")
def _(fn: Any, rec: Any) -> None:
    root = _build([[1, 2, 3], [1, 2, 4], [1, 2, 5, 6], [9, 9]])
    _evict(fn, rec, root, 4)
    _evict(fn, rec, root, 3)


@EVICT.test("locked nodes (and their ancestors) are never evicted")
def _(fn: Any, rec: Any) -> None:
    root = _build([[1, 2, 3], [1, 2, 4], [7, 7, 7], [8]])
    leaf = _find(root, [1, 2, 3])
    lock(leaf)
    parent = leaf.parent
    assert parent is not None  # the node [1, 2] that _build made above [3]
    rec.step("the test locks the path [1, 2] -> [3] (a running request uses it)")
    _record_tree(rec, root, "before eviction")
    _evict(fn, rec, root, 100, locked=[leaf, parent])


@EVICT.test("a locked inner node stays when its children go, and is not evicted after them")
def _(fn: Any, rec: Any) -> None:
    root = _build([[1, 2, 3], [1, 2, 4], [9]])
    inner = _find(root, [1, 2])
    lock(inner)
    rec.step("the test locks the path [1, 2] (a running request uses it; its children [3] and [4] are unlocked)")
    _record_tree(rec, root, "before eviction")
    _evict(fn, rec, root, 100, locked=[inner])


@EVICT.test("evicts whole nodes and stops once enough tokens are freed")
def _(fn: Any, rec: Any) -> None:
    root = _build([[1, 1, 1, 1, 1], [2, 2], [3, 3, 3]])
    _evict(fn, rec, root, 1)
    _evict(fn, rec, root, 0)
    _evict(fn, rec, root, 4)


@EVICT.test("asking for more than the tree holds empties it, root kept")
def _(fn: Any, rec: Any) -> None:
    root = _build([[1, 2, 3], [1, 4], [5]])
    _evict(fn, rec, root, 1000)
    _evict(fn, rec, root, 5)


@EVICT.test("random trees, locks and evictions against the reference")
def _(fn: Any, rec: Any) -> None:
    rng = random.Random(13)
    insert = _ref("07.insert")
    root = new_tree()
    locked: list[TreeNode] = []
    for t in range(1, 41):
        key = [rng.randint(1, 3) for _ in range(rng.randint(1, 6))]
        insert(root, key, [1000 + 10 * t + i for i in range(len(key))], t)
        if rng.random() < 0.15:
            node = _find_prefix(root, key)
            if node is not root:
                lock(node)
                locked.append(node)
        if t % 5 == 0:
            _evict(fn, rec, root, rng.randint(1, 8), locked=[n for n in locked])


def _find_prefix(root: TreeNode, key: Sequence[int]) -> TreeNode:
    node, rest = root, list(key)
    while rest and rest[0] in node.children:
        child = node.children[rest[0]]
        if rest[: len(child.key)] != child.key:
            break
        node, rest = child, rest[len(child.key) :]
    return node
