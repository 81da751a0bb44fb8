"""Lab 09's capstone: SmolLM2 served on *your* engine - every part you wrote in labs 02-08 that passes
its ``check()`` - checked against HF transformers and the memory-invariance rules, and timed
against the kit's engine.

::

    from pagedlab.course.capstone import capstone
    report = capstone()          # reads your lab notebooks next to this one; prints the tables

Where the parts come from: the exercise cells of the lab notebooks in ``folder`` (default: the
folder of the running notebook, i.e. ``labs/`` for a learner, ``solutions/`` for the kit), pulled
out and run as the grader does (:mod:`pagedlab.grading.extract`), each ``check()``-ed here. A part
that does not pass is replaced by the kit's, and the table says so.

Runs: the invariance rows (``INVARIANCE``) on the CPU backend, where lab 08's Triton tile load does not
run (its slot goes back to the kit's in those rows); when that tile load is yours, one more row serves
one prompt on the kit's Triton decode kernel with your load inside (Triton's interpreter on CPU).

HF parity: HF transformers' greedy tokens for the capstone prompts are recorded in
``data/capstone_hf_greedy.json`` (``python -m pagedlab.course.capstone --record-hf`` writes it with
``AutoModelForCausalLM.generate`` on the bundled GGUF; loading transformers takes ~30 s, too slow
for a notebook cell). ``tests/components/test_capstone.py`` checks the file against a live HF run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import torch

from pagedlab import LLM, data
from pagedlab.errors import ComponentError
from pagedlab.grading import registry, serve
from pagedlab.grading.checking import check, record_result
from pagedlab.grading.extract import exercise_names, find_exercises, load_exercises, read_notebook
from pagedlab.grading.plug import BRIDGES, learner_components, render_component_state
from pagedlab.grading.triton_mode import use_interpreter_without_gpu
from pagedlab.i18n.messages import tr_lines
from pagedlab.model.hf_reference import hf_greedy, load_hf_model
from pagedlab.model.loader import load_tokenizer
from pagedlab.parts.schedule import PreemptingStep
from pagedlab.parts.slots import Components

__all__ = ["capstone", "CapstoneReport", "CAPSTONE_PROMPTS", "HF_FILE", "load_learner_parts", "record_hf_reference"]

#: The first 8 user prompts of ``data/prompts.jsonl``.
CAPSTONE_PROMPTS: list[str] = [
    json.loads(line)["messages"][-1]["content"]
    for line in data.path("prompts.jsonl").read_text(encoding="utf-8").splitlines()[:8]
]
MAX_TOKENS = 6
HF_FILE = "capstone_hf_greedy.json"


def _engine() -> dict[str, Any]:
    """The capstone's engine: ``serve.BASE`` with prefix caching off (the caching rows turn it on)."""
    return {**serve.BASE, "enable_prefix_caching": False}


#: (check, engine arguments, slots that must be the kit's in this run and why). A row with a
#: ``preemption_mode`` runs on :func:`~pagedlab.grading.serve.forced_preemption`'s pool.
INVARIANCE: list[tuple[str, dict[str, Any], dict[str, str]]] = [
    ("block_size 1", {"block_size": 1, "num_gpu_blocks": 2048}, {}),
    ("block_size 16, caching off", {"block_size": 16}, {}),
    ("block_size 32", {"block_size": 32, "num_gpu_blocks": 64}, {}),
    (
        "prefix caching hash",
        {"enable_prefix_caching": True, "prefix_cache": "hash"},
        {"schedule_step": "your step does not look prefix hits up"},
    ),
    (
        "prefix caching radix",
        {"enable_prefix_caching": True, "prefix_cache": "radix"},
        {"schedule_step": "your step does not look prefix hits up"},
    ),
    (
        "forced recompute preemption",
        {"preemption_mode": "recompute"},
        {"schedule_step": "your step does not preempt"},
    ),
    (
        "forced swap preemption",
        {"preemption_mode": "swap", "num_cpu_blocks": 64},
        {"schedule_step": "your step does not preempt"},
    ),
]


@dataclass
class Row:
    """One engine run of the capstone."""

    check: str
    same_as_hf: bool
    yours: list[str]
    seconds: float
    note: str = ""
    preempted: int = 0


