"""Lab 07 - the radix-tree prefix cache (SGLang ``RadixCache``, page size 1).

The learner writes three functions over :class:`pagedlab.grading.kit.TreeNode` (``split_node``,
``lock`` / ``unlock`` are provided):

* ``07.match_prefix`` - ``match_prefix(root, key, now) -> (value, last_node)``;
* ``07.insert`` - ``insert(root, key, value, now) -> int`` (tokens already present);
* ``07.evict`` - ``evict(root, num_tokens) -> list`` of freed slots, LRU leaves first, never a locked node.

Each test builds its trees with the *reference* of the other two functions, so an error in one
never hides behind another. The references agree with ``pagedlab.core.radix_cache.RadixCache``
(checked in ``tests/grading``).
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
    from pagedlab.viz import render_radix_tree

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
def _insert(fn: Any, rec: Any, root: TreeNode, key: list[int], now: int, slot0: int) -> None:
    value = list(range(slot0, slot0 + len(key)))
    rec.step(f"insert(root, {key}, slots {value[0] if value else ''}..., now={now})")
    key = list(key)
    before = snapshot(contracts.INSERT_MUTATES, key=key, value=value)
    got = fn(root, key, value, now)
    observe_contract(rec, contracts.INSERT, got)
    rec.observe(
        "returned (tokens already cached)",
        got,
        hint="count the leading tokens of the key that were already in the tree",
    )
    observe_read_only(rec, contracts.INSERT_MUTATES, before, key=key, value=value)
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


# --- differential tests (random cases against the reference, pagedlab.grading.differential) -------------
# One case: one or two trees (two instances alive at once), each built by the references from a history
# of what the engine does to its tree (inserts of finished requests, lookups, running requests locking
# the path they hit - twice on a shared prefix gives lock_ref 2 - finishing, evictions), then 1-3 calls
# of the learner's function. Keys are one token per element (the lab) or, as in the engine's ``radix``
# slot, one tuple per page of tokens (optionally namespaced, as a request with a LoRA adapter or a cache
# salt): built fresh for every call, so an element is never the very object of an earlier key. Token ids
# come from the whole vocabulary, slots from a pool that hands them out of order, the clock from a start
# as late as a long-running engine's.
from hypothesis import strategies as st  # noqa: E402

from pagedlab.grading.differential import differential  # noqa: E402
from pagedlab.grading.kit import unlock  # noqa: E402


@st.composite
def _radix_case(draw: Any, call: str) -> dict[str, Any]:
    pages = draw(st.sampled_from([0, 0, 2, 4]))  # 0: one token per element (the lab), P: pages of P tokens
    alphabet = draw(st.lists(st.integers(0, 50_000), min_size=2, max_size=4, unique=True))
    tok = st.sampled_from(alphabet)
    # a key: the first `cut` tokens of an earlier key of the same tree (index `src`; -1: none), then `tail`
    # - prompts sharing a cached prefix and leaving it anywhere, as the engine's requests do
    key = st.tuples(st.integers(-1, 9), st.integers(0, 8), st.lists(tok, max_size=4))
    # an earlier key again, whole: a repeated prompt, or a waiting request looking its prefix up at every step
    again: Any = st.tuples(st.integers(0, 9), st.just(99), st.just([]))
    # an earlier key, whole, and more: a conversation's next turn
    turn: Any = st.tuples(st.integers(0, 9), st.just(99), st.lists(tok, min_size=1, max_size=4))
    fresh: Any = st.tuples(st.just(-1), st.just(0), st.lists(tok, min_size=1, max_size=7))  # a new prompt
    # a request looks its prompt up (match_prefix), then finishes (its key inserted), runs (the path of
    # its hit locked) or waits (the lookup only: the pool is short, or it was aborted or preempted);
    # "inserted": a request finishing whose lookup was long ago (the tree changed since: its insert splits)
    op = st.one_of(
        st.tuples(
            st.sampled_from(["finished", "inserted", "running", "running", "waiting"]),
            st.one_of(key, turn, fresh, again),
        ),
        st.tuples(st.sampled_from(["unlock", "evict"]), st.integers(0, 6)),
    )
    trees = draw(st.integers(1, 2))
    # a call's key may also leave a running request's prompt anywhere (src 100-103: the running ones')
    near_running: Any = st.tuples(st.integers(100, 103), st.integers(1, 8), st.lists(tok, min_size=1, max_size=3))
    arg = st.one_of(key, near_running) if call != "evict" else st.integers(0, 14)
    return {
        "call": call,
        "pages": pages,
        "namespace": bool(pages) and draw(st.booleans()),
        "alphabet": alphabet,
        "clock": draw(st.sampled_from([0, 1_000, 1_000_000])),
        "slots": draw(st.integers(0, 2**16)),
        "histories": [  # a tree's first key is an insert (a finished request), the rest anything
            [("finished", (-1, 0, draw(st.lists(tok, min_size=1, max_size=7)))), *draw(st.lists(op, max_size=11))]
            for _ in range(trees)
        ],
        "calls": draw(st.lists(st.tuples(st.integers(0, trees - 1), arg), min_size=1, max_size=3)),
    }


class _Radix:
    """The trees of one case, built by the references; ``held`` are the nodes running requests locked."""

    def __init__(self, case: dict[str, Any]) -> None:
        self.pages, self.namespace = int(case["pages"]), bool(case["namespace"])
        self.rng = random.Random(case["slots"])
        self.used: set[int] = set()  # the pool hands its slots out of order, each once
        self.roots = [new_tree() for _ in case["histories"]]
        self.clock = [int(case["clock"])] * len(self.roots)
        self.held: list[list[TreeNode]] = [[] for _ in self.roots]
        self.keys: list[list[list[int]]] = [[] for _ in self.roots]  # every key used on each tree, in order
        self.waiting: list[list[list[int]]] = [[] for _ in self.roots]  # keys of requests still waiting
        self.running: list[list[list[int]]] = [[] for _ in self.roots]  # keys of requests that ran
        self.first = int(case["alphabet"][0])
        for t, history in enumerate(case["histories"]):
            for what, arg in history:
                self._history(t, what, arg)

    def now(self, t: int) -> int:
        self.clock[t] += 1
        return self.clock[t]

    def key(self, tokens: Sequence[int]) -> list[Any]:
        """Fresh key elements: an int per token, or a tuple per page (namespaced like the engine's)."""
        if not self.pages:
            return [int(str(x)) for x in tokens]  # a new int object, as a sampler makes it
        out: list[Any] = []
        for x in tokens:
            page = tuple((int(x) * 7919 + j) % 50_021 for j in range(self.pages))
            out.append((("lora", "a"), page) if self.namespace else page)
        return out

    def tokens(self, t: int, spec: Any, nonempty: bool = False) -> list[int]:
        """The tokens of key ``spec`` (see :func:`_radix_case`) on tree ``t``; remembered for later keys."""
        src, cut, tail = spec
        earlier = self.keys[t]
        if src >= 100:
            earlier, src = self.running[t] or earlier, src - 100
        out = (list(earlier[int(src) % len(earlier)][: int(cut)]) if earlier and src >= 0 else []) + list(tail)
        if nonempty and not out:
            out = [self.first]
        self.keys[t].append(out)
        return out

    def value(self, n: int) -> list[int]:
        out: list[int] = []
        while len(out) < n:
            slot = self.rng.randrange(100_000)
            if slot not in self.used:
                self.used.add(slot)
                out.append(slot)
        return out

    def step(self, t: int) -> None:
        """A scheduling step: the requests still waiting (the last two) look their prompts up again."""
        for tokens in self.waiting[t][-2:]:
            _ref("07.match_prefix")(self.roots[t], self.key(tokens), self.now(t))

    def _history(self, t: int, what: str, arg: Any) -> None:
        root = self.roots[t]
        self.step(t)
        if what in ("finished", "inserted", "running", "waiting"):  # a request's lookup first, as the scheduler's
            tokens = self.tokens(t, arg, nonempty=what in ("finished", "inserted"))
            if what == "waiting":
                self.waiting[t].append(tokens)
            node = root if what == "inserted" else _ref("07.match_prefix")(root, self.key(tokens), self.now(t))[1]
            if what in ("finished", "inserted"):  # cache_finished: its whole key goes in
                _ref("07.insert")(root, self.key(tokens), self.value(len(tokens)), self.now(t))
            elif what == "running":  # it runs on its hit: the path is locked
                self.running[t].append(tokens)
                if node is not root:
                    lock(node)
                    self.held[t].append(node)
        elif what == "unlock" and self.held[t]:  # a running request finishes
            unlock(self.held[t].pop(int(arg) % len(self.held[t])))
        elif what == "evict":
            _ref("07.evict")(root, int(arg))

    def show(self, key: Sequence[Any]) -> str:
        text = repr(list(key))
        return text if len(text) <= 160 else text[:157] + "..."

    def observe_trees(self, rec: Any, called: int, title: str, hint: Any = None, creation_order: bool = True) -> None:
        """Every tree (the one called, then any other, which must not change), the nodes running requests
        hold (their paths and locks), and - with ``creation_order`` - the creation order of the nodes (LRU ties
        go to the older). Only where the call creates no node: a node made during the call through
        ``pagedlab grade``'s pipe takes its ``id`` from the learner process's counter, not this one's."""
        for t, root in enumerate(self.roots):
            what = "tree" if t == called else f"the other tree (tree {t}, not handed to the call)"
            snap = tree_state(root)
            if t == called:
                rec.state({"tree": snap, "title": title})
            rec.observe(what, snap, hint=_diff_tree_hint if hint is None else hint)
        for t, root in enumerate(self.roots):
            rec.observe(
                f"tree {t}: the nodes running requests hold (their path from the root, lock_ref)",
                [[_path_tokens(n, root), getattr(n, "lock_ref", None)] for n in self.held[t]],
                hint=_held_hint,
            )
            if creation_order:
                rec.observe(
                    f"tree {t}: nodes in creation order (TreeNode.id; ties in LRU go to the older)",
                    _creation_order(root),
                    hint=_held_hint,
                )


def _creation_order(root: TreeNode) -> list[Any]:
    """The path of every node, oldest node (smallest ``id``) first."""
    nodes = [n for n in _nodes(root) if n is not root]
    nodes.sort(key=lambda n: getattr(n, "id", 0))
    return [_path_tokens(n, root) for n in nodes]


def _diff_tree_hint(expected: Any, got: Any, state: Any) -> str | None:
    """:func:`_tree_hint`, and a lock lost in a split."""
    path = first_difference(expected, got)
    if path and path[-1] == "lock_ref":
        return (
            "a node split off the top of a locked node is locked as much (the requests holding the lower part "
            "hold the path through it): split with split_node, which copies lock_ref"
        )
    return _tree_hint(expected, got, state)


def _held_hint(expected: Any, got: Any, state: Any) -> str:
    return (
        "a node a running request holds (the last node of its hit, locked) must keep its whole path: split "
        "with split_node, which puts a NEW node above the split point and leaves the node itself below it"
    )


def _describe_radix(case: Any) -> str:
    """The case as the learner reads it: each tree's history, then the calls, keys as token lists."""
    from types import SimpleNamespace

    kind = "one token per key element" if not case["pages"] else f"one page of {case['pages']} tokens per key element"
    if case.get("namespace"):
        kind += " (namespaced)"
    keys = SimpleNamespace(
        keys=[[] for _ in case["histories"]], running=[[] for _ in case["histories"]], first=int(case["alphabet"][0])
    )
    trees = []
    for t, history in enumerate(case["histories"]):
        ops = []
        for what, arg in history:
            if what in ("finished", "inserted", "running", "waiting"):
                tokens = _Radix.tokens(keys, t, arg, nonempty=what in ("finished", "inserted"))  # type: ignore[arg-type]
                if what == "running":
                    keys.running[t].append(tokens)
                ops.append(f"{what} {tokens}")
            else:
                ops.append(f"{what} {arg}")
        trees.append(f"tree {t}: " + ", ".join(ops))
    calls = [
        f"tree {t}: {arg if isinstance(arg, int) else _Radix.tokens(keys, t, arg, case['call'] == 'insert')}"  # type: ignore[arg-type]
        for t, arg in case["calls"]
    ]
    return f"{kind}, clock from {case['clock']}; " + "; ".join(trees) + "; then " + ", ".join(calls)


_RADIX_DRAWS = (
    "1-2 trees alive at once, each built by 1-12 engine operations: requests looking their prompt up, then "
    "finishing (inserted; some whose lookup was long before), running (hit locked - lock_ref 2 on a shared prefix) or waiting (looking up again at "
    "every step), running ones finishing, evictions; then 1-3 calls; a prompt is an earlier one cut anywhere plus "
    "0-4 new tokens, repeated whole, a next turn, or new (empty lookups included); keys of one int per token "
    "(ids 0-50000, new objects) or of page tuples (2 or 4 tokens, namespaced or not); slots out of order; "
    "the clock from 1, 1000 or 10^6"
)


@differential(MATCH, _radix_case("match"), examples=60, describe=_describe_radix, draws=_RADIX_DRAWS)
def _(fn: Any, case: Any, rec: Any) -> None:
    trees = _Radix(case)
    for t, spec in case["calls"]:
        root, key, now = trees.roots[t], trees.key(trees.tokens(t, spec)), trees.now(t)
        rec.step(f"match_prefix(tree {t}, {trees.show(key)}, now={now})")
        before = snapshot(contracts.MATCH_PREFIX_MUTATES, key=key)
        out = fn(root, key, now)
        observe_contract(rec, contracts.MATCH_PREFIX, out)
        try:
            value, node = out
        except (TypeError, ValueError):
            rec.fail(f"match_prefix must return a pair (value, last_node); it returned {type(out).__name__}")
        rec.observe(
            "matched slots",
            value,
            hint="value holds one slot per matched key element: the values of the nodes of the match, in order",
        )
        rec.observe("tokens from the root to last_node", _path_tokens(node, root), hint=_last_node_hint)
        observe_read_only(rec, contracts.MATCH_PREFIX_MUTATES, before, key=key)
        trees.observe_trees(rec, t, f"after match_prefix (tree {t}, now={now})", creation_order=False)


@differential(INSERT, _radix_case("insert"), examples=80, describe=_describe_radix, draws=_RADIX_DRAWS)
def _(fn: Any, case: Any, rec: Any) -> None:
    trees = _Radix(case)
    for t, spec in case["calls"]:
        root, key, now = trees.roots[t], trees.key(trees.tokens(t, spec, nonempty=True)), trees.now(t)
        value = trees.value(len(key))
        rec.step(f"insert(tree {t}, {trees.show(key)}, slots {trees.show(value)}, now={now})")
        before = snapshot(contracts.INSERT_MUTATES, key=key, value=value)
        got = fn(root, key, value, now)
        observe_contract(rec, contracts.INSERT, got)
        rec.observe(
            "returned (tokens already cached)",
            got,
            hint="return how many leading elements of the key the tree held before the call",
        )
        observe_read_only(rec, contracts.INSERT_MUTATES, before, key=key, value=value)
        trees.observe_trees(rec, t, f"after insert (tree {t}, now={now})", creation_order=False)
        rec.observe(
            "a node of the tree holds the very key or value list handed in",
            any(getattr(n, "key", None) is key or getattr(n, "value", None) is value for n in _nodes(root)),
            hint=(
                "the tree keeps its own lists: the caller goes on using (and may change) the key and value it "
                "handed in - give the new leaf copies (TreeNode(key, value, ...) makes them)"
            ),
        )


@differential(EVICT, _radix_case("evict"), examples=120, describe=_describe_radix, draws=_RADIX_DRAWS)
def _(fn: Any, case: Any, rec: Any) -> None:
    trees = _Radix(case)
    for t, n in case["calls"]:
        root = trees.roots[t]
        trees.step(t)  # the step that runs short of memory: its waiting requests looked up first
        rec.step(f"evict(tree {t}, {n})")
        below = {s: _slots_below(x) for x in _nodes(root) if x.children and x is not root for s in x.value}
        locked = [x for x in _nodes(root) if x is not root and x.lock_ref > 0]
        got = fn(root, n)
        alive = {id(x) for x in _nodes(root)}
        for node in locked:
            if id(node) not in alive:
                rec.fail(
                    f"the node with key {node.key[:8]} was evicted although it is locked (lock_ref "
                    f"{node.lock_ref}): a running request still reads it",
                    invariant="a locked node is never evicted",
                )
        observe_contract(rec, contracts.EVICT, got)
        rec.observe(
            "slots freed, in eviction order", got, hint=lambda e, g, s, below=below: _diff_evict_hint(e, g, below)
        )
        trees.observe_trees(
            rec,
            t,
            f"after evict (tree {t}, {n})",
            hint="an evicted node leaves the tree: delete it from its parent's children",
        )


def _slots_below(node: TreeNode) -> set[int]:
    """The slots of every node under ``node``."""
    return {s for x in _nodes(node) if x is not node for s in x.value}


def _diff_evict_hint(expected: Any, got: Any, below: dict[int, set[int]]) -> str:
    """:func:`_evict_hint`, where a parent counts as evicted too early only when a node under it was still
    in the tree then (``below``: slot of a node that had children before the call -> the slots under it)."""
    if isinstance(got, list) and all(isinstance(s, int) for s in got):
        for i, s in enumerate(got):
            if s in below and below[s] - set(got[:i]):
                return (
                    f"slot {s} belongs to a node that still had children when you evicted it: a parent becomes "
                    "a candidate only once its last child is gone (check that no children are left before pushing it)"
                )
        out = _evict_hint(expected, got, set())
        if (
            out.startswith("evict in LRU order")
            and isinstance(expected, list)
            and any(s in below for s in expected)
            and not any(s in below for s in got)
        ):
            return _evict_hint([1], [], {1})  # the hint of a parent left without children that is never pushed
        return out
    return _evict_hint(expected, got, set(below))
