"""``my_engine()``: the real engine serving SmolLM2 on the parts you wrote that passed ``check()``.

In a notebook::

    from pagedlab.grading import my_engine, serve_with
    serve_with(slot_mapping)          # right after check(slot_mapping): same outputs as the kit's engine?
    llm = my_engine()                 # every exercise of this notebook that passed check(), kit's for the rest

Each exercise fills one slot of :mod:`pagedlab.engine.components` (the table ``BRIDGES``). An
object is plugged in only if *that very object* passed its ``check()`` in this kernel; otherwise
the kit's part is used and the learner is told why (not written, not checked since the cell was
re-run, failed its check, or the kit's reference from ``use_reference``). A plugged part runs
behind its guard: if it breaks an invariant the step raises ``ComponentError`` naming the part,
the step and the invariant (with a picture where one exists) and the engine goes on with the kit's.

Bridging (exercise signature -> slot interface): ``04.schedule_step`` takes no budget, so its slot
call drops the budget arguments; ``07.get_computed_blocks`` takes the request and the block pool, so
its slot call hands it just the hashes, the token count and the pool's ``get_cached_block``;
``06.schedule_with_preemption`` (a whole step with preemption, no budget) fills ``schedule_step``
wrapped in ``PreemptingStep`` and runs in ``LearnerPreemptingScheduler``, ahead of 05 and 04; lab 03's
``fork`` / ``append_token`` and lab 07's ``match_prefix`` / ``insert`` / ``evict`` each fill part of one
slot (``ForkCowFns``, ``RadixOps``: the reference fills the rest, a later passing function replaces
it) and run on the learner kit's ``RefCountedPool`` view of the engine's pool / ``TreeNode`` tree
(``GuardedForkCow``, ``GuardedRadixTree`` in ``pagedlab.parts``); every other exercise matches its
slot's interface as is. A new
exercise plugs in by adding a line to ``BRIDGES`` (its slot's interface is in ``components``).
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from pagedlab.grading import registry, serve
from pagedlab.grading.checking import changed_since_check, passed_check, resolve_exercise
from pagedlab.grading.serve import Comparison
from pagedlab.parts.contracts import GET_COMPUTED_BLOCKS, GET_COMPUTED_BLOCKS_MUTATES
from pagedlab.parts.guard import ContractError
from pagedlab.parts.memory import ForkCowFns
from pagedlab.parts.protocols import PrefixLookupFn, ScheduleStepFn
from pagedlab.parts.radix import RadixOps
from pagedlab.parts.schedule import PreemptingStep
from pagedlab.parts.slots import SLOTS, Components
from pagedlab.viz import render_radix_tree
from pagedlab.viz.pictures import render_queue_rows

__all__ = [
    "my_engine",
    "serve_with",
    "learner_components",
    "BRIDGES",
    "LAB_PROMPTS",
    "Comparison",
    "render_component_state",
    "components_for",
]

#: Short real prompts the labs serve (cheap: a few tokens each).
LAB_PROMPTS = ["What is the capital of France?", "Name three primary colors.", "What is 2 + 2?"]


def _schedule_step_bridge(fn: Callable[..., dict[str, int]]) -> ScheduleStepFn:
    """Lab 04's ``schedule_step(running, waiting, kv_cache_manager, max_num_seqs)`` as the slot's
    call: it has no token budget, so the budget arguments are dropped."""

    def step(
        running: list[Any],
        waiting: deque[Any],
        kv_cache_manager: Any,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        long_prefill_token_threshold: int,
    ) -> dict[str, int]:
        return fn(running, waiting, kv_cache_manager, max_num_seqs)

    step.__name__ = getattr(fn, "__name__", "schedule_step")
    setattr(step, "takes_token_budget", False)  # noqa: B010 - the guard reads it (parts.contracts.takes_token_budget)
    return step


def _same(obj: Any) -> Any:
    return obj


class _View(SimpleNamespace):
    """What a bridged exercise is handed in the engine: only the attributes its docstring names; any
    other one raises an ``AttributeError`` that says so (check() hands it the real objects)."""

    def __init__(self, what: str, **fields: Any) -> None:
        super().__init__(**fields)
        self.__dict__["_what"] = what

    def __getattr__(self, name: str) -> Any:
        have = ", ".join(k for k in self.__dict__ if not k.startswith("_"))
        raise AttributeError(
            f"in the engine {self._what} it gets has only {have} (what the exercise's docstring says to use), "
            f"not {name!r}"
        )


def _get_computed_blocks_bridge(fn: Callable[..., Any]) -> PrefixLookupFn:
    """Lab 07's ``get_computed_blocks(request, block_pool, block_size) -> (blocks, num_computed_tokens)``
    as the ``prefix_lookup`` slot's call: the request and the pool are reduced to what the exercise
    reads (``block_hashes``, ``num_tokens``; ``get_cached_block``). A token count that disagrees with
    the blocks returned raises, so the guard names the slot."""

    def lookup(
        block_hashes: list[Any], get_cached_block: Callable[[Any], Any], num_tokens: int, block_size: int
    ) -> list[Any]:
        given = list(block_hashes)
        request = _View("the request", block_hashes=given, num_tokens=num_tokens)
        out = fn(request, _View("the block pool", get_cached_block=get_cached_block), block_size)
        if request.block_hashes is not given or given != list(block_hashes):  # the rule check() holds it to too
            raise ContractError(GET_COMPUTED_BLOCKS_MUTATES.changed("request.block_hashes"))
        problem = GET_COMPUTED_BLOCKS.problem(out)  # the contract check() holds it to too
        if problem is not None:
            raise ContractError(problem)
        blocks, num_computed_tokens = out
        if num_computed_tokens != len(blocks) * block_size:
            raise ValueError(
                f"get_computed_blocks returned {len(blocks)} blocks but num_computed_tokens="
                f"{num_computed_tokens} (expected {len(blocks) * block_size})"
            )
        return list(blocks)

    lookup.__name__ = getattr(fn, "__name__", "get_computed_blocks")
    return lookup


def _radix_bridge(name: str) -> Callable[[Any], RadixOps]:
    """Lab 07's ``name`` (``match_prefix`` / ``insert`` / ``evict``) as the ``radix`` slot: the other two
    functions are the references (a later passing one replaces its reference, ``RadixOps.merge``);
    the tree is the learner kit's ``TreeNode`` (``new_tree``, ``lock``, ``unlock``)."""

    def bridge(fn: Callable[..., Any]) -> RadixOps:
        from pagedlab.grading import kit  # lazy: plug is in the learner's process: loads only what it uses

        ref = {n: registry.get(f"07.{n}").get_reference() for n in ("match_prefix", "insert", "evict")}
        ops = RadixOps(**ref, new_tree=kit.new_tree, lock=kit.lock, unlock=kit.unlock)
        return replace(ops, **{name: fn}, yours=frozenset({name}))

    return bridge