@dataclass
class CapstoneReport:
    """Everything the capstone measured (``passed``: every run equals HF)."""

    components: Components
    notes: list[str]
    rows: list[Row] = field(default_factory=list)
    kit_seconds: float = 0.0
    yours_seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return bool(self.rows) and all(r.same_as_hf for r in self.rows)

    @property
    def speed_ratio(self) -> float:
        return self.yours_seconds / self.kit_seconds if self.kit_seconds else float("nan")

    def text(self) -> str:
        lines = [
            "Your engine:",
            self.components.table(),
            *("  note - " + n for n in self.notes),
            "",
            f"{'check':<28} {'= HF':<5} {'time':>6}  your parts in this run",
        ]
        for r in self.rows:
            mark = "✅" if r.same_as_hf else "❌"
            extra = f"  ({r.note})" if r.note else ""
            pre = f" [{r.preempted} preemptions]" if r.preempted else ""
            lines.append(f"{r.check:<28} {mark:<5} {r.seconds:>5.1f}s  {', '.join(r.yours) or '-'}{pre}{extra}")
        lines.append(
            f"\nSpeed: your engine {self.yours_seconds:.1f}s, the kit's {self.kit_seconds:.1f}s "
            f"(ratio {self.speed_ratio:.2f}) for {len(CAPSTONE_PROMPTS)} prompts x {MAX_TOKENS} tokens"
        )
        return "\n".join(lines)


#: The exercises that need Triton to run (lab 08's ``@triton.jit`` helper).
TRITON_EXERCISES = ("08.triton_load_kv_tile",)

#: Run in a fresh Python: load one exercise cell from its notebook and ``check()`` it as its lab's kernel does
#: (Triton's interpreter switched on before anything imports triton where there is no GPU: the lab's first cell).
_CHECK_AS_IN_ITS_LAB = """
import json, sys
from pathlib import Path
from pagedlab.grading.triton_mode import use_interpreter_without_gpu
use_interpreter_without_gpu()
from pagedlab.grading.checking import check
from pagedlab.grading.extract import exercise_names, find_exercises, load_exercises, read_notebook
exercise_id, notebook = json.loads(sys.stdin.read())
names = exercise_names([exercise_id])
ext = find_exercises(read_notebook(Path(notebook)), names)
ext.cells = {k: v for k, v in ext.cells.items() if k == exercise_id}
item = load_exercises(ext, names, namespace={})[exercise_id]
result = check(item.obj, exercise_id, show=False, pictures=False)
print(json.dumps({"passed": result.passed, "text": result.text()}))
"""


