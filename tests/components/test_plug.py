"""Plugging a notebook's parts in: only objects that passed check() in this process, with a note for
every part that is not used, and the lab 04 signature bridged onto the scheduling slot."""

from __future__ import annotations

import re
from collections import deque
from typing import Any

import pytest

from pagedlab.grading import registry
from pagedlab.grading.checking import check, passed_check
from pagedlab.grading.plug import BRIDGES, learner_components, serve_with
from tests.components.helpers import slot_mapping_past_last_block, solution


def test_check_records_the_object_that_passed():
    good, other = solution("02.slot_mapping"), solution("02.slot_mapping")
    assert passed_check("02.slot_mapping", good) is None
    assert check(good, "02.slot_mapping", show=False).passed
    assert passed_check("02.slot_mapping", good) is True
    assert passed_check("02.slot_mapping", other) is None  # a re-run cell: a new object
    assert not check(slot_mapping_past_last_block, "02.slot_mapping", show=False).passed
    assert passed_check("02.slot_mapping", slot_mapping_past_last_block) is False
    assert passed_check("02.slot_mapping", good) is None  # the last check was of another object


def test_only_passing_parts_are_plugged_and_the_rest_is_explained():
    sm, pv, fq = solution("02.slot_mapping"), solution("06.pick_victim"), solution("02.free_queue")
    assert check(sm, show=False).passed

    def wrong_victim(running, policy):
        return running[0]

    wrong_victim.__name__ = "pick_victim"
    assert not check(wrong_victim, "06.pick_victim", show=False).passed
    ref = registry.get("08.load_kv_tile").get_reference()
    ns = {
        "slot_mapping": sm,
        "pick_victim": wrong_victim,
        "FreeKVCacheBlockQueue": fq,
        "load_kv_tile": ref,
        "schedule_step": None,
    }
    comps, notes = learner_components(ns)
    assert comps.learner_slots == ["slot_mapping"] and comps.parts["slot_mapping"].impl is sm
    assert sorted(notes) == sorted(
        [
            "free_queue: kit's part, because your FreeKVCacheBlockQueue has not passed check() in this kernel: "
            "run check(FreeKVCacheBlockQueue) first",
            "pick_victim: kit's part, because your pick_victim does not pass check(pick_victim) yet",
            "schedule_step: kit's part, because schedule_step is not defined in this notebook (yet)",
            "kv_tile_load: kit's part, because load_kv_tile is the kit's reference (use_reference), not yours",
        ]
    )
    assert re.search(r"^slot_mapping +yours ", comps.table(), re.M) and re.search(
        r"^free_queue +kit ", comps.table(), re.M
    )
    del pv


def test_lab04_step_is_bridged_without_the_budget():
    calls = []

    def schedule_step(running, waiting, kv_cache_manager, max_num_seqs):
        calls.append((running, waiting, kv_cache_manager, max_num_seqs))
        return {}

    step = BRIDGES["04.schedule_step"][1](schedule_step)
    args = ([], deque(), object(), 3)
    assert step(*args, 512, 0) == {} and calls == [args]
    assert step.__name__ == "schedule_step"


@pytest.mark.model
def test_serve_with_prints_one_line(capsys):
    sm = solution("02.slot_mapping")
    assert serve_with(sm) is None
    assert "Not served with your slot_mapping: your slot_mapping has not passed check()" in capsys.readouterr().out
    check(sm, show=False)
    res = serve_with(sm, max_tokens=4)
    assert res is not None and res.same and len(res.mine) == 3 and all(len(t) == 4 for t in res.mine)
    assert "✅ SmolLM2 served 3 prompts with your slot_mapping as the engine's slot_mapping" in capsys.readouterr().out


@pytest.mark.model
def test_my_engine_builds_an_llm_from_the_namespace(capsys):
    from pagedlab.grading.plug import my_engine

    sm, pv = solution("02.slot_mapping"), solution("06.pick_victim")
    assert check(sm, show=False).passed
    llm = my_engine({"slot_mapping": sm, "pick_victim": pv}, num_gpu_blocks=64)
    out = capsys.readouterr().out
    assert re.search(r"^slot_mapping +yours ", out, re.M) and re.search(r"^pick_victim +kit ", out, re.M)
    assert "note - pick_victim: kit's part, because your pick_victim has not passed check()" in out
    eng = llm.llm_engine
    assert eng.components.learner_slots == ["slot_mapping"] and eng.model_runner.slot_mapping_fn is not None
    assert eng.cache_config.num_gpu_blocks == 64 and eng.components.time_limit_s == 5.0


