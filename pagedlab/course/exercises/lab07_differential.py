"""Lab 07 - the radix-tree prefix cache: the differential tests of ``07.match_prefix``, ``07.insert`` and
``07.evict`` (random engine histories against the reference); the exercises and their hand-written tests are
in ``lab07.py``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from hypothesis import strategies as st

from pagedlab.course.exercises.lab07 import (  # the helpers the hand-written tests use too
    EVICT,
    INSERT,
    MATCH,
    _evict_hint,
    _last_node_hint,
    _nodes,
    _path_tokens,
    _ref,
    _tree_hint,
    call_insert,
)
from pagedlab.grading.contract import observe_contract, observe_read_only, snapshot
from pagedlab.grading.differential import differential
from pagedlab.grading.judge import first_difference
from pagedlab.grading.kit import TreeNode, lock, new_tree, unlock
from pagedlab.grading.snapshots import tree_state
from pagedlab.parts import contracts

# --- differential tests (random cases against the reference, pagedlab.grading.differential) -------------
# One case: one or two trees (two instances alive at once), each built by the references from a history
# of what the engine does to its tree (inserts of finished requests, lookups, running requests locking
# the path they hit - twice on a shared prefix gives lock_ref 2 - finishing, evictions), then 1-3 calls
# of the learner's function. Keys are one token per element (the lab) or, as in the engine's ``radix``
# slot, one tuple per page of tokens (optionally namespaced, as a request with a LoRA adapter or a cache
# salt): built fresh for every call, so an element is never the very object of an earlier key. Token ids
# come from the whole vocabulary, slots from a pool that hands them out of order, the clock from a start
# as late as a long-running engine's.


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
        call_insert(
            fn,
            rec,
            root,
            key,
            value,
            now,
            hint="return how many leading elements of the key the tree held before the call",
        )
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
