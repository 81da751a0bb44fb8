"""Each lab's own workload on the kit and on real vLLM, for the labs' "and on vLLM" cell.

``on_vllm("04")`` builds lab 04's workload (:data:`LAB_WORKLOADS`), runs it on the kit and on the vLLM
the kit follows (``pagedlab.vllm_version``; one vLLM start, in a subprocess, ``pagedlab.twin.compare``)
and shows both traces in the lab's widget (:data:`LAB_WIDGETS`: the batch Gantt, or for labs 02 and 07
the block pool), the first divergence outlined (``pagedlab.twin.view``). Where
vLLM is not installed it prints why and how to install it (``make vllm``) and returns None, so the lab
runs everywhere.

The workloads are the labs' own prompts and engine settings, adapted to what vLLM-CPU runs: blocks of
32 tokens (vLLM 0.32's CPU attention takes only multiples of 32; the labs mostly use 16) with the pool
scaled to hold the same number of tokens, few generated tokens so the cell stays short, and
``num_gpu_blocks`` counting vLLM's null block (``EngineSettings``).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pagedlab import twin, vllm_version
from pagedlab.analysis.lab04 import chat_ids, load_prompts
from pagedlab.data import path as find_data
from pagedlab.sim import load_azure, scale_for_cpu, synthesize_prompts
from pagedlab.twin.hf_model import hf_model_dir
from pagedlab.twin.records import Divergence, EngineSettings, Trace, TwinRequest, Workload
from pagedlab.vllm_env import vllm_env
from pagedlab.vllm_version import VLLM_REQUIREMENT, VLLM_VERSION, vllm_python

__all__ = [
    "LAB_WIDGETS",
    "LAB_WORKLOADS",
    "first_shared_tokens",
    "install_hint",
    "lab_vllm_status",
    "lab_workload",
    "on_vllm",
    "run_script_on_vllm",
]


def _greedy(max_tokens: int) -> dict[str, Any]:
    return {"temperature": 0.0, "max_tokens": max_tokens, "ignore_eos": True}


def _chat(ids: list[str]) -> dict[str, list[int]]:
    """The prompts ``ids`` of ``data/prompts.jsonl`` under SmolLM2's chat template, as ``LLM.chat`` builds them."""
    from pagedlab.model.loader import load_model_cached  # lazy: start-up time (the loader imports torch)

    tok = load_model_cached(None)[1]
    prompts = load_prompts()
    return {pid: chat_ids(tok, prompts[pid]["messages"]) for pid in ids}


def _lab02() -> Workload:
    """Lab 02's three chat prompts, two seats, no prefix caching, a pool of 8 blocks of 32 (lab: 20 of 8)."""
    from pagedlab.model.loader import load_model_cached  # lazy: start-up time (the loader imports torch)

    tok = load_model_cached(None)[1]
    texts = [
        "Give me three tips for staying focused while studying.",
        "What does a CPU cache do?",
        "What is a linked list and when would you use one?",
    ]
    reqs = [
        TwinRequest(str(i), chat_ids(tok, [{"role": "user", "content": t}]), _greedy(m))
        for i, (t, m) in enumerate(zip(texts, (8, 12, 10)))
    ]
    return Workload("lab02_block_pool", EngineSettings(num_gpu_blocks=9, max_num_seqs=2), reqs)


def _lab04() -> Workload:
    """Lab 04's continuous batching: eight of its chat prompts at once, four seats (answers cut to 2-8 tokens)."""
    p = _chat([f"q{i:02d}" for i in range(8)])
    reqs = [TwinRequest(pid, ids, _greedy(2 + i % 7)) for i, (pid, ids) in enumerate(p.items())]
    return Workload("lab04_continuous", EngineSettings(num_gpu_blocks=65, max_num_seqs=4), reqs)


def _lab05() -> Workload:
    """Lab 05's stall: three short prompts decode while the long s07 arrives at step 4, chunked at 48 tokens."""
    p = _chat(["q01", "q02", "q03", "s07"])
    reqs = [TwinRequest(pid, p[pid], _greedy(12)) for pid in ("q01", "q02", "q03")]
    reqs.append(TwinRequest("s07", p["s07"], _greedy(4), arrival_step=4))
    settings = EngineSettings(
        num_gpu_blocks=33, max_num_seqs=4, max_num_batched_tokens=512, long_prefill_token_threshold=48
    )
    return Workload("lab05_chunked_prefill", settings, reqs)


