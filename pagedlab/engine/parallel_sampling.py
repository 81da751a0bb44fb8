"""Parallel sampling: the ``n`` completions of one prompt (``SamplingParams.n > 1``), two ways.

``LLMEngine(parallel_sampling=...)`` picks one of :data:`PARALLEL_SAMPLING`:

- ``"fork"`` (default, vLLM v0; what Lab 03 teaches): one request prefills the prompt, samples its
  n first tokens from the prompt's last row (:func:`samples_per_request`) and forks into n
  completions sharing its blocks copy-on-write (:func:`fork`, ``Scheduler.fork_request``).
- ``"requests"`` (vLLM 0.32.0's v1 engine, ``vllm/v1/engine/parallel_sampling.py``,
  ``ParentRequest.get_child_info``): n independent requests ``"{i}_{request_id}"`` with ``n=1`` and,
  for a seeded request, ``seed + i`` (:func:`child_params`); they share the prompt only through the
  prefix cache.

Either way the completions form one :class:`RequestGroup` and the output processor returns them as
one ``RequestOutput`` with n completions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch

from pagedlab.request import Request
from pagedlab.sampling_params import SamplingParams
from pagedlab.sched.scheduler import ScheduledRequest

#: ``LLMEngine(parallel_sampling=...)``: vLLM v0's copy-on-write fork, or vLLM v1's n child requests.
PARALLEL_SAMPLING = ("fork", "requests")


@dataclass
class RequestGroup:
    """The ``n`` completions of one prompt (vLLM v0's ``SequenceGroup``, vLLM 0.32's ``ParentRequest``).

    Attributes:
        request_id: the caller's id (outputs carry it).
        members: one ``Request`` per completion, in completion order (fork children are appended
            when the first one forks).
        finished_members: completion index -> its finished ``Request``.
    """

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    n: int
    arrival_time: float
    members: list[Request] = field(default_factory=list)
    finished_members: dict[int, Request] = field(default_factory=dict)


def child_params(params: SamplingParams, index: int) -> SamplingParams:
    """Completion ``index``'s parameters under ``"requests"``: ``n=1`` and seed ``seed + index``
    (vLLM 0.32's ``ParentRequest.get_child_info``)."""
    seed = None if params.seed is None else params.seed + index
    return dataclasses.replace(params, n=1, seed=seed)


def child_request_id(request_id: str, index: int) -> str:
    """Completion ``index``'s request id under ``"requests"``: ``f"{index}_{request_id}"`` (vLLM 0.32)."""
    return f"{index}_{request_id}"


def samples_per_request(
    scheduled: list[ScheduledRequest],
    member_group: Mapping[str, RequestGroup],
    gens: Mapping[str, list[torch.Generator]],
    default: torch.Generator,
) -> tuple[dict[str, int], dict[str, torch.Generator | list[torch.Generator]]]:
    """How many tokens each scheduled request samples from its row, and with which generators.

    A ``"fork"`` prompt that has not forked yet samples all n first tokens from the prompt's last row
    (count n, its n generators); every other request samples one, with its own seeded generator or
    ``default`` (the engine's). Returns ``(counts above 1, generators)`` for ``ModelRunner.execute``.
    """
    extra: dict[str, int] = {}
    generators: dict[str, torch.Generator | list[torch.Generator]] = {}
    for s in scheduled:
        rid = s.request.request_id
        g = member_group.get(rid)
        first = g is not None and s.samples and s.request.num_output_tokens == 0 and len(g.members) == 1
        n = g.n if first and g is not None else 1
        if n > 1:
            extra[rid] = n
        own = gens.get(rid)
        generators[rid] = (own if n > 1 else own[0]) if own else default
    return extra, generators


def fork(
    parent: Request,
    toks: list[int],
    group: RequestGroup,
    gens: dict[str, list[torch.Generator]],
    sampled: dict[str, list[int]],
    new_child: Callable[[int], Request],
    fork_request: Callable[[Request, Request], None],
    member_group: dict[str, RequestGroup],
) -> None:
    """Create completions 1..n-1 of ``parent``'s group sharing its blocks copy-on-write (vLLM v0 fork).

    ``toks`` are the n tokens sampled from the parent's row: completion i gets ``toks[i]`` in
    ``sampled`` and generator i of the parent's seeded ones. ``new_child(i)`` builds completion i's
    ``Request`` (a fresh id, the parent's prompt and parameters); ``fork_request`` is
    ``Scheduler.fork_request``.
    """
    parent_id = parent.request_id
    parent_gens = gens.get(parent_id)
    for i, tok in enumerate(toks[1:], start=1):
        child = new_child(i)
        child.num_cached_tokens = parent.num_cached_tokens
        child.first_scheduled_time = parent.first_scheduled_time
        group.members.append(child)  # first, so a failed step's recovery finds its blocks
        member_group[child.request_id] = group
        fork_request(parent, child)
        if parent_gens:
            gens[child.request_id] = [parent_gens[i]]
        sampled[child.request_id] = [tok]
    sampled[parent_id] = toks[:1]
    if parent_gens:
        gens[parent_id] = parent_gens[:1]
