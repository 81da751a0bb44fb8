"""Serving prompts on a set of parts and comparing greedy tokens: the one way ``serve_with``, ``my_engine``,
the capstone and ``pagedlab grade``'s end-to-end test do it, and the one table of what makes each part run.

* :data:`BASE`: the engine every caller starts from (``my_engine()``'s defaults).
* :data:`PART_RUNS`: exercise or slot -> :class:`PartRun`, the engine settings under which that part
  runs at all (``needs``), the ones ``serve_with`` adds so that all of it runs, and what the run must show.
* :func:`serve`: greedy tokens of one engine built from ``components`` (the kit's when None), with the
  preemptions and extra prefill chunks that happened and a guard's ``ComponentError`` kept.
* :func:`forced_preemption`: settings with blocks of 4 tokens and the largest pool on which the kit's own
  engine preempts these prompts - searched, so that it holds whatever the scheduler's admission rule.
* :func:`serve_and_compare`: serve on the kit's parts (or take a recorded reference) and on ``components``,
  and name the first difference (:func:`first_mismatch`).

``pagedlab grade`` splits :func:`serve_and_compare` across its processes, so that a submission cannot
change how it is judged: the grader serves the kit's parts (``e2e.plan``), the learner's process serves
the learner's parts (``e2e_learner.EngineServer``, tokens only), and the driver compares (:func:`first_mismatch`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pagedlab import SamplingParams
from pagedlab.errors import ComponentError

if TYPE_CHECKING:  # the engine (torch) is imported only when a run starts: the driver imports this module
    from pagedlab.parts.slots import Components

__all__ = [
    "BASE",
    "PART_RUNS",
    "PartRun",
    "DID_NOT_RUN",
    "Served",
    "Comparison",
    "run_of",
    "runs_under",
    "serve",
    "generate_ids",
    "chat_ids",
    "forced_preemption",
    "settings_for",
    "serve_and_compare",
    "first_mismatch",
]

#: The engine of ``my_engine()``: every served run starts from these settings.
BASE: Mapping[str, Any] = MappingProxyType({"num_gpu_blocks": 128, "max_model_len": 512, "seed": 0})
#: What forced preemption sets besides the searched pool (the pool search is in blocks of 4; no shared blocks).
PREEMPTION_BLOCK_SIZE = 4


@dataclass(frozen=True)
class PartRun:
    """What makes one part run in a served engine.

    Attributes:
        needs: engine settings without which the part never runs (the capstone's "your parts in this run").
        serve: settings ``serve_with`` adds so that every branch of the part runs (a pool small enough to evict).
        preempts: the part runs only when requests are preempted: runs on a :func:`forced_preemption` pool.
        cannot_preempt: a scheduling step that never preempts: the kit's step runs where preemption is forced.
        must: ``"prefill_chunks"`` / ``"preempted"``: a :class:`Served` count that must be > 0, else the part did
            not run (``preempts`` implies ``"preempted"``).
        completions: completions per prompt (2: a fork happens only for n > 1).
    """

    needs: Mapping[str, Any] = field(default_factory=dict)
    serve: Mapping[str, Any] = field(default_factory=dict)
    preempts: bool = False
    cannot_preempt: bool = False
    must: str = ""
    completions: int = 1

    @property
    def must_show(self) -> str:
        return self.must or ("preempted" if self.preempts else "")


#: What a run that did not show its part's ``must`` count says.
DID_NOT_RUN: Mapping[str, str] = MappingProxyType(
    {"preempted": "no preemption happened", "prefill_chunks": "no prompt was cut into chunks"}
)

_HASH = {"enable_prefix_caching": True, "prefix_cache": "hash"}
#: exercise id, else slot -> what makes that part run. A victim is chosen only when the pool is too small for
#: every request; a 16-token budget cuts every prompt into chunks; a 4-block pool evicts from the radix tree.
PART_RUNS: Mapping[str, PartRun] = MappingProxyType(
    {
        "pick_victim": PartRun(preempts=True),
        "preempt_retry": PartRun(preempts=True),
        "06.schedule_with_preemption": PartRun(preempts=True),  # by exercise: 04's and 05's share its slot
        "05.schedule_with_budget": PartRun(
            serve={"max_num_batched_tokens": 16}, must="prefill_chunks", cannot_preempt=True
        ),
        "04.schedule_step": PartRun(cannot_preempt=True),
        "prefix_lookup": PartRun(needs=_HASH, serve=_HASH),
        "radix": PartRun(
            needs={"enable_prefix_caching": True, "prefix_cache": "radix"},
            serve={"enable_prefix_caching": True, "prefix_cache": "radix", "num_gpu_blocks": 4},
        ),
        "triton_tile_load": PartRun(needs={"attention_backend": "triton"}, serve={"attention_backend": "triton"}),
        "fork_cow": PartRun(completions=2),
    }
)


def run_of(exercise_id: str, slot: str = "") -> PartRun:
    """The row of ``exercise_id``, else of its ``slot``, else an empty one (runs in any engine)."""
    return PART_RUNS.get(exercise_id) or PART_RUNS.get(slot) or PartRun()


def runs_under(slot: str, settings: Mapping[str, Any]) -> bool:
    """Whether the part in ``slot`` runs at all under the engine ``settings`` (its row's ``needs`` are met;
    a setting not given is ``LLM``'s default: prefix caching on, hash caching, the CPU backend)."""
    defaults = {"enable_prefix_caching": True, "prefix_cache": "hash", "attention_backend": None}
    return all(settings.get(k, defaults.get(k)) == v for k, v in run_of("", slot).needs.items())


@dataclass
class Served:
    """One engine run: greedy tokens per prompt (its completions' tokens one after the other), or the
    guard's error; ``preempted``: preemptions; ``prefill_chunks``: prefill pieces beyond one per request."""

    tokens: list[list[int]] | None
    error: Exception | None = None
    preempted: int = 0
    prefill_chunks: int = 0
    seconds: float = 0.0


def generate_ids(llm: Any, prompt_ids: list[list[int]], max_tokens: int, n: int = 1) -> tuple[list[list[int]], float]:
    """Greedy tokens per prompt of ``llm`` (``n`` completions each, one after the other) and the seconds it took."""
    t0 = time.perf_counter()
    params = SamplingParams(n=n, temperature=0, max_tokens=int(max_tokens))
    outs = llm.generate([{"prompt_token_ids": list(p)} for p in prompt_ids], params)
    return [[int(t) for c in o.outputs for t in c.token_ids] for o in outs], time.perf_counter() - t0


def serve(
    components: Components | None,
    prompt_ids: list[list[int]],
    max_tokens: int,
    *,
    n: int = 1,
    model: str | None = None,
    **settings: Any,
) -> Served:
    """Serve ``prompt_ids`` greedily on an engine built from ``components`` (None: the kit's parts) and the
    engine ``settings`` (``LLM`` arguments, nothing added). A guard's ``ComponentError`` is kept in ``error``;
    anything else raises."""
    from pagedlab.engine.llm import LLM  # lazy: start-up time (the engine); tests replace LLM

    llm = LLM(**({"model": model} if model else {}), components=components, **settings)
    try:
        tokens, seconds = generate_ids(llm, prompt_ids, max_tokens, n)
    except ComponentError as e:
        return Served(None, e)
    stats = list(llm.llm_engine.step_stats)
    prefills = [rid for s in stats for rid, _, is_prefill in s.scheduled if is_prefill]
    preempted = sum(len(s.preempted) for s in stats)
    return Served(tokens, None, preempted, len(prefills) - len(set(prefills)), seconds)


_TEMPLATED: dict[tuple[str, ...], list[list[int]]] = {}


def chat_ids(prompts: list[str]) -> list[list[int]]:
    """Token ids of each prompt as a chat user turn (the bundled model's chat template)."""
    key = tuple(prompts)
    if key not in _TEMPLATED:
        from pagedlab.engine.llm import LLM  # lazy: start-up time (the engine); tests replace LLM

        llm = LLM(**BASE)
        _TEMPLATED[key] = [llm.apply_chat_template([{"role": "user", "content": p}]) for p in prompts]
    return _TEMPLATED[key]


_KIT: dict[tuple[Any, ...], Served] = {}


def _kit(
    prompt_ids: list[list[int]], max_tokens: int, n: int, model: str | None, settings: Mapping[str, Any]
) -> Served:
    """The kit's run on these settings (kept: the kit's tokens do not change within a process)."""
    key = (tuple(map(tuple, prompt_ids)), max_tokens, n, model, tuple(sorted(settings.items())))
    if key not in _KIT:
        _KIT[key] = serve(None, prompt_ids, max_tokens, n=n, model=model, **settings)
    return _KIT[key]


def forced_preemption(
    prompt_ids: list[list[int]], max_tokens: int, settings: Mapping[str, Any], *, n: int = 1, model: str | None = None
) -> tuple[dict[str, Any], Served]:
    """``settings`` with blocks of 4 tokens, prefix caching off and the largest pool on which the kit's engine
    preempts these prompts, and the kit's run there (its ``preempted`` is 0 when no pool did).

    The pool is searched, not computed: from the one that admits the first two prompts (but not their answers)
    down to the longest request's own need, then up to just below every request's need together. So it holds
    whatever rule the scheduler admits by.
    """
    bs = PREEMPTION_BLOCK_SIZE
    need = [math.ceil((len(p) + max_tokens * n) / bs) for p in prompt_ids]
    start = max(sum(math.ceil(len(p) / bs) for p in prompt_ids[:2]), max(need))
    pools = [*range(start, max(need) - 1, -1), *range(start + 1, sum(need))]
    kwargs, kit = dict(settings), Served(None)
    for pool in pools:
        kwargs = {**settings, "block_size": bs, "num_gpu_blocks": pool, "enable_prefix_caching": False}
        kit = _kit(prompt_ids, max_tokens, n, model, kwargs)
        if kit.preempted > 0:
            break
    return kwargs, kit


def settings_for(
    exercise_id: str, slot: str, prompt_ids: list[list[int]], max_tokens: int, **overrides: Any
) -> dict[str, Any]:
    """The engine settings ``serve_with`` serves ``exercise_id`` (in ``slot``) on: :data:`BASE`, its row's
    ``serve`` settings, ``overrides``, and a :func:`forced_preemption` pool when it preempts (unless
    ``overrides`` name the pool)."""
    run = run_of(exercise_id, slot)
    kw = {**BASE, **run.serve, **overrides}
    if run.preempts and "num_gpu_blocks" not in overrides:
        kw, _ = forced_preemption(prompt_ids, max_tokens, kw, n=run.completions)
    return kw


def first_mismatch(tokens: list[list[int]], reference: list[list[int]]) -> tuple[int, int] | None:
    """(prompt, token index) of the first difference, or None when identical."""
    for i, (mine, kit) in enumerate(zip(tokens, reference)):
        if mine != kit:
            j = next((k for k, (a, b) in enumerate(zip(mine, kit)) if a != b), min(len(mine), len(kit)))
            return i, j
    return None


@dataclass
class Comparison:
    """Outputs of two engines on the same prompts: ``same`` when every token matches."""

    prompts: list[str]
    mine: list[list[int]]
    kit: list[list[int]]
    error: str = ""
    preempted: int = 0  #: preemptions in the run with ``mine``'s parts
    prefill_chunks: int = 0  #: prefill pieces beyond one per request (chunked prefill) in that run
    seconds: float = 0.0  #: the run with ``mine``'s parts

    @property
    def same(self) -> bool:
        return not self.error and self.mine == self.kit

    def __repr__(self) -> str:
        """One line: ``serve_with(...)`` is the last line of the labs' cells, so Jupyter shows this under its
        verdict (the dataclass repr printed every token id of both runs there)."""
        verdict = (
            f"error={self.error!r}" if self.error else ("same" if self.same else f"differ at {self.first_difference}")
        )
        tokens = sum(map(len, self.mine))
        n = len(self.prompts)
        return f"Comparison({n} prompt{'s' * (n != 1)}, {tokens} tokens, {verdict}, {self.seconds:.2f} s)"

    @property
    def first_difference(self) -> tuple[int, int] | None:
        """(prompt, token) of the first difference (None: identical, or an error)."""
        return None if self.error else first_mismatch(self.mine, self.kit)


def serve_and_compare(
    components: Components,
    prompts: list[str],
    settings: Mapping[str, Any],
    max_tokens: int = 8,
    n: int = 1,
    *,
    prompt_ids: list[list[int]] | None = None,
    reference: list[list[int]] | None = None,
) -> Comparison:
    """Serve ``prompts`` (chat user turns, or ``prompt_ids`` when given) greedily with ``components`` and
    compare with the kit's parts on the same ``settings`` - or with ``reference`` tokens when given (the
    capstone's HF tokens). A guard's ``ComponentError`` is kept in ``Comparison.error``."""
    ids = prompt_ids if prompt_ids is not None else chat_ids(prompts)
    kit = reference if reference is not None else _kit(ids, max_tokens, n, None, settings).tokens or []
    mine = serve(components, ids, max_tokens, n=n, **settings)
    if mine.error is not None:
        return Comparison(list(prompts), [], kit, error=str(mine.error))
    return Comparison(list(prompts), mine.tokens or [], kit, "", mine.preempted, mine.prefill_chunks, mine.seconds)