def _fork_cow_bridge(name: str) -> Callable[[Any], ForkCowFns]:
    """Lab 03's ``name`` (``fork`` / ``append_token``) as the ``fork_cow`` slot, the other function the
    reference; the pool is a ``RefCountedPool`` view of the engine's block pool, tables are ``Seq``s."""

    def bridge(fn: Callable[..., Any]) -> ForkCowFns:
        from pagedlab.grading import kit  # lazy: plug is in the learner's process: loads only what it uses

        ref = {n: registry.get(f"03.{n}").get_reference() for n in ("fork", "append_token")}
        fns = ForkCowFns(**ref, pool_view=kit.RefCountedPool.over, seq=kit.Seq)
        return replace(fns, **{name: fn}, yours=frozenset({name}))

    return bridge


#: exercise id -> (slot, bridge from the learner's object to the slot's implementation).
BRIDGES: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "02.free_queue": ("free_queue", _same),
    "02.slot_mapping": ("slot_mapping", _same),
    "06.schedule_with_preemption": ("schedule_step", PreemptingStep),
    "05.schedule_with_budget": ("schedule_step", _same),
    "04.schedule_step": ("schedule_step", _schedule_step_bridge),
    "06.pick_victim": ("pick_victim", _same),
    "07.get_computed_blocks": ("prefix_lookup", _get_computed_blocks_bridge),
    "08.load_kv_tile": ("kv_tile_load", _same),
    "03.fork": ("fork_cow", _fork_cow_bridge("fork")),
    "03.append_token": ("fork_cow", _fork_cow_bridge("append_token")),
    "07.match_prefix": ("radix", _radix_bridge("match_prefix")),
    "07.insert": ("radix", _radix_bridge("insert")),
    "07.evict": ("radix", _radix_bridge("evict")),
    "08.triton_load_kv_tile": ("triton_tile_load", _same),
}


