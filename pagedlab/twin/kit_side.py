"""The kit's side of the twin runner: a workload on ``pagedlab.LLMEngine``, built from vLLM's engine arguments."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

from pagedlab.engine.arg_utils import EngineArgs
from pagedlab.engine.llm_engine import LLMEngine
from pagedlab.model.llama import LlamaForCausalLM
from pagedlab.model.loader import load_hf_folder
from pagedlab.sampling_params import SamplingParams
from pagedlab.sched.scheduler import SchedulerOutput
from pagedlab.twin.records import Completion, StepRecord, Trace, TwinRequest, Workload, drive, record_pool

__all__ = ["KitAdapter", "hf_folder_model", "run_on_kit"]


class KitAdapter:
    """``records.Adapter`` over a kit engine; wraps ``Scheduler.schedule`` to record each step's decisions."""

    name = "kit"

    def __init__(self, workload: Workload, **extra: Any) -> None:
        # n > 1 as vLLM 0.32 runs it (n child requests sharing the prompt through the prefix cache), not
        # the kit's default copy-on-write fork
        extra = {"parallel_sampling": "requests", **extra}
        args = EngineArgs(**workload.engine.engine_args(), enforce_eager=True, dtype="float32", seed=0, **extra)
        self.engine = LLMEngine.from_engine_args(args)
        self._seen: set[str] = set()
        self._last: SchedulerOutput | None = None
        self._pool: tuple[dict[str, list[int]], list[int], list[int]] = ({}, [], [])
        sched = self.engine.scheduler
        schedule = sched.schedule

        def recorded_schedule() -> SchedulerOutput:
            self._last = schedule()
            self._pool = self._read_pool()
            return self._last

        sched.schedule = recorded_schedule  # type: ignore[method-assign]

    def _read_pool(self) -> tuple[dict[str, list[int]], list[int], list[int]]:
        """Block tables, free queue (front first) and hashed blocks, as ``records.record_pool`` takes them."""
        kvm = self.engine.kv_cache_manager
        tables = {rid: kvm.get_block_ids(rid) for rid in kvm.req_to_blocks}
        pool = kvm.block_pool
        free = [b.block_id for b in pool.free_block_queue.get_all_free_blocks()]
        return tables, free, [b.block_id for b in pool.blocks if b.block_hash is not None]

    def add(self, request: TwinRequest) -> None:
        params = SamplingParams(**request.sampling)
        self.engine.add_request(
            request.request_id, {"prompt_token_ids": request.prompt_token_ids}, params, priority=request.priority
        )

    def abort(self, request_id: str) -> None:
        self.engine.abort_request([request_id])

    def num_free_blocks(self) -> int:
        return int(self.engine.kv_cache_manager.num_free_blocks)

    def has_unfinished(self) -> bool:
        return self.engine.has_unfinished_requests()

    def step(self, record: StepRecord) -> list[tuple[str, list[Completion], bool]]:
        self._last = None
        outputs = self.engine.step()
        out = self._last
        if out is not None:
            for s in out.scheduled:
                rid = s.request.request_id
                record.scheduled.append([rid, s.num_tokens])
                if rid not in self._seen:
                    self._seen.add(rid)
                    record.num_cached_tokens[rid] = max(s.request.num_cached_tokens, 0)
            record.preempted.extend(out.preempted)
            record_pool(record, *self._pool, self.engine.cache_config.block_size)
        return [
            (o.request_id, [(c.index, list(c.token_ids), c.finish_reason) for c in o.outputs], o.finished)
            for o in outputs
        ]


@functools.lru_cache(maxsize=2)
def hf_folder_model(folder: str) -> tuple[LlamaForCausalLM, int | None]:
    """The kit's model of a Hugging Face folder and its ``eos_token_id``, loaded once per folder."""
    eos = json.loads((Path(folder) / "config.json").read_text()).get("eos_token_id")
    return load_hf_folder(folder), eos


def run_on_kit(workload: Workload, model: str | os.PathLike[str] | None = None, **extra: Any) -> Trace:
    """The kit's trace of ``workload`` with the Hugging Face model folder ``model`` (None: the kit's
    SmolLM2); ``extra``: more ``EngineArgs``, e.g. the kit's extensions."""
    if model is not None:
        net, eos = hf_folder_model(str(Path(model).resolve()))
        extra = {"model": net, "eos_token_id": eos, **extra}
    return drive(workload, KitAdapter(workload, **extra))
