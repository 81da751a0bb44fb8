"""Wrong versions that break an exercise's stated contract (issue 23: an input it only reads, state it
changes in place, the type it returns, max_num_seqs, the batch order, the tile's dtype), plugged into the
engine: the guard of their slot names the mistake, and the kit's part takes over."""

from __future__ import annotations

from typing import Any

import pytest

from pagedlab.errors import ComponentError
from pagedlab.grading import registry
from pagedlab.grading.plug import components_for
from tests.components.helpers import kit_tokens, run
from tests.grading.helpers import wrong_versions
from tests.robust.helpers import tiny_engine

_VERSIONS = {(v.exercise, v.name): v for v in wrong_versions()}
_TIGHT = {"num_gpu_blocks": 8}

#: (exercise, wrong version) -> (the slot whose guard trips, words of its message, engine settings)
PLUGGED: dict[tuple[str, str], tuple[str, str, dict[str, Any]]] = {
    ("02.slot_mapping", "consumes_the_positions"): ("slot_mapping", "the mutation rule of slot_mapping", {}),
    ("03.append_token", "rebinds_the_table_for_a_new_block"): ("fork_cow", "bound a new object", {"n": 2}),
    ("04.schedule_step", "newest_running_first"): ("schedule_step", "walk the running requests in order", {}),
    ("06.schedule_with_preemption", "admits_past_max_num_seqs"): (
        "schedule_step",
        "requests run > max_num_seqs=2",
        {"max_num_seqs": 2},
    ),
    ("06.schedule_with_preemption", "off_by_one_max_num_seqs"): (
        "schedule_step",
        "requests run > max_num_seqs=2",
        {"max_num_seqs": 2},
    ),
    ("06.schedule_with_preemption", "returns_a_list_pair"): ("schedule_step", "returned a list, not a tuple", {}),
    ("06.schedule_with_preemption", "preempted_as_a_tuple"): ("schedule_step", "second item is a tuple", {}),
    ("06.schedule_with_preemption", "preempted_as_a_set"): ("schedule_step", "second item is a set", {}),
}


def _serve(comps: Any, kw: dict[str, Any]) -> list[list[int]]:
    n = kw.get("n", 1)
    eng = tiny_engine(components=comps, **{k: v for k, v in kw.items() if k != "n"})
    if n == 1:
        return run(eng)
    from pagedlab.sampling_params import SamplingParams

    eng.add_request("fork", {"prompt_token_ids": [5, 6, 7, 8, 9, 10]}, SamplingParams(n=n, max_tokens=6, seed=1))
    while eng.has_unfinished_requests():
        eng.step()
    return []


@pytest.mark.parametrize("key", list(PLUGGED), ids=[f"{e}:{n}" for e, n in PLUGGED])
def test_a_contract_breach_is_named_by_its_slots_guard(key: tuple[str, str]) -> None:
    slot, words, kw = PLUGGED[key]
    v = _VERSIONS[key]
    comps = components_for({v.exercise: registry.snippet_object(v.exercise, v.source)})
    with pytest.raises(ComponentError) as info:
        _serve(comps, kw)
    assert info.value.component == slot and words in str(info.value), info.value


def test_the_solutions_pass_the_same_guards() -> None:
    eids = ["02.slot_mapping", "04.schedule_step"]
    comps = components_for({e: registry.snippet_object(e) for e in eids})
    assert run(tiny_engine(components=comps, max_num_seqs=2)) == kit_tokens(max_num_seqs=2)


@pytest.mark.parametrize("name", ["upcasts_the_tile", "zeros_in_float32", None])
def test_the_tile_load_guard_holds_an_fp16_tile_to_fp16(name: str | None) -> None:
    """The engine serves in fp32, so the dtype guard is shown on the guarded call itself, on an fp16 cache."""
    import torch

    from pagedlab.course.exercises.lab08 import make_cache
    from pagedlab.engine.components import Components
    from pagedlab.parts.kernel import guarded_kv_tile_load

    eid = "08.load_kv_tile"
    fn = registry.snippet_object(eid, _VERSIONS[(eid, name)].source if name else None)
    load = guarded_kv_tile_load(fn, Components.kit().guard("kv_tile_load", lambda: 0))
    cache, table = make_cache(4, 4).half(), torch.tensor([2, 0], dtype=torch.int32)
    if name is None:
        rows, _ = load(cache, table, 4, 4, 6)
        assert rows.dtype == torch.float16
        return
    with pytest.raises(ComponentError, match=r"rows from a torch.float16 cache \(the tile keeps the cache's dtype"):
        load(cache, table, 4, 4, 6)
