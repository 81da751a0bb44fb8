"""docs/production_checklist.md (issue 39, item 6): every figure it states is recomputed by the kit's code,
its prose types none, its claims agree with the computed values, the vLLM 0.32.0 defaults it uses are
vLLM 0.32.0's, and the README and lab 09 link to it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from pagedlab.analysis import checklist

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "production_checklist.md"


def test_the_generated_section_is_what_the_code_computes_now() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert checklist.generated_section(text) == checklist.render(), (
        "docs/production_checklist.md is stale: run `python -m pagedlab.analysis.checklist`"
    )
    assert checklist.main(["--check"]) == 0


def test_the_prose_types_no_figure() -> None:
    text = DOC.read_text(encoding="utf-8")
    prose = text.replace(checklist.generated_section(text), "")
    prose = re.sub(r"vLLM 0\.32\.0|labs? 0\d(?: and 0\d)?|## \d\.|section \d|v[01]\b|fp\d\d|bf16", "", prose)
    assert not re.findall(r"\d", prose), re.findall(r".{20}\d.{20}", prose)


def test_the_prose_claims_agree_with_the_numbers() -> None:
    # "the tail waste ... is a fraction of a percent" at the default block size
    (row,) = [r for r in checklist.block_size_rows() if r[0] == str(checklist.DEFAULT_BLOCK_SIZE)]
    assert all(float(cell.rstrip("%")) < 1 for cell in row[1:3])
    # "grouped-query models ... would swap more cheaply"; an MHA model (Llama-2-7B) on H100 would not
    cheaper = {(r[0], r[1]): r[5] for r in checklist.preemption_rows()}
    assert cheaper[("llama-3-8b", "H100")] == cheaper[("llama-3-8b", "A100-80G")] == "swap"
    assert cheaper[("llama-2-7b", "H100")] == "recompute"
    # "without shared prefixes it changes neither TTFT nor throughput"; "with a shared system prompt ... cuts TTFT"
    unique, shared, *ceilings = checklist.prefix_rows()
    assert float(unique[1]) == 0 and unique[2].split(" / ")[0] == unique[2].split(" / ")[1]
    assert unique[4].split(" / ")[0] == unique[4].split(" / ")[1]
    off, on = (float(v) for v in shared[2].split(" / "))
    assert float(shared[1]) > 0.3 and on < off
    assert len(ceilings) == 2 and all(0 < float(r[1]) < 1 for r in ceilings)
    # "If that is below max_num_seqs": the 8B row fits fewer 4k-token requests than vLLM's 256
    budget = {(r[0], r[1]): int(r[8].replace(",", "")) for r in checklist.budget_rows()}
    assert budget[("llama-3-8b", "H100")] < 256 < budget[("llama-3-8b", "H200")] * 2


def test_the_vllm_defaults_it_uses_are_vllm_0_32s() -> None:
    from pagedlab.vllm_env import vllm_env
    from pagedlab.vllm_version import VLLM_VERSION, vllm_python

    py = vllm_python()
    if not py.exists():
        pytest.skip(f"no vLLM interpreter at {py} (make vllm)")
    code = (
        "import json, vllm\n"
        "from vllm.config.cache import CacheConfig as C\n"
        "f = C.model_fields if hasattr(C, 'model_fields') else C.__pydantic_fields__\n"
        "print(json.dumps([vllm.__version__, f['gpu_memory_utilization'].default, C.DEFAULT_BLOCK_SIZE,\n"
        "                  f['enable_prefix_caching'].default]))\n"
    )
    done = subprocess.run([str(py), "-I", "-c", code], capture_output=True, text=True, timeout=300, env=vllm_env())
    assert done.returncode == 0, done.stderr[-2000:]
    version, utilization, block_size, prefix = json.loads(done.stdout.strip().splitlines()[-1])
    assert version == VLLM_VERSION
    assert (utilization, block_size, prefix) == (checklist.UTILIZATION, checklist.DEFAULT_BLOCK_SIZE, True)


def test_readme_and_lab09_link_to_it() -> None:
    assert "docs/production_checklist.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    for folder in ("solutions", "labs"):
        nb = json.loads((ROOT / folder / "09_engine_and_vllm.ipynb").read_text(encoding="utf-8"))
        assert any("docs/production_checklist.md" in "".join(c["source"]) for c in nb["cells"]), folder
