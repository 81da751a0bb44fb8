"""The labs' "On real vLLM" cells against real vLLM (deselected with one loud skip where it is missing).

The cell of lab 07 (``pagedlab.twin.labs.on_vllm``): the kit and vLLM schedule its workload identically,
prefix hits included, and the renderer draws the two traces without a divergence mark. Lab 09's
``serve.py`` runs unchanged on vLLM through ``pagedlab/twin/script_on_vllm.py``.
"""

from __future__ import annotations

import json

from pagedlab.twin import compare
from pagedlab.twin.labs import LAB_WORKLOADS, first_shared_tokens, lab_workload, on_vllm, run_script_on_vllm
from pagedlab.viz.twin import render_twin


def test_every_labs_workload_schedules_identically_on_vllm() -> None:
    """The six labs' cells in one vLLM start (the notebook run switches them off: solutions/conftest.py)."""
    labs = sorted(LAB_WORKLOADS)
    results = compare([lab_workload(lab) for lab in labs])
    for lab, (kit, vllm, found) in zip(labs, results):
        assert found is None, f"lab {lab}: first divergence at {found}"
        assert len(vllm.steps) == len(kit.steps) > 0 and vllm.tokens == kit.tokens, lab


def test_lab07s_cell_runs_its_workload_on_vllm_with_the_same_decisions() -> None:
    got = on_vllm("07", show=False)
    assert got is not None
    kit, vllm, found = got
    assert found is None, str(found)
    assert vllm.engine != kit.engine and len(vllm.steps) == len(kit.steps) > 0
    hits = {rid: n for s in vllm.steps for rid, n in s.num_cached_tokens.items() if rid.endswith("-again")}
    assert sorted(hits) == ["q02-again", "q04-again", "q05-again"] and all(n >= 32 for n in hits.values())
    html = render_twin(kit, vllm, found)
    assert 'data-divergence-step="-1"' in html and "pl-divergence" not in html


SCRIPT = """\
import json
from vllm import LLM, SamplingParams
llm = LLM(model="HuggingFaceTB/SmolLM2-135M-Instruct", max_model_len=512, seed=0)
outs = llm.chat([[{"role": "user", "content": "What is the capital of France?"}]],
                SamplingParams(temperature=0.0, max_tokens=6), use_tqdm=False)
print(json.dumps({"text": outs[0].outputs[0].text, "token_ids": list(outs[0].outputs[0].token_ids)}))
"""


def test_an_unchanged_vllm_script_runs_on_real_vllm_and_answers_as_the_kit(tmp_path) -> None:
    import contextlib
    import io

    from pagedlab.vllm_compat import run_script

    script = tmp_path / "serve.py"
    script.write_text(SCRIPT)
    stdout = run_script_on_vllm(script)
    assert stdout is not None
    (real,) = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run_script(str(script), []) == 0
    (kit,) = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    assert "Paris" in real["text"]
    assert first_shared_tokens(kit["token_ids"], real["token_ids"]) == len(kit["token_ids"]) == 6
