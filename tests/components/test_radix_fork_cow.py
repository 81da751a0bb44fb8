"""The ``radix`` and ``fork_cow`` slots: lab 07's tree functions and lab 03's fork / append run inside
the real engine (radix prefix cache; n > 1 forks and copy-on-write appends), serve the kit's tokens,
and every plausible wrong version is caught by its check() and, plugged in anyway, by the guard."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from pagedlab import SamplingParams
from pagedlab.core.block_pool import BlockPool
from pagedlab.engine.components import Components
from pagedlab.errors import ComponentError
from pagedlab.grading.checking import check
from pagedlab.grading.plug import render_component_state, solution_components
from pagedlab.parts.guard import Guard
from pagedlab.parts.radix import GuardedRadixTree
from tests.components import wrong_parts_07_03 as wrong
from tests.components.helpers import PROMPTS, run
from tests.robust.helpers import assert_idle, check_engine, tiny_engine

#: A second wave after PROMPTS: partial hits on the tree PROMPTS left, one new prompt.
MORE = [[5, 6, 7, 8, 9, 10, 11, 12, 60, 61], [30, 31, 32, 33, 34, 35, 70], [80, 81, 82, 83, 84, 85, 86, 87, 88]]
RADIX = {"enable_prefix_caching": True, "prefix_cache": "radix", "num_gpu_blocks": 12}
_SOLUTIONS = solution_components()


def _radix(**fns: Any) -> Components:
    return Components.kit().plug("radix", replace(_SOLUTIONS.parts["radix"].impl, **fns, yours=frozenset(fns)))


def _fork_cow(**fns: Any) -> Components:
    return Components.kit().plug("fork_cow", replace(_SOLUTIONS.parts["fork_cow"].impl, **fns, yours=frozenset(fns)))


def _radix_run(comps: Components) -> tuple[Any, list[list[int]]]:
    """Two waves on a 12-block pool: the second hits, splits and evicts what the first left."""
    eng = tiny_engine(components=comps, **RADIX)
    return eng, run(eng, PROMPTS) + run(eng, MORE)


def _fork_run(comps: Components) -> tuple[Any, list[list[int]]]:
    """One 9-token prompt, n=2: a fork after the prefill, then appends into the shared last block."""
    eng = tiny_engine(components=comps)
    params = SamplingParams(n=2, temperature=0, max_tokens=6, ignore_eos=True)
    eng.add_request("r0", {"prompt_token_ids": PROMPTS[0]}, params)
    outs = []
    while eng.has_unfinished_requests():
        outs += [o for o in eng.step() if o.finished]
        check_engine(eng)
    return eng, [list(c.token_ids) for o in outs for c in o.outputs]


def _counting(calls: dict[str, int], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def counted(*args: Any) -> Any:
        calls[name] = calls.get(name, 0) + 1
        return fn(*args)

    return counted


def test_solution_radix_functions_run_the_engines_tree_and_serve_the_kits_tokens():
    calls: dict[str, int] = {}
    ops = _SOLUTIONS.parts["radix"].impl
    fns = {n: _counting(calls, n, getattr(ops, n)) for n in ("match_prefix", "insert", "evict")}
    eng, mine = _radix_run(_radix(**fns))
    assert mine == _radix_run(Components.kit())[1]
    assert set(calls) == {"match_prefix", "insert", "evict"} and calls["insert"] >= len(
        PROMPTS + MORE
    )  # every free inserts (a preempted one too)
    assert eng.components.learner_slots == ["radix"]
    kv = eng.kv_cache_manager
    assert isinstance(kv.radix_cache, GuardedRadixTree) and kv.prefix.owned_block_ids()
    check_engine(eng)


def test_solution_fork_and_append_run_the_engines_fork_and_serve_the_kits_tokens():
    calls: dict[str, int] = {}
    fns = _SOLUTIONS.parts["fork_cow"].impl
    eng, mine = _fork_run(_fork_cow(**{n: _counting(calls, n, getattr(fns, n)) for n in ("fork", "append_token")}))
    assert mine == _fork_run(Components.kit())[1] and len(mine) == 2
    assert calls["fork"] == 1 and calls["append_token"] == 2 * 5  # 5 decode appends per completion
    assert_idle(eng)


#: (exercise id, slot, wrong function, engine run, what the guard says)
CASES = [
    ("03.fork", "fork_cow", wrong.fork_shares_the_list, _fork_run, "shares the parent's block-table list"),
    ("03.fork", "fork_cow", wrong.fork_without_incref, _fork_run, "ref counts do not add up"),
    ("03.append_token", "fork_cow", wrong.append_without_free, _fork_run, "ref counts do not add up"),
    ("03.append_token", "fork_cow", wrong.append_copies_first_block, _fork_run, "lost or changed blocks"),
    ("07.match_prefix", "radix", wrong.match_prefix_without_split, _radix_run, "not a prefix of the key"),
    ("07.evict", "radix", wrong.evict_ignoring_locks, _radix_run, "which is locked"),
    ("07.evict", "radix", wrong.evict_without_unlinking, _radix_run, "not the values of the 0 removed nodes"),
]


@pytest.mark.parametrize("eid,slot,fn,engine_run,guard_says", CASES, ids=[c[2].__name__ for c in CASES])
def test_wrong_fork_cow_or_radix_is_caught_by_check_and_by_the_guard(eid, slot, fn, engine_run, guard_says):
    assert check(fn, eid, show=False).passed is False
    name = eid.split(".")[1]
    comps = _fork_cow(**{name: fn}) if slot == "fork_cow" else _radix(**{name: fn})
    with pytest.raises(ComponentError) as info:
        engine_run(comps)
    err = info.value
    assert err.component == slot and err.step >= 0 and guard_says in err.invariant, str(err)
    assert f"your {slot} broke the engine at engine step {err.step}" in str(err)


def test_a_broken_radix_part_hands_over_to_the_kits_tree_and_the_engine_serves_on():
    comps = replace(_radix(evict=wrong.evict_without_unlinking), render=render_component_state)
    eng = tiny_engine(components=comps, **RADIX)
    with pytest.raises(ComponentError, match="your radix broke") as info:
        run(eng, PROMPTS) + run(eng, MORE)
    assert "<svg" in info.value.picture and "radix tree" in info.value.picture  # the tree where it broke
    assert "tree:\n" in str(info.value) and "lock=0" in str(info.value)
    assert_idle(eng)
    assert not eng.components.is_yours("radix") and "yours broke" in eng.components.parts["radix"].note
    assert type(eng.kv_cache_manager.radix_cache).__name__ == "RadixCache"
    assert run(eng, MORE) == run(tiny_engine(**RADIX), MORE)


def _tree(evict: Callable[..., Any]) -> tuple[GuardedRadixTree, list[list[int]]]:
    """A guarded tree of block size 2 holding [1 2 3 4 5 6] and [1 2 3 4 7 8] (a shared 2-block node)."""
    guard = Guard("radix", lambda: 7, time_limit_s=0)
    tree = GuardedRadixTree(replace(_SOLUTIONS.parts["radix"].impl, evict=evict), 2, guard)
    tree.insert([1, 2, 3, 4, 5, 6], [0, 1, 2, 3, 4, 5])
    tree.insert([1, 2, 3, 4, 7, 8], [0, 1, 2, 3, 8, 9])
    freed: list[list[int]] = []
    return tree, freed


def test_guarded_radix_tree_evicts_the_whole_tree_with_the_solution():
    tree, freed = _tree(_SOLUTIONS.parts["radix"].impl.evict)
    assert tree.evictable_size() == 8
    assert tree.evict(8, freed.append) == 8
    assert sorted(s for f in freed for s in f) == [0, 1, 2, 3, 4, 5, 8, 9] and tree.evictable_size() == 0
    assert tree.root.children == {}


def test_guarded_radix_tree_catches_an_eviction_that_stops_while_leaves_remain():
    """evict_leaves_only_once never evicts the shared node once its children are gone."""
    assert check(wrong.evict_leaves_only_once, "07.evict", show=False).passed is False
    tree, freed = _tree(wrong.evict_leaves_only_once)
    with pytest.raises(ComponentError) as info:
        tree.evict(8, freed.append)
    assert info.value.component == "radix" and info.value.step == 7
    assert "freed 2 of 4 elements while unlocked leaves remain" in info.value.invariant
    assert freed == []  # nothing is handed to the pool from a call that broke the tree's contract


def test_guarded_radix_tree_catches_broken_links_and_values_per_token():
    tree, _ = _tree(_SOLUTIONS.parts["radix"].impl.evict)
    (node,) = tree.root.children.values()
    node.value.append(99)  # two key elements, three values
    with pytest.raises(ComponentError, match="one value per token"):
        tree.match_prefix([1, 2, 3, 4])
    node.value.pop()
    next(iter(node.children.values())).parent = tree.root
    with pytest.raises(ComponentError, match="is broken"):
        tree.match_prefix([1, 2, 3, 4])


def test_fork_cow_pool_view_is_the_engines_pool():
    from pagedlab.grading.kit import RefCountedPool

    pool = BlockPool(4, enable_caching=False)
    view = RefCountedPool.over(pool, 16)
    bid = view.allocate()
    view.incref(bid)
    assert pool.blocks[bid].ref_cnt == 2 and view.ref_cnt(bid) == 2 and view.num_free_blocks == 3
    view.free(bid)
    view.free(bid)
    assert (
        pool.get_num_free_blocks() == 4
        and view.calls == [f"allocate() -> {bid}", f"incref({bid})"] + [f"free({bid})"] * 2
    )


def _raises(*args: Any) -> Any:
    raise KeyError("oops")


def _returns_none(*args: Any) -> Any:
    return None


def _hangs(*args: Any) -> Any:
    while True:
        pass


BAD = [
    ("radix", "match_prefix", _returns_none, "match_prefix returned a NoneType, not a tuple"),
    ("radix", "insert", _raises, "it raised KeyError: 'oops'"),
    ("radix", "evict", _returns_none, "evict returned a NoneType, not a list"),
    ("fork_cow", "fork", _raises, "it raised KeyError: 'oops'"),
    ("fork_cow", "fork", _returns_none, "fork returned a NoneType without a block_table"),
    ("fork_cow", "append_token", _hangs, "did not return within 0.3 s"),
]


@pytest.mark.parametrize("slot,name,fn,says", BAD, ids=[f"{b[1]}-{b[2].__name__}" for b in BAD])
def test_a_radix_or_fork_cow_function_that_raises_returns_junk_or_hangs_is_named(slot, name, fn, says):
    comps = replace(_fork_cow(**{name: fn}) if slot == "fork_cow" else _radix(**{name: fn}), time_limit_s=0.3)
    with pytest.raises(ComponentError) as info:
        (_fork_run if slot == "fork_cow" else _radix_run)(comps)
    assert info.value.component == slot and says in info.value.invariant, str(info.value)
