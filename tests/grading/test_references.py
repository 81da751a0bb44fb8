"""use_reference(): a stuck learner continues with the kit's implementation."""

from __future__ import annotations

import pytest

from pagedlab.grading import check, components, registry, use_reference


def test_installs_into_the_given_namespace_and_returns_it(capsys):
    ns = {}
    q = use_reference("free_queue", ns)
    from pagedlab.core.block_pool import FreeKVCacheBlockQueue

    assert q is FreeKVCacheBlockQueue and ns["FreeKVCacheBlockQueue"] is q
    assert "Using the kit's reference FreeKVCacheBlockQueue" in capsys.readouterr().out
    both = use_reference("cow", ns, quiet=True)
    assert set(both) == {"fork", "append_token"} and ns["fork"] is both["fork"]
    assert check(ns["append_token"], show=False).passed


def test_default_namespace_is_the_callers_globals():
    g = {"use_reference": use_reference}
    exec("slot = use_reference('02.slot_mapping', quiet=True)", g)
    assert g["slot_mapping"] is g["slot"] is registry.get("02.slot_mapping").get_reference()


def test_every_component_resolves_and_unknown_ones_are_listed():
    table = components()
    for group in (
        "kv_bytes",
        "waste",
        "free_queue",
        "slot_mapping",
        "allocator",
        "cow",
        "scheduler",
        "chunked_prefill",
        "pick_victim",
        "crossover",
        "radix",
        "kernel",
    ):
        assert table[group], group
    assert set(table["allocator"]) == {"02.free_queue", "02.slot_mapping", "03.fork", "03.append_token"}
    assert set(table["radix"]) == {"07.match_prefix", "07.insert", "07.evict"}
    for ex in registry.all_exercises():
        assert table[ex.id] == [ex.id] and ex.id in table[ex.name]
    with pytest.raises(KeyError, match="unknown component 'nope'.*free_queue"):
        use_reference("nope", {}, quiet=True)
