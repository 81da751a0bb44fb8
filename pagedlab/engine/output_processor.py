"""Output processing: sampled tokens turned into what the caller reads, as vLLM 0.32.0's
``OutputProcessor`` (``vllm/v1/engine/output_processor.py``) with its detokenizer
(``vllm/v1/engine/detokenizer.py``) and logprobs processor (``vllm/v1/engine/logprobs.py``).

After each step :class:`OutputProcessor` detokenizes and checks stop strings
(:meth:`~OutputProcessor.check_stop_strings`; EOS, stop tokens and the length cap are the scheduler's
``update_from_output``, as vLLM's engine core checks them), keeps each request's log-probabilities
with their decoded tokens (:meth:`~OutputProcessor.record_logprobs`), and builds ``RequestOutput``s:
cumulative ones for requests that got a token (:meth:`~OutputProcessor.partial_outputs`) and the final
one when every completion of a prompt finished (:meth:`~OutputProcessor.finish`). It owns the
bookkeeping of the prompts in flight (:class:`~pagedlab.engine.parallel_sampling.RequestGroup`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pagedlab.engine.decoded_tokens import fill_decoded_tokens
from pagedlab.engine.parallel_sampling import RequestGroup
from pagedlab.engine.stop_strings import check_stop_strings, output_text
from pagedlab.outputs import CompletionOutput, RequestMetrics, RequestOutput, TokenLogprobs
from pagedlab.request import Request, RequestStatus
from pagedlab.sampling_params import RequestOutputKind

if TYPE_CHECKING:
    from pagedlab.sched.scheduler import Scheduler


def stop_terminated(req: Request) -> bool:
    """The request ended on a token (EOS or one of ``stop_token_ids``), not a stop string nor the length:
    vLLM 0.32's ``finish_reason == FinishReason.STOP`` from the engine core (v1/engine/output_processor.py:769)."""
    return req.status == RequestStatus.FINISHED_STOPPED and not isinstance(req.stop_reason, str)