def _status(exercise_id: str, obj: Any) -> str:
    """ "passed", or why ``obj`` is not plugged in (a sentence for the learner)."""
    ex = registry.get(exercise_id)
    if obj is None:
        return f"{ex.name} is not defined in this notebook (yet)"
    try:
        if obj is ex.get_reference():
            return f"{ex.name} is the kit's reference (use_reference), not yours"
    except Exception:  # noqa: BLE001 - a broken reference loader must not hide the learner's status
        pass
    passed = passed_check(exercise_id, obj)
    if changed_since_check(exercise_id, obj):
        return f"your {ex.name} has changed since check({ex.name}) ran: run it again"
    if passed is None:
        return f"your {ex.name} has not passed check() in this kernel: run check({ex.name}) first"
    return "passed" if passed else f"your {ex.name} does not pass check({ex.name}) yet"


def _mergeable(impl: Any) -> bool:
    """A slot filled by several exercises (``RadixOps``, ``ForkCowFns``)."""
    return isinstance(impl, RadixOps | ForkCowFns)


def _note(impl: RadixOps | ForkCowFns) -> str:
    """ "your insert, match_prefix; reference evict" for a slot filled by several exercises."""
    names = ("match_prefix", "insert", "evict") if isinstance(impl, RadixOps) else ("fork", "append_token")
    others = [n for n in names if n not in impl.yours]
    return (
        "your "
        + ", ".join(n for n in names if n in impl.yours)
        + (f"; reference {', '.join(others)}" if others else "")
    )


def learner_components(namespace: dict[str, Any], only: str | None = None) -> tuple[Components, list[str]]:
    """The components built from ``namespace`` (a notebook's globals), and one note per part not plugged.

    Args:
        namespace: where the learner's objects live, by their exercise names.
        only: an exercise id: consider only that exercise (``serve_with``).
    """
    comps = Components.kit()
    missing: list[tuple[str, str, str]] = []
    known = {ex.id for ex in registry.all_exercises()}
    done: set[str] = set()
    for eid, (slot, bridge) in BRIDGES.items():
        impl = comps.parts[slot].impl
        if eid not in known or (slot in done and not _mergeable(impl)) or (only is not None and eid != only):
            continue
        ex = registry.get(eid)
        status = _status(eid, namespace.get(ex.name))
        if status == "passed":
            new = bridge(namespace[ex.name])
            new = impl.merge(new) if slot in done else new
            comps = comps.plug(slot, new, note=_note(new) if _mergeable(new) else f"your {ex.name}")
            done.add(slot)
        elif ex.name in namespace or only is not None:
            missing.append((slot, ex.name, status))
    # In a slot that other functions of yours fill together (radix, fork_cow), the one not plugged is the
    # reference's; a slot one other exercise of yours fills whole (lab 05's step for 06's) keeps that one.
    notes = []
    for slot, name, status in missing:
        part = comps.parts[slot]
        if not comps.is_yours(slot):
            notes.append(f"{slot}: kit's part, because {status}")
        elif _mergeable(part.impl):
            notes.append(f"{slot}: the reference {name}, because {status}")
        else:
            notes.append(f"{slot}: {part.note}, not your {name}, because {status}")
    return comps, notes


def render_component_state(slot: str, state: dict[str, Any]) -> str:
    """An SVG of the state a guard reports (the free queue, the radix tree; "" for slots without a picture)."""
    if slot == "free_queue" and "free_queue" in state:
        return render_queue_rows([("free queue", state["free_queue"], None)], title=f"free queue ({slot})")
    if slot == "radix" and "root" in state:
        # lazy: plug is in the learner's process: loads only what it uses
        from pagedlab.grading.snapshots import tree_state

        return render_radix_tree({"root": tree_state(state["root"])}, title="the engine's radix tree (radix)")
    return ""


