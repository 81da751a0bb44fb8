"""Figures and claims in the labs' prose match what the labs compute (issue 23, "Facts"): a figure the
notebook measures is printed by a code cell, not typed in the prose; a self-check answer says what the
lab's own code does."""

from __future__ import annotations

from pathlib import Path

import nbformat

from pagedlab.analysis.self_checks import SELF_CHECKS
from pagedlab.grading import registry
from pagedlab.grading.kit import RefCountedPool, Seq

SOLUTIONS = Path(__file__).resolve().parents[1] / "solutions"


def _cells(prefix: str, kind: str) -> list[str]:
    (path,) = SOLUTIONS.glob(f"{prefix}_*.ipynb")
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == kind]


def _answer(lab: str, prompt_start: str) -> str:
    (q,) = [q for q in SELF_CHECKS[lab] if q.prompt.startswith(prompt_start)]
    return q.choices[q.answer]


def test_lab05_prints_the_short_prompt_lengths_instead_of_typing_them():
    prose = "\n".join(_cells("05", "markdown"))
    assert "at most 43" not in prose  # measured 40, 40, 39
    code = "\n".join(_cells("05", "code"))
    assert "short prompts: {short_lens} tokens" in code
    assert 'len(runs["whole"].outputs[rid].prompt_token_ids) for rid in SHORT' in code


def test_lab06_kv_per_token_column_is_labelled_in_the_unit_it_divides_by():
    (cell,) = [c for c in _cells("06", "code") if "kv_bytes_per_token / 1024" in c]
    assert "'(KiB)'" in cell and "'(KB)'" not in cell


def test_lab06_no_longer_says_the_no_readmission_rule_never_matters():
    (cell,) = [c for c in _cells("06", "markdown") if "the last rule never changes a schedule" in c]
    assert "with recompute the last rule never changes a schedule" in cell  # true for recompute only
    assert "With **swap** it does matter" in cell


def test_lab08_times_the_triton_serving_cell_instead_of_typing_a_duration():
    (cell,) = [c for c in _cells("08", "code") if "serve_with(triton_load_kv_tile" in c]
    assert "about 20 s" not in cell  # 48.5 s measured on a CPU
    assert "time.perf_counter() - t0" in cell


def test_lab03_self_check_says_fork_adds_a_reference_per_table_entry():
    fork = registry.snippet_object("03.fork")
    pool = RefCountedPool(4, 16)
    block = pool.allocate()
    parent = Seq("p", [block, block], 32)  # the same block twice in one table
    fork(pool, parent, "c")
    assert pool.ref_cnt(block) == 3  # one per table entry, not one per distinct block
    assert _answer("03", "What does fork copy?") == "the block table, adding one reference per table entry"


def test_lab09_self_check_does_not_claim_a_one_line_port():
    answer = _answer("09", "What changes to run a pagedlab.LLM script on vllm.LLM?")
    assert answer != "one line (the import)"
    assert "extensions" in answer  # num_gpu_blocks, trace=True ... have no vLLM counterpart
