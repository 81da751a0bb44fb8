"""Lab 05's speculative-decoding arithmetic: draft tokens are paid for out of the token budget.

With speculative decoding (vLLM 0.32.0: ``speculative_config={"num_speculative_tokens": k, ...}``)
every running request carries up to ``k`` draft tokens (``Request.spec_token_ids``) into the next
step, and the target model verifies them in the same forward pass. vLLM 0.32.0's
``Scheduler.schedule`` (``vllm/v1/core/sched/scheduler.py``) asks, for a running request,

    num_new_tokens = request.num_tokens_with_spec + request.num_output_placeholders
                     - request.num_computed_tokens

which for a decoding request is ``1 + k`` (its last sampled token plus its ``k`` drafts), clips it
to what is left of ``max_num_batched_tokens`` (``token_budget``) and, when the clip cuts into the
drafts, drops the drafts that no longer fit (``del request.spec_token_ids[n:]``). Running requests
are served first, in order; waiting requests' prefills get what is left. So ``k`` draft tokens per
decode cost ``k`` tokens of budget each, whether they are accepted or not.

:func:`spec_decode_schedule` replays that arithmetic for one step; :func:`expected_tokens_per_step`
is the expected number of tokens a request emits per step when each draft is accepted with
probability ``alpha`` independently (Leviathan et al., ICML 2023): ``(1 - alpha**(k+1)) / (1 - alpha)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pagedlab.sim.cost_model import CostModel


@dataclass(frozen=True)
class SpecStep:
    """One step's token counts (see :func:`spec_decode_schedule`).

    Attributes:
        decode: tokens scheduled per running request (``1 + drafts kept``; 0 when the budget ran out first).
        prefill: tokens scheduled per waiting request admitted.
    """

    decode: tuple[int, ...]
    prefill: tuple[int, ...]

    @property
    def drafts(self) -> tuple[int, ...]:
        """Draft tokens kept per running request."""
        return tuple(max(n - 1, 0) for n in self.decode)

    @property
    def decode_tokens(self) -> int:
        return sum(self.decode)

    @property
    def prefill_tokens(self) -> int:
        return sum(self.prefill)

    @property
    def unscheduled(self) -> int:
        """Running requests that got no token this step."""
        return sum(1 for n in self.decode if n == 0)


def spec_decode_schedule(
    num_running: int,
    num_spec_tokens: int,
    max_num_batched_tokens: int,
    prefill_waiting: Sequence[int] = (),
    draft_slots: int = 0,
) -> SpecStep:
    """One step's token counts as vLLM 0.32.0's ``Scheduler.schedule`` gives them, running requests first.

    Args:
        num_running: decoding requests, each with ``num_spec_tokens`` drafts proposed.
        num_spec_tokens: ``k``, draft tokens per request (0: no speculative decoding).
        max_num_batched_tokens: the step's token budget (``token_budget``, and ``input_budget``).
        prefill_waiting: prompt lengths of waiting requests, admitted in order with what is left
            (a prompt larger than the rest is chunked; chunked prefill on, no per-request threshold).
        draft_slots: vLLM 0.32.0's ``SpeculativeConfig.max_num_new_slots_for_drafting``: extra input
            slots each scheduled request reserves in ``input_budget`` for the drafter (0 for EAGLE,
            MTP and n-gram; 1 for a draft model; ``k - 1`` or ``k`` for parallel drafting).

    Returns:
        a :class:`SpecStep`.
    """
    if num_running < 0 or num_spec_tokens < 0 or draft_slots < 0 or max_num_batched_tokens < 1:
        raise ValueError(
            "need num_running, num_spec_tokens, draft_slots >= 0 and a budget >= 1, got "
            f"{num_running=}, {num_spec_tokens=}, {draft_slots=}, {max_num_batched_tokens=}"
        )
    token_budget = input_budget = max_num_batched_tokens

    def take(wanted: int) -> int:
        nonlocal token_budget, input_budget
        if token_budget <= 0 or input_budget <= draft_slots:
            return 0
        n = min(wanted, token_budget, input_budget - draft_slots)
        token_budget -= n
        input_budget -= n + draft_slots
        return n

    # num_tokens_with_spec - num_computed_tokens = 1 + k for a decoding request
    decode = tuple(take(1 + num_spec_tokens) for _ in range(num_running))
    prefill = []
    for prompt_len in prefill_waiting:
        n = take(prompt_len)
        if n == 0:
            break
        prefill.append(n)
    return SpecStep(decode, tuple(prefill))


def expected_tokens_per_step(num_spec_tokens: int, acceptance: float) -> float:
    """Expected tokens one request emits per step with ``k`` drafts each accepted with probability
    ``acceptance`` (independently; the first rejection ends the run, and the target model's own
    token is always emitted): ``1 + a + a**2 + ... + a**k``."""
    if not 0 <= acceptance <= 1:
        raise ValueError(f"acceptance must be in [0, 1], got {acceptance}")
    return sum(acceptance**i for i in range(num_spec_tokens + 1))


def spec_decode_tradeoff(
    cost_model: CostModel,
    num_running: int,
    context_len: int,
    max_num_batched_tokens: int,
    acceptance: float,
    ks: Sequence[int] = (0, 1, 2, 3, 4, 5, 6, 7),
) -> list[dict[str, float]]:
    """For each ``k``: the budget the decodes take, what is left for prefill, and the target model's
    step time (roofline, ``cost_model``) per emitted token. Draft-model cost is left out (an n-gram
    drafter costs almost nothing; a draft model adds its own steps).

    Returns:
        one row per ``k``: ``k``, ``decode_tokens``, ``prefill_budget`` (tokens left for prefills),
        ``tokens_per_step`` (expected, all requests), ``step_ms`` and ``ms_per_token``.
    """
    rows = []
    for k in ks:
        decode = spec_decode_schedule(num_running, k, max_num_batched_tokens).decode
        step = cost_model.step_time([(context_len, n) for n in decode if n])
        emitted = sum(expected_tokens_per_step(n - 1, acceptance) for n in decode if n)
        rows.append(
            {
                "k": k,
                "decode_tokens": float(sum(decode)),
                "prefill_budget": float(max_num_batched_tokens - sum(decode)),
                "tokens_per_step": emitted,
                "step_ms": step * 1e3,
                "ms_per_token": step * 1e3 / emitted,
            }
        )
    return rows