def _lab06() -> Workload:
    """Lab 06's pressure: q00-q03 (requests 0-3) in a pool of 7 usable blocks of 32, recompute preemption."""
    p = _chat(["q00", "q01", "q02", "q03"])
    reqs = [TwinRequest(str(i), ids, _greedy(30)) for i, ids in enumerate(p.values())]
    return Workload("lab06_preemption", EngineSettings(num_gpu_blocks=8, max_num_seqs=4), reqs)


def _lab07() -> Workload:
    """Lab 07's prefix hits on the real engine: three chat prompts, then the same three again at step 6."""
    p = _chat(["q02", "q04", "q05"])
    reqs = [TwinRequest(f"{pid}", ids, _greedy(4)) for pid, ids in p.items()]
    reqs += [TwinRequest(f"{pid}-again", ids, _greedy(4), arrival_step=6) for pid, ids in p.items()]
    return Workload("lab07_prefix_caching", EngineSettings(num_gpu_blocks=25, enable_prefix_caching=True), reqs)


#: Engine steps per second of the Azure slice's (scaled) arrival times in lab 09's twin workload: the
#: twin plays arrivals by step, not by wall clock.
LAB09_STEPS_PER_SECOND = 8.0


def _lab09() -> Workload:
    """Lab 09's Azure slice (12 requests, scaled for a CPU, a shared 32-token system prompt), prefix caching on.

    Answers are cut to 2-6 tokens (at least 2: the twin's vLLM side reads a request's first chunk from
    vLLM's scheduler after the step, and a request that finishes in its first step has left it).
    """
    from pagedlab.model.loader import load_model_cached  # lazy: start-up time (the loader imports torch)

    trace = load_azure(find_data("azure2023_AzureLLMInferenceTrace_conv.csv"), limit=12)
    scaled = scale_for_cpu(trace, max_prompt=96, max_output=12, time_scale=0.5)
    tok = load_model_cached(None)[1]
    system_text = (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face. "
        "Answer briefly and clearly, and say so when you do not know the answer.<|im_end|>\n"
    )
    system_ids = list(tok(system_text)["input_ids"][:32])
    tails = synthesize_prompts(scaled, _vocab_size(), seed=0, min_token_id=1000)
    t0 = scaled[0].arrival_time
    reqs = [
        TwinRequest(
            str(i),
            system_ids + list(tail),
            _greedy(max(2, min(r.output_len, 6))),
            arrival_step=round((r.arrival_time - t0) * LAB09_STEPS_PER_SECOND),
        )
        for i, (r, tail) in enumerate(zip(scaled, tails))
    ]
    settings = EngineSettings(num_gpu_blocks=25, max_num_seqs=4, enable_prefix_caching=True)
    return Workload("lab09_azure_slice", settings, reqs)


def _vocab_size() -> int:
    from pagedlab.model.loader import load_model_cached  # lazy: start-up time (the loader imports torch)

    return int(load_model_cached(None)[0].config.vocab_size)


#: The widget each lab's cell draws the two traces in (``pagedlab.twin.view.WIDGETS``): the lab's own.
LAB_WIDGETS: dict[str, str] = {"02": "pool", "04": "gantt", "05": "gantt", "06": "gantt", "07": "prefix", "09": "gantt"}

#: Lab number -> the builder of its twin workload.
LAB_WORKLOADS: dict[str, Callable[[], Workload]] = {
    "02": _lab02,
    "04": _lab04,
    "05": _lab05,
    "06": _lab06,
    "07": _lab07,
    "09": _lab09,
}


def lab_workload(lab: str) -> Workload:
    """Lab ``lab``'s twin workload. Raises ValueError for a lab without one (the list is :data:`LAB_WORKLOADS`)."""
    key = str(lab).zfill(2)
    if key not in LAB_WORKLOADS:
        raise ValueError(f"no twin workload for lab {lab!r}; labs with one: {sorted(LAB_WORKLOADS)}")
    return LAB_WORKLOADS[key]()


def install_hint(why: str) -> str:
    """What the lab cell prints where real vLLM is not usable: why, and the command that installs it."""
    then = f"then re-run this cell (with {LAB_VLLM_ENV} unset or 'on')."
    if not vllm_version.in_checkout():  # a pip install: no Makefile, so the steps `make vllm` runs, by hand
        return (
            f"Real vLLM {VLLM_VERSION} did not run this cell: {why}.\n"
            f"To run it, install {VLLM_REQUIREMENT} (the CPU build, 3.4 GB) in its own venv: "
            f"{vllm_version.install_steps(checkout=False)}; {then}"
        )
    return (
        f"Real vLLM {VLLM_VERSION} did not run this cell: {why}.\n"
        f"To run it: `make vllm` in the kit's checkout installs {VLLM_REQUIREMENT} (the CPU build, about "
        f"3.5 minutes, 3.4 GB) into its own .venv-vllm and prepares the fp32 model folder vLLM loads; {then}"
    )