def test_lab07_get_computed_blocks_plugs_into_the_prefix_lookup_slot():
    """The lookup the learner writes in lab 07 fills the engine's prefix_lookup slot: on a real
    pool it returns the kit's blocks, and a token count that disagrees with the blocks raises."""
    from pagedlab.core.block_pool import BlockPool
    from pagedlab.engine.components import Components

    slot, bridge = BRIDGES["07.get_computed_blocks"]
    assert slot == "prefix_lookup"
    mine = bridge(solution("07.get_computed_blocks"))
    kit = Components.kit().parts["prefix_lookup"].impl
    pool = BlockPool(8, enable_caching=True)
    blocks = pool.get_new_blocks(3)
    hashes = [f"h{i}" for i in range(4)]
    for b, h in zip(blocks, hashes):
        b.block_hash = h
        pool.cached_block_hash_to_block[h] = {b.block_id: b}
    for num_tokens in (5, 12, 13, 16, 17):  # block_size 4: the last token never hits
        want = kit(hashes, pool.get_cached_block, num_tokens, 4)
        assert mine(hashes, pool.get_cached_block, num_tokens, 4) == want

    def off_by_a_block(request, block_pool, block_size):
        blocks, n = solution("07.get_computed_blocks")(request, block_pool, block_size)
        return blocks, n + block_size

    with pytest.raises(ValueError, match="num_computed_tokens"):
        bridge(off_by_a_block)(hashes, pool.get_cached_block, 16, 4)


def test_lab07_and_lab03_functions_fill_their_slots_together_the_references_the_rest():
    """Several exercises fill one slot: each passing function replaces its reference in RadixOps /
    ForkCowFns; a failing one leaves the reference and is explained."""
    from tests.components import wrong_parts_07_03 as wrong

    match, insert, append = solution("07.match_prefix"), solution("07.insert"), solution("03.append_token")
    for fn in (match, insert, append):
        assert check(fn, show=False).passed
    assert not check(wrong.evict_ignoring_locks, "07.evict", show=False).passed
    ns = {"match_prefix": match, "insert": insert, "evict": wrong.evict_ignoring_locks, "append_token": append}
    comps, notes = learner_components(ns)
    assert comps.learner_slots == ["fork_cow", "radix"]
    radix, cow = comps.parts["radix"], comps.parts["fork_cow"]
    assert (
        radix.impl.match_prefix is match
        and radix.impl.insert is insert
        and radix.impl.yours == {"match_prefix", "insert"}
    )
    assert radix.impl.evict is registry.get("07.evict").get_reference()
    assert radix.note == "your match_prefix, insert; reference evict"
    assert cow.impl.append_token is append and cow.impl.fork is registry.get("03.fork").get_reference()
    assert cow.note == "your append_token; reference fork"
    assert notes == ["radix: the reference evict, because your evict does not pass check(evict) yet"]


