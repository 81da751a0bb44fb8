"""A request as the scheduler and the KV-cache manager see it (as vLLM v1 ``vllm/v1/request.py``)."""

from __future__ import annotations

import enum
from collections.abc import Callable

from pagedlab.sampling_params import SamplingParams


class RequestStatus(enum.IntEnum):
    """Life cycle of a request. ``SWAPPED`` is vLLM v0's; v1 has no swap preemption."""

    WAITING = enum.auto()
    RUNNING = enum.auto()
    PREEMPTED = enum.auto()
    SWAPPED = enum.auto()
    # Everything after this point is finished.
    FINISHED_STOPPED = enum.auto()
    FINISHED_LENGTH_CAPPED = enum.auto()
    FINISHED_ABORTED = enum.auto()

    @staticmethod
    def is_finished(status: RequestStatus) -> bool:
        return status > RequestStatus.SWAPPED

    @staticmethod
    def get_finished_reason(status: RequestStatus) -> str | None:
        """vLLM's ``finish_reason`` strings: "stop", "length", "abort" (None while unfinished)."""
        return {
            RequestStatus.FINISHED_STOPPED: "stop",
            RequestStatus.FINISHED_LENGTH_CAPPED: "length",
            RequestStatus.FINISHED_ABORTED: "abort",
        }.get(status)


BlockHasher = Callable[["Request"], list[bytes]]


class Request:
    """One sequence being served.

    The scheduler closes the gap between ``num_computed_tokens`` (tokens whose KV is in the
    cache) and ``num_tokens`` (prompt + generated tokens) a chunk at a time; prefill, chunked
    prefill, decode and resumption after preemption are all the same rule (vLLM v1).

    Args:
        request_id: unique id (str).
        prompt_token_ids: prompt token ids, length >= 1.
        sampling_params: how to sample; ``max_tokens`` caps the output.
        arrival_time: seconds (any clock, compared only with other requests' arrival times).
        priority: for ``policy="priority"``; lower is more important (vLLM).
        eos_token_id: token that stops the request unless ``ignore_eos``.
        block_hasher: returns the hashes of the *new* full blocks of this request (see
            ``pagedlab.core.hashing.get_request_block_hasher``); ``None`` disables hashing.
        cache_salt: isolates this request's prefix-cache entries from other tenants'.
        lora_name: name of an adapter; part of the block hash (no adapters are actually applied).
    """

    def __init__(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        sampling_params: SamplingParams | None = None,
        arrival_time: float = 0.0,
        priority: int = 0,
        eos_token_id: int | None = None,
        block_hasher: BlockHasher | None = None,
        cache_salt: str | None = None,
        lora_name: str | None = None,
    ) -> None:
        self.request_id = request_id
        self.sampling_params = sampling_params or SamplingParams()
        self.arrival_time = arrival_time
        self.priority = priority
        self.eos_token_id = eos_token_id
        self.cache_salt = cache_salt
        self.lora_name = lora_name
        self.prompt_token_ids: list[int] = list(prompt_token_ids)
        self.num_prompt_tokens = len(self.prompt_token_ids)
        self._output_token_ids: list[int] = []
        self._all_token_ids: list[int] = list(self.prompt_token_ids)
        self.max_tokens = self.sampling_params.max_tokens

        self.status = RequestStatus.WAITING
        self.num_computed_tokens = 0
        # Prompt tokens served from the prefix cache at first scheduling; -1 until then.
        self.num_cached_tokens = -1
        self.num_preemptions = 0
        self.stop_reason: object | None = None
        # Where a stop string cut the text (vLLM 0.32.0's check_stop_strings offset; -1: not cut).
        self.stop_truncate_to = -1

        # Latency metrics (seconds, engine clock); filled by the engine.
        self.first_scheduled_time: float | None = None
        self.first_token_time: float | None = None
        self.token_times: list[float] = []
        self.finished_time: float | None = None

        self.block_hashes: list[bytes] = []
        self._block_hasher = block_hasher
        self.update_block_hashes()

    # --- tokens -------------------------------------------------------------------------
    @property
    def num_tokens(self) -> int:
        """Prompt plus output tokens."""
        return len(self._all_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self._output_token_ids)

    @property
    def output_token_ids(self) -> list[int]:
        return self._output_token_ids

    @property
    def all_token_ids(self) -> list[int]:
        return self._all_token_ids

    def append_output_token_ids(self, token_ids: int | list[int]) -> None:
        """Append sampled token(s) and hash any block they complete (vLLM v1 behaviour)."""
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        self._output_token_ids.extend(token_ids)
        self._all_token_ids.extend(token_ids)
        self.update_block_hashes()

    def update_block_hashes(self) -> None:
        if self._block_hasher is not None:
            self.block_hashes.extend(self._block_hasher(self))

    # --- status -------------------------------------------------------------------------
    def is_finished(self) -> bool:
        return RequestStatus.is_finished(self.status)

    def get_finished_reason(self) -> str | None:
        return RequestStatus.get_finished_reason(self.status)

    def __repr__(self) -> str:
        return (
            f"Request({self.request_id!r}, status={self.status.name}, tokens={self.num_tokens}, "
            f"computed={self.num_computed_tokens})"
        )