#: ``PAGEDLAB_LAB_VLLM=off`` keeps the labs' vLLM cells on their not-installed branch even where vLLM is
#: installed: the test suite's notebook run sets it (``solutions/conftest.py``), because
#: ``tests/twin/test_lab_cells.py`` runs every lab's workload on real vLLM in one vLLM start instead of one
#: per notebook.
LAB_VLLM_ENV = "PAGEDLAB_LAB_VLLM"


def lab_vllm_status() -> tuple[bool, str]:
    """Whether the labs' "On real vLLM" cells run vLLM here: ``pagedlab.twin.vllm_status`` unless
    ``PAGEDLAB_LAB_VLLM=off`` (benchmarks/lab_footprint.py names its results by it).

    Raises:
        ValueError: ``PAGEDLAB_LAB_VLLM`` is neither 'on' nor 'off'.
    """

    setting = os.environ.get(LAB_VLLM_ENV, "on").strip().lower()
    if setting not in ("on", "off"):
        raise ValueError(f"{LAB_VLLM_ENV} must be 'on' or 'off', got {setting!r}")
    if setting == "off":
        return False, f"switched off by {LAB_VLLM_ENV}=off"
    return twin.vllm_status()  # looked up at the call (tests replace it)


def on_vllm(lab: str, *, show: bool = True) -> tuple[Trace, Trace, Divergence | None] | None:
    """Run lab ``lab``'s workload on the kit and on real vLLM and show both traces side by side.

    Returns ``(kit trace, vLLM trace, first divergence or None)``, or None (after printing
    :func:`install_hint`) where vLLM is not installed. ``show=False`` only returns.

    Raises:
        ValueError: no workload for ``lab``.
        RuntimeError: the vLLM process failed (``pagedlab.twin.run_on_vllm``).
    """
    ok, why = lab_vllm_status()
    if not ok:
        print(install_hint(why))
        return None
    workload = lab_workload(lab)
    kit, vllm, found = twin.compare(workload)[0]
    if show:
        from IPython.display import HTML, display  # lazy: IPython only where the cell displays

        from pagedlab.twin.view import render_twin  # lazy: the SVG renderers load only when a cell shows them

        print(f"{len(workload.requests)} requests; engine settings {workload.engine.engine_args()}")
        display(
            HTML(
                render_twin(
                    kit,
                    vllm,
                    found,
                    max_num_batched_tokens=workload.engine.max_num_batched_tokens,
                    title=f"lab {str(lab).zfill(2)} on the kit and on vLLM {VLLM_VERSION}",
                    widget=LAB_WIDGETS[str(lab).zfill(2)],
                )
            )
        )
    return kit, vllm, found


def run_script_on_vllm(script: str | Path, args: list[str] | None = None, *, timeout: float = 900.0) -> str | None:
    """Run the vLLM script ``script`` unchanged on real vLLM (``pagedlab/twin/script_on_vllm.py``), return its stdout.

    Where vLLM is not installed, prints :func:`install_hint` and returns None. The script runs in a
    subprocess under ``pagedlab.vllm_version.vllm_python()`` with the local fp32 model folder in place
    of the hub id it names and the twin's CPU settings (fp32, eager, an explicit KV budget).

    Raises:
        RuntimeError: the script failed on vLLM (its last output lines are in the message) or timed out.
    """

    ok, why = lab_vllm_status()
    if not ok:
        print(install_hint(why))
        return None
    runner = Path(__file__).with_name("script_on_vllm.py")
    cmd = [str(vllm_python()), "-I", str(runner), str(hf_model_dir()), str(script), *(args or [])]
    env = vllm_env()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=Path(script).parent)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"{script} did not finish on vLLM in {timeout:.0f} s") from e
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-25:])
        raise RuntimeError(f"{script} failed on vLLM {VLLM_VERSION} (exit {done.returncode}):\n{tail}")
    return done.stdout


def first_shared_tokens(kit: list[int], vllm: list[int]) -> int:
    """How many leading token ids two completions share (the length of the shorter when one is a prefix)."""
    return next((i for i, (a, b) in enumerate(zip(kit, vllm)) if a != b), min(len(kit), len(vllm)))
