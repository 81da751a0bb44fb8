"""Lab 03 - copy-on-write fork (vLLM v0 ``BlockSpaceManager.fork`` / ``append_slot``).

Both exercises act on :class:`pagedlab.grading.kit.RefCountedPool` and :class:`~pagedlab.grading.kit.Seq`:

* ``03.fork`` - ``fork(pool, parent, child_id) -> Seq``: share every block, allocate nothing.
* ``03.append_token`` - ``append_token(pool, seq) -> (src, dst) | None``: a new block at a block
  boundary, a copy before writing into a shared block, in place otherwise.

The tests of one never rely on the learner's other function: sharing is set up by the test itself.
Invariants checked after every step: each block's ``ref_cnt`` equals the number of sequences
holding it; a sequence only writes into a block it holds alone; a table has
``ceil(num_tokens / block_size)`` blocks.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from pagedlab.containment.rpc import is_a, type_name
from pagedlab.grading.contract import observe_contract, observe_in_place, observe_read_only, snapshot
from pagedlab.grading.differential import differential
from pagedlab.grading.kit import RefCountedPool, Seq
from pagedlab.grading.registry import Exercise, register
from pagedlab.parts import contracts
from pagedlab.viz import render_block_pool
from pagedlab.viz.pictures import pool_snapshot


class World:
    """A pool and the sequences a test knows about."""

    def __init__(self, num_blocks: int = 16, block_size: int = 4) -> None:
        self.pool = RefCountedPool(num_blocks, block_size)
        self.seqs: dict[str, Seq] = {}
        self.copies: list[list[int]] = []
        self.wrote: list[Any] | None = None

    def prefill(self, seq_id: str, num_tokens: int) -> Seq:
        bs = self.pool.block_size
        seq = Seq(seq_id, [self.pool.allocate() for _ in range(-(-num_tokens // bs))], num_tokens)
        self.seqs[seq_id] = seq
        return seq

    def share(self, parent: Seq, child_id: str) -> Seq:
        """The test's own fork (used where the learner's fork is not under test)."""
        for b in parent.block_table:
            self.pool.incref(b)
        child = Seq(child_id, list(parent.block_table), parent.num_tokens)
        self.seqs[child_id] = child
        return child

    def state(self) -> dict[str, Any]:
        return {
            "block_size": self.pool.block_size,
            "ref_cnts": self.pool.ref_cnts(),
            "free_queue": self.pool.free_queue(),
            "tables": {sid: list(s.block_table) for sid, s in self.seqs.items()},
            "num_tokens": {sid: s.num_tokens for sid, s in self.seqs.items()},
            "copies": [list(c) for c in self.copies],
            "wrote": self.wrote,
            "calls": list(self.pool.calls),
        }


def _render(state: dict[str, Any], expected: Any, path: Any) -> str:

    snap = pool_snapshot(
        state["ref_cnts"], state["tables"], state.get("free_queue", ()), cow_pairs=state.get("copies", [])[-1:]
    )
    title = "block pool: " + ", ".join(f"{sid} -> {t}" for sid, t in sorted(state["tables"].items()))
    return render_block_pool(snap, title=title[:110])


def _ref_invariant(s: dict[str, Any]) -> str | None:
    held = [0] * len(s["ref_cnts"])
    for table in s["tables"].values():
        for b in set(table):
            if isinstance(b, int) and 0 <= b < len(held):
                held[b] += 1
    for b, (r, h) in enumerate(zip(s["ref_cnts"], held)):
        if r != h:
            owners = sorted(sid for sid, t in s["tables"].items() if b in t)
            return f"block {b} has ref_cnt {r} but {h} sequence(s) hold it ({', '.join(owners) or 'none'}): " + (
                "a reference was never given back (pool.free) - the block leaks"
                if r > h
                else "a holder never took its reference (pool.incref / allocate)"
            )
    return None


def _write_invariant(s: dict[str, Any]) -> str | None:
    w = s.get("wrote")
    if not w:
        return None
    seq_id, pos, block, ref = w
    if ref != 1:
        return (
            f"{seq_id} wrote its token {pos} into block {block}, which {ref} sequences share: the others "
            "would see a token that is not theirs. Copy the block first (allocate, free the shared one, swap it "
            "into the table)."
        )
    return None


def _length_invariant(s: dict[str, Any]) -> str | None:
    bs = s["block_size"]
    for sid, table in s["tables"].items():
        n = s["num_tokens"].get(sid, 0)
        need = -(-n // bs)
        if len(table) != need:
            extra = (
                ": when a token goes into a shared block, the copy takes that block's place in the table (the "
                "last entry is replaced); only a token that starts a new block adds an entry"
                if len(table) == need + 1 and s.get("copies") and set(s["copies"][-1]) <= set(table)
                else ""
            )
            return f"{sid} has {n} tokens, so it needs {need} blocks, but its block table holds {len(table)}{extra}"
    return None


def _exercise(eid: str, name: str, summary: str) -> Exercise:
    ex = register(Exercise(eid, name, summary, render=_render, components=("cow", "allocator")))
    # the table's length first: a block added where one should be replaced also breaks the ref counts
    ex.invariants.append(("a block table holds ceil(num_tokens / block_size) blocks", _length_invariant))
    ex.invariants.append(("ref_cnt = number of sequences holding the block", _ref_invariant))
    ex.invariants.append(("a sequence writes only into a block it holds alone", _write_invariant))
    return ex


FORK = _exercise("03.fork", "fork", "fork a sequence: share every block (ref_cnt + 1), allocate nothing")
APPEND = _exercise(
    "03.append_token",
    "append_token",
    "append a token with copy-on-write: copy a shared last block before writing into it",
)


# --- fork tests --------------------------------------------------------------------------------------
def _fork_step(fork: Any, w: World, parent: Seq, child_id: str, rec: Any) -> Seq:
    w.pool.calls.clear()
    before = list(parent.block_table)
    rec.step(f"fork(pool, {parent.seq_id} with table {before} and {parent.num_tokens} tokens, {child_id!r})")
    given = snapshot(contracts.FORK_MUTATES, **{"parent.block_table": parent.block_table})
    child = fork(w.pool, parent, child_id)
    observe_contract(rec, contracts.FORK, child)
    observe_read_only(rec, contracts.FORK_MUTATES, given, **{"parent.block_table": parent.block_table})
    if not is_a(child, Seq):  # the child may live in the learner's process (pagedlab grade)
        rec.fail(f"fork must return the child Seq; it returned {type_name(child)}")
    w.seqs[child_id] = child
    rec.state(w.state())
    rec.observe("child's seq_id", child.seq_id)
    rec.observe("child's block table", list(child.block_table), hint=_child_table_hint)
    rec.observe("child's num_tokens", child.num_tokens)
    rec.observe("parent's block table after the fork", list(parent.block_table))
    rec.observe(
        "ref_cnt of every block",
        w.pool.ref_cnts(),
        hint="every block of the parent gains exactly one owner (pool.incref)",
    )
    rec.observe("free blocks", w.pool.num_free_blocks, hint="fork allocates nothing")
    rec.observe(
        "the child's block table is its own list",
        child.block_table is not parent.block_table,
        hint="copy the list (list(parent.block_table)): with one shared list object, a block the child "
        "appends would also appear in the parent's table",
    )
    return child


def _same_blocks_reordered(expected: Any, got: Any) -> bool:
    return isinstance(got, list) and got != expected and sorted(map(repr, got)) == sorted(map(repr, expected))


def _child_table_hint(expected: Any, got: Any, state: Any) -> str:
    if _same_blocks_reordered(expected, got):
        return (
            "the child's logical block i is the parent's block_table[i]: keep the parent's order (a pool that "
            "got blocks back hands them out in any id order)"
        )
    return "the child uses the very same physical blocks as the parent: nothing is allocated or copied"


def _table_order_hint(expected: Any, got: Any, state: Any) -> str | None:
    if _same_blocks_reordered(expected, got):
        return (
            "a block table is in logical order (entry i holds tokens i * block_size ...), not in block-id order: "
            "never sort it; the block a token goes into is block_table[-1] or a new one appended"
        )
    return None


def _play(script: str, w: World, rec: Any, fork: Any = None, append_token: Any = None) -> None:
    """Play a test script on ``w``, one space-separated move at a time.

    ``A=10`` prefills a new sequence A with 10 tokens; ``A>B`` forks A into B - with the learner's
    ``fork`` when given (that call is checked), else with the test's own (:meth:`World.share`);
    ``A+`` appends one token to A with the learner's ``append_token`` (checked).

    Raises:
        ValueError: a move that is none of these (a bug in the test table).
    """
    for move in script.split():
        if "=" in move:
            sid, n = move.split("=")
            w.prefill(sid, int(n))
        elif ">" in move:
            parent_id, child = move.split(">")
            src = w.seqs[parent_id]
            if fork is not None:
                _fork_step(fork, w, src, child, rec)
            else:
                rec.step(f"the test forks {src.seq_id} into {child} (both hold blocks {list(src.block_table)})")
                w.share(src, child)
                rec.state(w.state())
        elif move.endswith("+") and append_token is not None:
            _append_step(append_token, w, w.seqs[move[:-1]], rec)
        else:
            raise ValueError(f"unknown move {move!r} in test script {script!r}")


def _script_test(ex: Exercise, title: str, num_blocks: int, block_size: int, script: str) -> None:
    """Register test ``title`` of ``ex``: ``script`` (see :func:`_play`) on a fresh pool."""

    @ex.test(title)
    def _(fn: Any, rec: Any) -> None:
        w = World(num_blocks, block_size)
        if ex is FORK:
            _play(script, w, rec, fork=fn)
        else:
            _play(script, w, rec, append_token=fn)


# fork tests as (title, pool blocks, block size, script), scripts as :func:`_play` reads them.
_FORK_TESTS: list[tuple[str, int, int, str]] = [
    ("fork shares every block and allocates nothing", 8, 4, "A=10 A>B"),
    ("forking a fork: three samples share the prompt", 8, 4, "A=7 A>B B>C A>D"),
    ("fork at a block boundary, and fork of a one-token sequence", 8, 4, "A=8 A>B X=1 X>Y"),
]
for _args in _FORK_TESTS:
    _script_test(FORK, *_args)


@FORK.test("the child's table is its own list: appending to it leaves the parent alone")
def _(fork: Any, rec: Any) -> None:
    w = World(8, 4)
    a = w.prefill("A", 8)
    b = _fork_step(fork, w, a, "B", rec)
    rec.step("B grows by one block (the test appends a fresh block to B's table)")
    b.block_table.append(w.pool.allocate())
    b.num_tokens += 1
    rec.state(w.state())
    rec.observe("A's block table", list(a.block_table))


# --- append_token tests -------------------------------------------------------------------------------
def _append_step(append_token: Any, w: World, seq: Seq, rec: Any) -> None:
    w.pool.calls.clear()
    w.wrote = None
    pos = seq.num_tokens
    rec.step(f"append_token(pool, {seq.seq_id}) - token {pos}, table {list(seq.block_table)}")
    table = seq.block_table
    copy = append_token(w.pool, seq)
    observe_contract(rec, contracts.APPEND_TOKEN, copy)
    if copy is not None:
        try:
            w.copies.append([int(x) for x in copy])
        except Exception:  # noqa: BLE001 - reported by the observation below
            pass
    bs = w.pool.block_size
    idx = pos // bs
    if idx < len(seq.block_table) and isinstance(seq.block_table[idx], int):
        blk = seq.block_table[idx]
        w.wrote = [seq.seq_id, pos, blk, w.pool.ref_cnt(blk) if 0 <= blk < w.pool.num_blocks else -1]
    rec.state(w.state())
    rec.observe("returned", copy, hint=_copy_hint)
    rec.observe(f"{seq.seq_id}'s num_tokens", seq.num_tokens, hint="count the new token: seq.num_tokens += 1")
    rec.observe(f"{seq.seq_id}'s block table", list(seq.block_table), hint=_table_order_hint)
    rec.observe("ref_cnt of every block", w.pool.ref_cnts())
    rec.observe("free blocks", w.pool.num_free_blocks)
    observe_in_place(rec, contracts.APPEND_TOKEN_MUTATES, "seq.block_table", table, seq.block_table)


def _copy_hint(expected: Any, got: Any, state: Any) -> str | None:
    if expected is None and got is not None:
        if isinstance(state, dict) and state.get("num_tokens"):
            return (
                "no copy is needed here: the token starts a new block, or the last block is no longer shared "
                "(ref_cnt == 1) - the last owner writes in place"
            )
        return "return None when nothing was copied"
    if expected is not None and got is None:
        return (
            "the token goes into a block shared with other sequences (ref_cnt > 1): copy it first and return (src, dst)"
        )
    return "return the copy as (src_block_id, dst_block_id)"


# append_token tests as (title, pool blocks, block size, script), scripts as :func:`_play` reads them.
# fmt: off
_APPEND_TESTS: list[tuple[str, int, int, str]] = [
    ("a private, partly filled block: write in place",
     8, 4, "A=10 A+ A+"),
    ("a token that starts a new block allocates one",
     8, 4, "A=8 A+ B=3 B+ B+"),
    ("a shared last block is copied before the write; its last owner then writes in place",
     8, 4, "A=10 A>B A+ B+ A+"),
    ("full shared blocks stay shared: a new block, no copy",
     12, 4, "A=8 A>B A>C A+ B+ C+ A+"),
    ("parallel sampling: 4 samples of a 10-token prompt decode 9 tokens each",
     24, 4, "A=10 A>B A>C A>D" + " A+ B+ C+ D+" * 9),
    ("beam search: beams forked in the middle of decoding",
     24, 3, "A=5 A+ A+ A>B" + " B+ A+" * 3 + " B>C C+ B+ C+ A+ C+"),
]
# fmt: on
for _args in _APPEND_TESTS:
    _script_test(APPEND, *_args)


# --- differential tests (random cases against the reference, pagedlab.grading.differential) ------------
# What the hand-written scripts never build: sequences that finish and give their blocks back, so the pool
# hands out tables out of block-id order ([2, 1, 0], [5, 0, 3] ...) and forks share them; block sizes 1-8;
# many sequences alive at once, each call's whole state compared: the sequence's table (in place), length
# and the copy returned, every other sequence's table and length, every ref_cnt, the free queue's order.
# The pool always has room (the engine never calls these on a pool that is short: it preempts first).
def _cow_case(last: str) -> Any:
    """A script of moves ending with ``last`` ("fork" or "append"), on a pool just big enough for it."""

    @st.composite
    def case(draw: Any) -> dict[str, Any]:
        bs = draw(st.sampled_from([4, 1, 2, 3, 8]))
        moves: list[list[int | str]] = [["new", draw(st.integers(1, 3 * bs))]]
        if draw(st.booleans()):  # a request finishes early: the pool's front now holds its blocks, last freed first
            moves += [["new", draw(st.integers(1, 3 * bs))], ["finish", 0]]
        for _ in range(draw(st.integers(0, 12))):
            kind = draw(st.sampled_from(["new", "fork", "append", "append", "finish"]))
            if kind == "new":
                moves.append(["new", draw(st.integers(1, 3 * bs))])
            elif kind == "append":
                moves.append(["append", draw(st.integers(0, 7)), draw(st.integers(1, bs + 1))])
            else:
                moves.append([kind, draw(st.integers(0, 7))])
        parent = draw(st.integers(0, 7))
        forks = 1 if last == "fork" else draw(st.integers(0, 2))
        moves += [["fork", parent]] * forks  # maybe samples forked from one sequence, then the newest one appends
        if last == "append":
            moves.append(["append", -1 if forks else draw(st.integers(0, 7)), 1])
        # blocks the moves could ever hold at once: a prefill's blocks, one per token appended (a new block or a copy)
        demand = sum(-(-int(m[1]) // bs) if m[0] == "new" else int(m[2]) if m[0] == "append" else 0 for m in moves)
        return {"num_blocks": demand + draw(st.integers(0, 3)), "block_size": bs, "moves": moves}

    return case()


def _seq_name(k: int) -> str:
    return chr(ord("A") + k % 26) + (str(k // 26) if k >= 26 else "")


def _cow_script(case: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """The case's moves with names: ``("new", "A", tokens)``, ``("fork", parent, child)``,
    ``("append", seq, tokens)``, ``("finish", seq, None)``; a move on a live sequence picks it by index
    (modulo the live ones, in creation order), and is dropped while none is alive."""
    live: list[str] = []
    made = 0
    out: list[tuple[str, str, Any]] = []
    for move in case["moves"]:
        kind = move[0]
        if kind == "new":
            name, made = _seq_name(made), made + 1
            live.append(name)
            out.append(("new", name, move[1]))
            continue
        if not live:
            continue
        sid = live[int(move[1]) % len(live)]
        if kind == "fork":
            child, made = _seq_name(made), made + 1
            live.append(child)
            out.append(("fork", sid, child))
        elif kind == "append":
            out.append(("append", sid, move[2]))
        else:
            live.remove(sid)
            out.append(("finish", sid, None))
    return out


def _describe_cow(case: dict[str, Any]) -> str:
    words = {
        "new": lambda s, a: f"{s}={a}",
        "fork": lambda s, a: f"{s}>{a}",
        "append": lambda s, a: f"{s}+{a}",
        "finish": lambda s, a: f"{s} finishes",
    }
    script = ", ".join(words[k](s, a) for k, s, a in _cow_script(case))
    n, bs = case["num_blocks"], case["block_size"]
    return (
        f"a pool of {n} block{'s' * (n != 1)} of {bs} token{'s' * (bs != 1)}; {script} "
        "(A=10: prefill A with 10 tokens, A>B: fork A into B, A+2: 2 more tokens for A)"
    )


def _own_append(w: World, seq: Seq) -> None:
    """The test's own one-token append (where the learner's append_token is not under test)."""
    pool = w.pool
    if seq.num_tokens % pool.block_size == 0:
        seq.block_table.append(pool.allocate())
    elif pool.ref_cnt(seq.block_table[-1]) > 1:
        new = pool.allocate()
        pool.free(seq.block_table[-1])
        seq.block_table[-1] = new
    seq.num_tokens += 1


def _observe_rest(w: World, rec: Any, mine: set[str]) -> None:
    """Every sequence the call was not about, and the free queue (which block the pool hands out next)."""
    rec.observe(
        "the other sequences' tables and lengths",
        {sid: [list(s.block_table), s.num_tokens] for sid, s in w.seqs.items() if sid not in mine},
        hint="the call changes only the sequence it is given (and the pool's counts)",
    )
    rec.observe("free queue, next allocated first", w.pool.free_queue())


def _cow_play(case: dict[str, Any], rec: Any, fork: Any = None, append_token: Any = None) -> None:
    """Play a case: the learner's function where it is under test, the test's own moves elsewhere."""
    w = World(case["num_blocks"], case["block_size"])
    for kind, sid, arg in _cow_script(case):
        if kind == "new":
            seq = w.prefill(sid, arg)
            rec.step(f"the test prefills {sid} with {arg} tokens (the pool hands out blocks {seq.block_table})")
            rec.state(w.state())
        elif kind == "fork" and fork is not None:
            parent = w.seqs[sid]
            _fork_step(fork, w, parent, arg, rec)  # the parent's table, the same list: FORK_MUTATES
            _observe_rest(w, rec, {sid, arg})
        elif kind == "fork":
            rec.step(f"the test forks {sid} into {arg} (both hold blocks {list(w.seqs[sid].block_table)})")
            w.share(w.seqs[sid], arg)
            rec.state(w.state())
        elif kind == "append":
            for _ in range(arg):
                seq = w.seqs[sid]
                if append_token is not None:
                    _append_step(append_token, w, seq, rec)
                    _observe_rest(w, rec, {sid})
                else:
                    rec.step(f"the test appends token {seq.num_tokens} to {sid} (table {list(seq.block_table)})")
                    _own_append(w, seq)
                    rec.state(w.state())
        else:
            table = list(w.seqs[sid].block_table)
            rec.step(f"{sid} finishes: the test frees its blocks {table}")
            for b in dict.fromkeys(table):
                w.pool.free(b)
            del w.seqs[sid]
            rec.state(w.state())


_COW_DRAWS = (
    "scripts of a prefill, maybe a second request that finishes early, 0-12 random moves (prefill 1-3 blocks' worth, "
    "fork, append 1 to block_size+1 tokens, finish: its blocks go back to the pool's front, so later tables are out "
    "of id order), block sizes 1-8, a pool just big enough"
)


@differential(FORK, _cow_case("fork"), examples=60, describe=_describe_cow, draws=_COW_DRAWS + ", ending with a fork")
def _(fork: Any, case: dict[str, Any], rec: Any) -> None:
    _cow_play(case, rec, fork=fork)


@differential(
    APPEND, _cow_case("append"), examples=60, describe=_describe_cow, draws=_COW_DRAWS + ", ending with an append"
)
def _(append_token: Any, case: dict[str, Any], rec: Any) -> None:
    _cow_play(case, rec, append_token=append_token)
