"""Beam search on the paged engine with copy-on-write forks (vLLM v0's design).

vLLM v0 ran beam search inside the engine: every step each beam proposes its best next
tokens, the ``beam_width`` best (beam, token) pairs survive, a beam chosen twice is *forked*
(its block table is copied and every block gains a reference, nothing is copied), a beam
chosen zero times is freed, and the first write into a shared last block copies it (CoW).
vLLM v1 dropped this and runs beam search outside the engine on top of prefix caching
(``LLM.beam_search``); pagedlab keeps the v0 mechanism because it is what the paper measures
(Fig. 15: beam search shares 37.6-55.2% of blocks on Alpaca).

Scores are cumulative log-probabilities; finished beams (EOS) are ranked by
``cum_logprob / len ** length_penalty`` as vLLM's ``get_beam_search_score``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from pagedlab.errors import InvalidRequestError
from pagedlab.request import Request, RequestStatus
from pagedlab.sampling_params import BeamSearchParams, SamplingParams

if TYPE_CHECKING:
    from pagedlab.engine.llm_engine import LLMEngine
    from pagedlab.sched.scheduler import ScheduledRequest, Scheduler


@dataclass
class BeamSearchSequence:
    tokens: list[int]  # generated tokens only
    cum_logprob: float
    text: str = ""
    finished: bool = False


@dataclass
class BeamSearchOutput:
    """Beams best first, plus the block accounting that shows what CoW sharing saved.

    Attributes:
        sequences: up to ``beam_width`` beams, best first.
        blocks_with_sharing: per step, distinct physical blocks held by the live beams.
        blocks_without_sharing: per step, blocks the beams would hold with private copies.
        num_cow_copies: copy-on-write block copies performed.
    """

    sequences: list[BeamSearchSequence]
    blocks_with_sharing: list[int] = field(default_factory=list)
    blocks_without_sharing: list[int] = field(default_factory=list)
    num_cow_copies: int = 0

    @property
    def memory_saving(self) -> float:
        """Blocks saved by sharing / blocks needed without sharing, at the peak step (vLLM paper §6.3)."""
        if not self.blocks_without_sharing:
            return 0.0
        i = max(range(len(self.blocks_without_sharing)), key=self.blocks_without_sharing.__getitem__)
        return 1 - self.blocks_with_sharing[i] / self.blocks_without_sharing[i]


def _score(seq: BeamSearchSequence, prompt_len: int, length_penalty: float) -> float:
    return float(seq.cum_logprob / max(1, len(seq.tokens) + prompt_len) ** length_penalty)


def _best_pairs(
    sched: Scheduler,
    samplers: list[ScheduledRequest],
    logits: torch.Tensor,
    cum: dict[str, float],
    params: BeamSearchParams,
    eos: int | None,
    finished: list[BeamSearchSequence],
) -> list[tuple[float, str, int]]:
    """Every live beam proposes its 2W best tokens; return the W best ``(score, beam id, token)``.

    ``logits`` has one row per sampler. Candidates ending in EOS (unless ``ignore_eos``) are
    appended to ``finished`` instead of being kept.
    """
    W = params.beam_width
    logprobs = torch.log_softmax(logits, dim=-1)
    cands: list[tuple[float, str, int]] = []
    for row, s in enumerate(samplers):
        top = torch.topk(logprobs[row], 2 * W)
        rid = s.request.request_id
        cands += [(cum[rid] + float(v), rid, int(t)) for v, t in zip(top.values, top.indices, strict=True)]
    cands.sort(key=lambda c: -c[0])
    keep: list[tuple[float, str, int]] = []
    for score, rid, tok in cands:
        req = sched.requests[rid]
        if tok == eos and not params.ignore_eos:
            finished.append(BeamSearchSequence(req.output_token_ids + [tok], score, finished=True))
            continue
        keep.append((score, rid, tok))
        if len(keep) == W:
            break
    return keep


def _fork_chosen(
    engine: LLMEngine, keep: list[tuple[float, str, int]], ids: Iterator[int]
) -> list[tuple[Request, float, int]]:
    """Give each kept pair a beam: the first choice of a beam continues it, each further choice
    forks it copy-on-write (new ids ``beam{next(ids)}``); beams chosen zero times are aborted
    after the forks, so their blocks are shared first. Returns ``(beam, score, token)``."""
    sched = engine.scheduler
    used: set[str] = set()
    assignments: list[tuple[Request, float, int]] = []
    for score, rid, tok in keep:
        parent = sched.requests[rid]
        if rid not in used:
            used.add(rid)
            assignments.append((parent, score, tok))
            continue
        child = engine._make_request(f"beam{next(ids)}", parent.prompt_token_ids, parent.sampling_params, 0.0)
        child.append_output_token_ids(list(parent.output_token_ids))
        sched.fork_request(parent, child)
        assignments.append((child, score, tok))
    chosen = {a[0].request_id for a in assignments}
    dropped = [r.request_id for r in list(sched.running) if r.request_id not in chosen]
    sched.finish_requests(dropped, RequestStatus.FINISHED_ABORTED)
    return assignments


def beam_search(engine: LLMEngine, prompt_token_ids: list[int], params: BeamSearchParams) -> BeamSearchOutput:
    """Run one prompt's beam search on ``engine`` (an idle ``LLMEngine``), holding ``engine.busy``
    (it drives the scheduler and the model runner itself, as ``step`` does).

    Raises:
        InvalidRequestError: the prompt is invalid, or the engine is busy with other requests.
        ReentrantCallError: a step or another beam search runs on ``engine`` (called from inside it).
    """
    with engine.busy.hold("pagedlab.engine.beam_search"):
        return _beam_search(engine, prompt_token_ids, params)


def _beam_search(engine: LLMEngine, prompt_token_ids: list[int], params: BeamSearchParams) -> BeamSearchOutput:
    if engine.has_unfinished_requests():
        raise InvalidRequestError("beam_search needs an idle engine (finish or abort other requests first)")
    W = params.beam_width
    sp = SamplingParams(temperature=0, max_tokens=params.max_tokens, ignore_eos=True, n=W)
    engine.validate_request(list(prompt_token_ids), sp)
    sched, kv, runner = engine.scheduler, engine.kv_cache_manager, engine.model_runner
    eos = engine.eos_token_id
    root = engine._make_request(
        "beam0",
        list(prompt_token_ids),
        SamplingParams(temperature=0, max_tokens=params.max_tokens, ignore_eos=True),
        0.0,
    )
    sched.add_request(root)
    cum = {root.request_id: 0.0}
    finished: list[BeamSearchSequence] = []
    out = BeamSearchOutput(sequences=[])
    ids = itertools.count(1)
    # as generate(): a beam ends at max_model_len (validate_request guarantees room for one token)
    room = engine.scheduler_config.max_model_len - len(prompt_token_ids)
    for _ in range(min(params.max_tokens, room)):
        so = sched.schedule()
        out.num_cow_copies += len(so.blocks_to_copy)
        samplers, logits = runner.forward(so)
        if not samplers or logits is None:
            continue
        keep = _best_pairs(sched, samplers, logits, cum, params, eos, finished)
        assignments = _fork_chosen(engine, keep, ids)
        cum = {}
        for req, score, tok in assignments:
            req.append_output_token_ids(tok)
            cum[req.request_id] = score
        live = list(sched.running)
        out.blocks_with_sharing.append(len({b for r in live for b in kv.get_block_ids(r.request_id)}))
        out.blocks_without_sharing.append(sum(len(kv.get_block_ids(r.request_id)) for r in live))
        if not live:
            break
        best_live = max(cum.values())
        if len(finished) >= W and all(
            _score(f, len(prompt_token_ids), params.length_penalty)
            >= best_live / (len(prompt_token_ids) + live[0].num_output_tokens) ** params.length_penalty
            for f in finished[:W]
        ):
            break
    for r in list(sched.running):
        finished.append(BeamSearchSequence(list(r.output_token_ids), cum.get(r.request_id, 0.0)))
    sched.finish_requests([r.request_id for r in list(sched.running)], RequestStatus.FINISHED_LENGTH_CAPPED)
    finished.sort(key=lambda f: -_score(f, len(prompt_token_ids), params.length_penalty))
    for f in finished[:W]:
        f.text = engine.tokenizer.decode(f.tokens, skip_special_tokens=True)
    out.sequences = finished[:W]
    return out