def check_as_in_its_lab(exercise_id: str, notebook: Path, timeout: float = 600.0) -> tuple[bool, str]:
    """Load exercise ``exercise_id`` from ``notebook`` and ``check()`` it in a fresh Python set up as its lab's
    kernel: for a part this process cannot run as its lab did (lab 09's kernel imported triton compiled for a
    GPU that is not there; lab 08's had switched Triton's interpreter on first).

    Returns:
        ``(passed, the check's report or why it did not run)``.
    """

    proc = subprocess.run(
        [sys.executable, "-c", _CHECK_AS_IN_ITS_LAB],
        input=json.dumps([exercise_id, str(notebook)]),
        env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"},  # the lab's own setup decides it
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    try:
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        return bool(got["passed"]), str(got["text"])
    except (IndexError, KeyError, TypeError, ValueError):
        return False, f"check() did not run in a fresh Python (exit status {proc.returncode}): {proc.stderr[-500:]}"


def load_learner_parts(folder: Path) -> tuple[dict[str, Any], list[str]]:
    """Load and ``check()`` the exercises of ``BRIDGES`` from the lab notebooks in ``folder``.

    Returns:
        ``({name: object}, notes)``: the loaded objects under their exercise names (check results are
        recorded, so :func:`learner_components` plugs the passing ones) and one note per problem.

    Each part is checked as its own lab checked it. Triton's interpreter is switched on first where there is no
    GPU and nothing imported triton yet (lab 08's first cell, which does it there, is not an exercise cell);
    where triton was imported compiled for a GPU that is not there (lab 09's kernel), the Triton part is
    checked in a fresh Python set up as lab 08's kernel (:func:`check_as_in_its_lab`).
    """

    triton_runs_here = triton_runs_in_this_process()  # as `pagedlab grade` does: lab 08's Triton cell is below
    known = {ex.id for ex in registry.all_exercises()}
    names = exercise_names([eid for eid in BRIDGES if eid in known])
    ns: dict[str, Any] = {}
    notes: list[str] = []
    for nb_path in sorted(folder.glob("0[2-8]_*.ipynb")):
        ext = find_exercises(read_notebook(nb_path), names)
        ext.cells = {k: v for k, v in ext.cells.items() if k in names}
        if not ext.cells:
            continue
        loaded = load_exercises(ext, {k: v for k, v in names.items() if k in ext.cells}, namespace={})
        for eid, item in loaded.items():
            if not item.ok:
                notes.append(f"{eid} ({nb_path.name}): {item.error or 'not defined'}")
                continue
            if eid in TRITON_EXERCISES and not triton_runs_here:
                passed, _ = check_as_in_its_lab(eid, nb_path)
                record_result(eid, item.obj, passed)
            else:
                check(item.obj, eid, show=False, pictures=False)
            ns[registry.get(eid).name] = item.obj
    return ns, notes


def triton_runs_in_this_process() -> bool:
    """Whether this process can run Triton kernels: a GPU, or Triton's interpreter (switched on first if nothing
    imported triton yet, :func:`~pagedlab.grading.triton_mode.use_interpreter_without_gpu`)."""

    return use_interpreter_without_gpu() or torch.cuda.is_available()


def _run(
    check_name: str,
    comps: Components,
    kw: dict[str, Any],
    kit_only: dict[str, str],
    prompts: list[list[int]],
    hf: list[list[int]],
) -> Row:
    """One invariance run: ``comps`` with the ``kit_only`` slots given back to the kit."""
    notes = []
    kw = {**_engine(), **kw}
    if "preemption_mode" in kw:
        kw, _ = serve.forced_preemption(prompts, MAX_TOKENS, kw)
    if not serve.runs_under("triton_tile_load", kw) and comps.is_yours("triton_tile_load"):
        comps = comps.with_kit("triton_tile_load")  # it runs only inside the Triton kernel: not in this row
    for slot, why in kit_only.items():
        preempts = isinstance(comps.parts[slot].impl, PreemptingStep) and "preemption_mode" in kw
        if comps.is_yours(slot) and not preempts:  # lab 06's whole step preempts: it stays in those rows
            comps = comps.with_kit(slot)
            notes.append(f"kit's {slot}: {why}")
    used = [s for s in comps.learner_slots if serve.runs_under(s, kw)]
    res = serve.serve_and_compare(comps, [], kw, MAX_TOKENS, prompt_ids=prompts, reference=hf)
    if res.error:
        return Row(check_name, False, used, 0.0, res.error.splitlines()[0])
    if "preemption_mode" in kw and not res.preempted:
        return Row(check_name, False, used, res.seconds, f"{serve.DID_NOT_RUN['preempted']}: the check did not run")
    return Row(check_name, res.same, used, res.seconds, "; ".join(notes), res.preempted)


TRITON_ROW = "Triton kernel, 1 prompt"


def _triton_row(comps: Components, prompts: list[list[int]], hf: list[list[int]]) -> Row:
    """The run of one prompt on the kit's Triton decode kernel with lab 08's tile load inside."""
    return _run(TRITON_ROW, comps, {"attention_backend": "triton"}, {}, prompts[:1], hf[:1])


def _triton_row_in_a_fresh_process(folder: Path | None) -> Row:
    """:func:`_triton_row` in a fresh Python that loads and checks the parts from the notebooks in ``folder``
    itself, Triton's interpreter switched on first where there is no GPU (``--triton-row``): for a process that
    cannot run Triton. Without notebooks (parts given as objects) the row cannot be run here, and says so."""

    if folder is None:
        return Row(TRITON_ROW, False, [], 0.0, "cannot be checked here: this process cannot run Triton")
    proc = subprocess.run(
        [sys.executable, "-m", "pagedlab.course.capstone", "--triton-row", str(folder)],
        env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"},
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    try:
        return Row(**json.loads(proc.stdout.strip().splitlines()[-1]))
    except (IndexError, TypeError, ValueError):
        return Row(TRITON_ROW, False, [], 0.0, f"did not run in a fresh Python: {proc.stderr.strip()[-300:]}")


def hf_reference() -> list[list[int]]:
    """The recorded HF greedy tokens of the capstone prompts (see the module docstring)."""
    rows = json.loads(data.path(HF_FILE).read_text(encoding="utf-8"))
    if [r["prompt"] for r in rows] != CAPSTONE_PROMPTS:
        raise ValueError(f"{HF_FILE} was recorded for other prompts: re-record it (--record-hf)")
    return [r["tokens"][:MAX_TOKENS] for r in rows]


def _time_both(report: CapstoneReport, kit: Any, yours: Any, prompts: list[list[int]]) -> None:
    """The faster of two interleaved timed runs of each engine, after a warm-up; a guard that trips
    leaves ``yours_seconds`` at 0 and a note."""

    try:
        (
            serve.generate_ids(kit, prompts[:1], MAX_TOKENS),
            serve.generate_ids(yours, prompts[:1], MAX_TOKENS),
        )  # warm both up
        kit_s, yours_s = [], []
        for _ in range(2):
            kit_s.append(serve.generate_ids(kit, prompts, MAX_TOKENS)[1])
            yours_s.append(serve.generate_ids(yours, prompts, MAX_TOKENS)[1])
    except ComponentError as e:
        report.notes.append(f"speed not measured: {str(e).splitlines()[0]}")
        return
    report.kit_seconds, report.yours_seconds = min(kit_s), min(yours_s)


def capstone(folder: Any = None, *, show: bool = True, namespace: dict[str, Any] | None = None) -> CapstoneReport:
    """Build your engine from your lab notebooks and run the capstone checks (see the module docstring).

    Args:
        folder: where your lab notebooks are (default: the current directory).
        show: print the report.
        namespace: use these objects instead of loading notebooks (tests).
    """

    notes: list[str] = []
    notebooks = Path(folder or ".").resolve() if namespace is None else None
    if namespace is None:
        namespace, notes = load_learner_parts(Path(folder or ".").resolve())
    comps, more = learner_components(namespace)
    comps = replace(comps, render=render_component_state)
    report = CapstoneReport(comps, notes + more)
    kit = LLM(**_engine())
    prompts = serve.chat_ids(CAPSTONE_PROMPTS)
    hf = hf_reference()
    for name, kw, kit_only in INVARIANCE:
        report.rows.append(_run(name, comps, kw, kit_only, prompts, hf))
    if comps.is_yours("triton_tile_load"):  # lab 08's @triton.jit load in the kit's kernel (interpreted: 1 prompt)
        if triton_runs_in_this_process():
            report.rows.append(_triton_row(comps, prompts, hf))
        else:  # lab 09's kernel imported triton compiled, without a GPU: run it as lab 08's kernel would
            report.rows.append(_triton_row_in_a_fresh_process(notebooks))
    _time_both(report, kit, LLM(components=comps, **_engine()), prompts)
    if show:
        print(tr_lines(report.text()))  # in the learner's language (pagedlab.i18n); report.text() stays English
    return report


def record_hf_reference(max_new_tokens: int = 24) -> Path:
    """Run HF transformers' greedy ``generate`` on the capstone prompts and write ``data/HF_FILE``."""

    tok = load_tokenizer()
    hf = load_hf_model()
    rows = []
    for p in CAPSTONE_PROMPTS:
        enc = tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=True)
        # tokenize=True: token ids, wrapped in a BatchEncoding by some transformers versions
        ids = cast(list[int], list(enc["input_ids"] if isinstance(enc, Mapping) else enc))
        rows.append({"prompt": p, "tokens": hf_greedy(hf, ids, max_new_tokens)})
    target = data.directory() / HF_FILE
    target.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return target


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="lab 09 capstone")
    ap.add_argument("--record-hf", action="store_true", help=f"(re)write data/{HF_FILE} with HF transformers")
    ap.add_argument("--triton-row", action="store_true", help="only the Triton kernel row, printed as JSON")
    ap.add_argument("folder", nargs="?", default=None)
    a = ap.parse_args()
    if a.record_hf:
        print(f"wrote {record_hf_reference()}")
    elif a.triton_row:
        triton_runs_in_this_process()  # first: switches the interpreter on where there is no GPU
        parts, _ = load_learner_parts(Path(a.folder or ".").resolve())
        yours, _ = learner_components(parts)
        print(json.dumps(asdict(_triton_row(yours, serve.chat_ids(CAPSTONE_PROMPTS), hf_reference()))))
    else:
        capstone(a.folder)