def my_engine(
    namespace: dict[str, Any] | None = None, *, show: bool = True, time_limit_s: float = 5.0, **llm_kwargs: Any
) -> Any:
    """An ``LLM`` whose parts are yours where your exercise passed ``check()``, the kit's elsewhere.

    Args:
        namespace: where to find your objects (default: the calling notebook's globals).
        show: print the table of whose part is in each slot, and why a part of yours is not used.
        time_limit_s: seconds one call of one of your parts may take before the step stops.
        **llm_kwargs: ``LLM`` arguments (default ``num_gpu_blocks=128, max_model_len=512, seed=0``).

    Returns:
        A ``pagedlab.LLM``; ``llm.llm_engine.components`` says whose part is where.
    """
    from pagedlab.engine.llm import LLM  # lazy: start-up time (the engine); tests replace LLM

    ns = namespace if namespace is not None else sys._getframe(1).f_globals
    comps, notes = learner_components(ns)
    comps = replace(comps, time_limit_s=time_limit_s, render=render_component_state)
    if show:
        print(comps.table())
        for note in notes:
            print("  note - " + note)
    return LLM(components=comps, **{**serve.BASE, **llm_kwargs})


def serve_with(
    obj: Any,
    exercise_id: str | None = None,
    *,
    prompts: list[str] | None = None,
    max_tokens: int = 8,
    **llm_kwargs: Any,
) -> Comparison | None:
    """Plug ``obj`` (one exercise, passed ``check()``) into the real engine, serve real prompts and
    print one line: are the outputs identical to the kit's engine's? Returns the comparison (None
    when ``obj`` is not plugged in: the line says why)."""
    ex = resolve_exercise(obj, exercise_id)
    if ex.id not in BRIDGES:
        print(f"{ex.name} is not a part of the engine (nothing to serve with it)")
        return None
    slot = BRIDGES[ex.id][0]
    comps, notes = learner_components({ex.name: obj}, only=ex.id)
    if not comps.is_yours(slot):
        print(f"Not served with your {ex.name}: " + (notes[0].split("because ", 1)[-1] if notes else "not plugged"))
        return None
    run = serve.run_of(ex.id, slot)
    texts = list(prompts or LAB_PROMPTS)
    ids = serve.chat_ids(texts)
    kw = serve.settings_for(ex.id, slot, ids, max_tokens, **llm_kwargs)
    comps = replace(comps, render=render_component_state)
    res = serve.serve_and_compare(comps, texts, kw, max_tokens, run.completions, prompt_ids=ids)
    n = len(res.prompts)
    must = run.must_show
    if res.error:
        print(f"❌ SmolLM2 with your {ex.name} ({slot}) stopped: {res.error}")
    elif res.same and must and not getattr(res, must):
        print(
            f"⚠️ SmolLM2 served {n} prompts identically, but {serve.DID_NOT_RUN[must]}: your {ex.name} did not run (settings {kw})"
        )
    elif res.same:
        print(
            f"✅ SmolLM2 served {n} prompts with your {ex.name} as the engine's {slot}: "
            f"every token identical to the kit's engine"
            + (f" ({res.preempted} preemptions, {res.prefill_chunks} extra prefill chunks)." if must else ".")
        )
    else:
        bad = (res.first_difference or (0, 0))[0]
        print(
            f"❌ SmolLM2 with your {ex.name} ({slot}) answered prompt {bad} differently from the kit's engine: "
            f"{res.mine[bad]} vs {res.kit[bad]}"
        )
    return res


assert all(slot in SLOTS for slot, _ in BRIDGES.values())


def components_for(objects: dict[str, Any], note: str = "your {eid}") -> Components:
    """The kit's components with each of ``objects`` (exercise id -> implementation) plugged in
        through its bridge; a slot two exercises fill takes the first in ``BRIDGES`` order (fork_cow and
    radix: each exercise fills its function of the slot, the references the rest). Ids that
    are not in ``BRIDGES`` are ignored; nothing is checked here (callers decide what passed)."""
    comps = Components.kit()
    for eid, (slot, bridge) in BRIDGES.items():
        impl = comps.parts[slot].impl
        if eid in objects and not comps.is_yours(slot):
            comps = comps.plug(slot, bridge(objects[eid]), note=note.format(eid=eid))
        elif eid in objects and _mergeable(impl):  # fork_cow / radix: several exercises fill one slot
            merged = impl.merge(bridge(objects[eid]))
            comps = comps.plug(slot, merged, note=f"{comps.parts[slot].note}, {eid}")
    return comps


def solution_components() -> Components:
    """Every plugged slot filled from the exercises' canonical solution cells (pure Python, as a
    learner writes them): the engine the capstone builds from a finished course."""
    known = {ex.id for ex in registry.all_exercises()}
    return components_for({eid: registry.snippet_object(eid) for eid in BRIDGES if eid in known}, "solution {eid}")