class OutputProcessor:
    """The outputs of one engine's requests.

    Args:
        tokenizer: an HF tokenizer (``decode``) or None (outputs carry token ids and no text); the
            engine's ``tokenizer`` setter keeps it in step.

    Attributes:
        groups: the prompts in flight, by the caller's request id.
        member_group: the group of every member ``Request`` (fork children included), by the member's
            id: groups are tracked structurally, request ids are never parsed.
        logprobs: each sampling member's top log-probabilities so far (``SamplingParams.logprobs`` set).
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.groups: dict[str, RequestGroup] = {}
        self.member_group: dict[str, RequestGroup] = {}
        self.logprobs: dict[str, list[TokenLogprobs]] = {}

    def add_group(self, group: RequestGroup) -> None:
        """Track ``group`` and its members (``add_request``)."""
        self.groups[group.request_id] = group
        for req in group.members:
            self.member_group[req.request_id] = group

    def clear(self) -> None:
        """Forget every prompt in flight (the engine's recovery after a failed step)."""
        self.groups.clear()
        self.member_group.clear()
        self.logprobs.clear()

    def get_request_group_id(self, member_id: str) -> str | None:
        """The caller's request id that the live member ``member_id`` serves, or None (see
        ``LLMEngine.get_request_group_id``)."""
        group = self.member_group.get(member_id)
        return None if group is None else group.request_id

    def is_group_head(self, member_id: str) -> bool:
        """True for the request a prompt was submitted as (not one of its fork children)."""
        group = self.member_group.get(member_id)
        return group is not None and group.members[0].request_id == member_id

    # --- detokenizing: stop strings and text ------------------------------------------------------
    def check_stop_strings(
        self, sampled: dict[str, int], scheduler: Scheduler, finished: list[Request]
    ) -> list[Request]:
        """Stop the requests whose newest token completes a stop string, as vLLM 0.32.0's detokenizer
        (``pagedlab.engine.stop_strings``): also one just finished by its length (its finish reason becomes
        "stop"); only past ``min_tokens``; the string must end in the new token's text. Returns the requests
        this finishes through ``scheduler`` (not those in ``finished``, already finished this step)."""
        just = {r.request_id: r for r in finished}
        done = []
        for rid in sampled:
            req = scheduler.requests.get(rid) or just.get(rid)
            if req is None or self.tokenizer is None:
                continue
            sp = req.sampling_params
            if not sp.stop or not sp.detokenize or req.status == RequestStatus.FINISHED_ABORTED:
                continue
            ids = req.output_token_ids
            if len(ids) <= sp.min_tokens or (req.is_finished() and rid not in just):
                continue
            shown = ids[:-1] if stop_terminated(req) and not sp.include_stop_str_in_output else ids
            text = output_text(self.tokenizer, list(shown), sp.skip_special_tokens)
            before = output_text(self.tokenizer, list(ids[:-1]), sp.skip_special_tokens)
            stops = [sp.stop] if isinstance(sp.stop, str) else list(sp.stop)
            found = check_stop_strings(text, len(text) - len(before), stops, sp.include_stop_str_in_output)
            if found is None:
                continue
            req.stop_reason, req.stop_truncate_to = found
            if req.is_finished():
                req.status = RequestStatus.FINISHED_STOPPED
            else:
                done += scheduler.finish_requests(rid, RequestStatus.FINISHED_STOPPED)
        return done

    def completion(self, index: int, req: Request) -> CompletionOutput:
        """Completion ``index`` of a prompt, from its member ``req`` (text cut at a stop string)."""
        sp = req.sampling_params
        text = ""
        if self.tokenizer is not None and sp.detokenize:
            shown = req.output_token_ids
            if stop_terminated(req) and not sp.include_stop_str_in_output:
                # vLLM 0.32 leaves the EOS or stop token that ended it out of the text (``token_ids`` keep it):
                # ``BaseIncrementalDetokenizer.update(..., stop_terminated)``, v1/engine/detokenizer.py:107
                shown = shown[:-1]
            text = output_text(self.tokenizer, list(shown), sp.skip_special_tokens)
        if isinstance(req.stop_reason, str) and req.stop_truncate_to != -1:
            text = text[: req.stop_truncate_to]  # where check_stop_strings cut it
        lps = self.logprobs.get(req.request_id) if sp.logprobs is not None else None
        cumulative = sum(e[t].logprob for e, t in zip(lps, req.output_token_ids)) if lps is not None else None
        return CompletionOutput(
            index=index,
            text=text,
            token_ids=list(req.output_token_ids),
            cumulative_logprob=cumulative,
            logprobs=None if lps is None else list(lps),
            finish_reason=req.get_finished_reason(),
            stop_reason=req.stop_reason,
        )

    # --- logprobs -----------------------------------------------------------------------------------
    def record_logprobs(self, last_logprobs: dict[str, list[TokenLogprobs]], scheduler: Scheduler) -> None:
        """Append this step's top log-probabilities (``ModelRunner.last_logprobs``) to each sampling
        request's list. An ``n > 1`` parent sampled its completions' first tokens from one row: entry i
        goes to completion i."""
        for rid, entries in last_logprobs.items():
            for i, entry in enumerate(entries):
                target = rid if i == 0 else self.member_group[rid].members[i].request_id
                earlier = self.logprobs.setdefault(target, [])
                req = scheduler.requests.get(target)
                if self.tokenizer is not None and req is not None and req.sampling_params.detokenize:
                    # vLLM 0.32 decodes each token of the entry (v1/engine/logprobs.py:97-106); the sampled
                    # token comes first in every earlier entry, the context of a split multi-byte character
                    fill_decoded_tokens(self.tokenizer, entry, [next(iter(e)) for e in earlier[-4:]])
                earlier.append(entry)

    # --- RequestOutput ------------------------------------------------------------------------------
    def partial_outputs(self, flat: dict[str, int], done: set[str]) -> list[RequestOutput]:
        """Cumulative outputs (``finished=False``) of the requests that got a token this step, but for
        those whose ``output_kind`` is ``FINAL_ONLY``."""
        gids = dict.fromkeys(self.member_group[rid].request_id for rid in flat if rid in self.member_group)
        groups = [self.groups[g] for g in gids if g in self.groups and g not in done]
        return [
            self.request_output(g, finished=False)
            for g in groups
            if g.members[0].sampling_params.output_kind is not RequestOutputKind.FINAL_ONLY
        ]

    def request_output(self, group: RequestGroup, finished: bool, now: float | None = None) -> RequestOutput:
        """The ``RequestOutput`` of ``group``'s completions so far (``finished_time=now``)."""
        first = group.members[0]
        metrics = RequestMetrics(
            arrival_time=group.arrival_time,
            first_scheduled_time=first.first_scheduled_time,
            first_token_time=first.first_token_time,
            last_token_time=first.token_times[-1] if first.token_times else None,
            finished_time=now,
            num_preemptions=sum(m.num_preemptions for m in group.members),
            token_times=list(first.token_times),
        )
        return RequestOutput(
            request_id=group.request_id,
            prompt=group.prompt,
            prompt_token_ids=group.prompt_token_ids,
            prompt_logprobs=None,
            outputs=[self.completion(i, m) for i, m in enumerate(group.members)],
            finished=finished,
            num_cached_tokens=max(first.num_cached_tokens, 0),
            pagedlab_metrics=metrics,
        )

    def finish(self, req: Request, now: float) -> tuple[RequestGroup, RequestOutput] | None:
        """Record that member ``req`` finished; when it was its prompt's last one (or an abort ended the
        prompt), forget the prompt and return its group and final output, else None."""
        group = self.member_group[req.request_id]
        group.finished_members[group.members.index(req)] = req
        if len(group.finished_members) < group.n and req.status != RequestStatus.FINISHED_ABORTED:
            return None
        if len(group.finished_members) < len(group.members):
            return None
        del self.groups[group.request_id]
        out = self.request_output(group, finished=True, now=now)
        for m in group.members:
            self.logprobs.pop(m.request_id, None)
            self.member_group.pop(m.request_id, None)
        return group, out