@pytest.mark.model
@pytest.mark.parametrize("eid", ["07.evict", "03.fork"])
def test_serve_with_runs_a_radix_or_fork_function_inside_smollm2(eid, capsys):
    """serve_with picks settings under which the function really runs: a 4-block pool that must evict
    from the radix tree, n=2 completions that fork; the tokens equal the kit engine's."""
    calls = []
    fn = solution(eid)

    def counted(*args):
        calls.append(eid)
        return fn(*args)

    counted.__name__ = fn.__name__
    assert check(counted, eid, show=False).passed
    calls.clear()
    res = serve_with(counted, eid)
    assert res is not None and res.same and not res.error and calls
    slot = BRIDGES[eid][0]
    assert f"✅ SmolLM2 served 3 prompts with your {fn.__name__} as the engine's {slot}" in capsys.readouterr().out
    if eid == "03.fork":
        half = [len(m) // 2 for m in res.mine]  # one fork per prompt: two identical greedy completions
        assert len(calls) == 3 and all(m[:h] == m[h:] and h > 0 for m, h in zip(res.mine, half))


def test_bridges_name_real_exercises_and_fill_every_slot() -> None:
    """``BRIDGES`` is the one exercise -> slot table: every exercise it names exists, every slot it
    fills is a real slot, and every slot has an exercise that fills it."""
    from pagedlab.engine.components import SLOTS
    from pagedlab.grading import registry
    from pagedlab.grading.plug import BRIDGES

    registry.load_all()
    known = {ex.id for ex in registry.all_exercises()}
    for eid, (slot_name, _) in BRIDGES.items():
        assert eid in known and slot_name in SLOTS, eid
    filled = {slot for slot, _ in BRIDGES.values()} | {"preempt_retry"}  # lab 06's step covers it
    assert filled == set(SLOTS), set(SLOTS) - filled


def test_the_preempting_step_covers_victim_choice_and_the_retry_loop() -> None:
    """Lab 06's whole step fills schedule_step and does the preempt_retry / pick_victim work itself:
    the table and learner_slots say so; the kit's parts there stay kit-owned in ``parts``."""
    from pagedlab.engine.components import Components
    from pagedlab.grading import registry
    from pagedlab.parts.schedule import PreemptingStep

    step = PreemptingStep(registry.snippet_object("06.schedule_with_preemption"))
    comps = Components.kit().plug("schedule_step", step, note="yours")
    assert comps.learner_slots == ["schedule_step", "pick_victim", "preempt_retry"]
    assert not comps.is_yours("preempt_retry") and comps.owner("preempt_retry") == "yours"
    row = next(r for r in comps.table().splitlines() if r.startswith("preempt_retry"))
    assert "yours" in row and "schedule_with_preemption" in row
    assert Components.kit().owner("preempt_retry") == "kit"


def _served_in_labs() -> list[tuple[str, str, dict[str, Any]]]:
    """(notebook, exercise name, keyword arguments) of every ``serve_with(...)`` call in the solution notebooks."""
    import ast
    import json
    from pathlib import Path

    calls = []
    for nb in sorted((Path(__file__).resolve().parents[2] / "solutions").glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            src = "".join(cell["source"])
            if cell["cell_type"] != "code" or "serve_with(" not in src:
                continue
            tree = ast.parse(src)
            # a keyword given by name (lab 08: ``prompts=SERVE_PROMPTS``) takes the value the cell assigns
            # it on this machine: no GPU here
            named = {
                t.id: eval(compile(ast.Expression(a.value), nb.name, "eval"), {"__builtins__": {}, "HAS_GPU": False})
                for a in ast.walk(tree)
                if isinstance(a, ast.Assign)
                for t in a.targets
                if isinstance(t, ast.Name) and t.id.isupper()
            }
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "serve_with":
                    kw = {
                        k.arg: named[k.value.id] if isinstance(k.value, ast.Name) else ast.literal_eval(k.value)
                        for k in node.keywords
                        if k.arg
                    }
                    calls.append((nb.name, node.args[0].id, kw))  # type: ignore[attr-defined]
    return calls


@pytest.mark.parametrize("notebook, name, kw", _served_in_labs(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_serve_with_cell_of_the_labs_serves_identically_on_the_solution(
    notebook: str, name: str, kw: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """What each lab's serve_with cell prints on the solution: the tokens equal the kit's engine's
    (nbval runs the cells but does not read the ✅ / ❌ line)."""
    [ex] = registry.find_by_name(name)
    obj = registry.snippet_object(ex.id)
    check(obj)
    capsys.readouterr()
    res = serve_with(obj, **kw)
    out = capsys.readouterr().out
    assert res is not None and not res.error and res.same, out
    assert out.startswith("✅"), out


def test_the_labs_serve_every_bridged_exercise() -> None:
    """Right after each exercise that is a part of the engine, its lab serves real prompts with it."""
    served = {registry.find_by_name(name)[0].id for _, name, _ in _served_in_labs()}
    assert served == set(BRIDGES), set(BRIDGES) ^ served


def test_a_part_changed_after_check_is_not_plugged():
    """check() vouches for the code it ran: a method patched onto the class afterwards, or a function's
    code replaced, makes the part "changed" (not plugged) until check() runs again."""
    fq = solution("02.free_queue")
    assert check(fq, "02.free_queue", show=False).passed
    assert passed_check("02.free_queue", fq) is True
    original = fq.popleft
    fq.popleft = lambda self: None
    try:
        assert passed_check("02.free_queue", fq) is None
        comps, notes = learner_components({"FreeKVCacheBlockQueue": fq})
        assert "free_queue" not in comps.learner_slots
        assert notes == [
            "free_queue: kit's part, because your FreeKVCacheBlockQueue has changed since "
            "check(FreeKVCacheBlockQueue) ran: run it again"
        ]
    finally:
        fq.popleft = original
    assert passed_check("02.free_queue", fq) is True  # the checked code is back
    sm = solution("02.slot_mapping")
    assert check(sm, "02.slot_mapping", show=False).passed
    code = sm.__code__
    sm.__code__ = slot_mapping_past_last_block.__code__
    try:
        assert passed_check("02.slot_mapping", sm) is None
        assert learner_components({"slot_mapping": sm})[0].learner_slots == []
    finally:
        sm.__code__ = code
    assert learner_components({"slot_mapping": sm})[0].learner_slots == ["slot_mapping"]


def test_a_slot_filled_by_another_exercise_of_yours_says_so():
    """Lab 05's step passed and fills schedule_step; lab 06's failed: the note names yours, not a reference."""
    s5 = solution("05.schedule_with_budget")
    assert check(s5, "05.schedule_with_budget", show=False).passed

    def schedule_with_preemption(*args, **kwargs):
        return None

    assert not check(schedule_with_preemption, "06.schedule_with_preemption", show=False).passed
    comps, notes = learner_components(
        {"schedule_with_budget": s5, "schedule_with_preemption": schedule_with_preemption}
    )
    assert comps.learner_slots == ["schedule_step"] and comps.parts["schedule_step"].impl is s5
    assert notes == [
        "schedule_step: your schedule_with_budget, not your schedule_with_preemption, because your "
        "schedule_with_preemption does not pass check(schedule_with_preemption) yet"
    ]
