"""The labs' "On real vLLM" cells against real vLLM (deselected with one loud skip where it is missing).

The cell of lab 07 (``pagedlab.twin.labs.on_vllm``): the kit and vLLM schedule its workload identically,
prefix hits included, and the renderer draws the two traces without a divergence mark. Every lab's
pool (block tables, free queue, hashed blocks) agrees with vLLM's, the very same ids at every step: the kit
frees blocks as vLLM 0.32.0 (no hash to the free queue's front, hashed to its tail). Lab 09's
``serve.py`` runs unchanged on vLLM through ``pagedlab/twin/script_on_vllm.py``.
"""

from __future__ import annotations

import json

from pagedlab.twin import Trace, compare
from pagedlab.twin.labs import LAB_WORKLOADS, first_shared_tokens, lab_workload, on_vllm, run_script_on_vllm
from pagedlab.twin.records import first_block_id_difference
from pagedlab.twin.view import render_twin


def test_every_labs_workload_schedules_identically_on_vllm() -> None:
    """The six labs' cells in one vLLM start (the notebook run switches them off: solutions/conftest.py)."""
    labs = sorted(LAB_WORKLOADS)
    results = compare([lab_workload(lab) for lab in labs])
    for lab, (kit, vllm, found) in zip(labs, results):
        assert found is None, f"lab {lab}: first divergence at {found}"  # pools included, ids up to a renaming
        assert len(vllm.steps) == len(kit.steps) > 0 and vllm.tokens == kit.tokens, lab
        _check_pools(lab, kit, vllm)
    kit, vllm, _ = results[labs.index("02")]
    # lab 02: request 0 (blocks 0, 1) finishes at step 7; at step 8 request 2 gets the front of the free queue
    # on both: request 0's blocks tail first (vLLM 0.32.0 prepend_n; the kit kept 0.11's tail: blocks 4, 5)
    assert first_block_id_difference(kit, vllm) is None
    assert kit.steps[8].block_ids["2"] == vllm.steps[8].block_ids["2"] == [1, 0]
    assert kit.steps[8].free_queue == vllm.steps[8].free_queue == [4, 5, 6, 7]


def _check_pools(lab: str, kit: Trace, vllm: Trace) -> None:
    """Both sides recorded every step's pool, the same free counts, and the very same block ids (the null
    block mapped out) at every step (docs/vllm_differences.md)."""
    for a, b in zip(kit.steps, vllm.steps):
        assert a.block_ids is not None and b.block_ids is not None, (lab, a.step)
        assert a.num_free_blocks == b.num_free_blocks == len(b.free_queue), (lab, a.step)
        assert all(0 <= i < vllm.num_free_blocks for ids in b.block_ids.values() for i in ids), (lab, a.step)
        assert (a.block_ids, a.free_queue, a.hashed_blocks, a.hit_block_ids) == (
            b.block_ids,
            b.free_queue,
            b.hashed_blocks,
            b.hit_block_ids,
        ), (lab, a.step)


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
    # the hits are the first round's hashed first blocks, on vLLM as on the kit
    first = {rid: ids for rid, ids in vllm.steps[0].block_ids.items()}
    again = next(s for s in vllm.steps if s.hit_block_ids and "q02-again" in s.hit_block_ids)
    assert again.hit_block_ids == {f"{r}-again": first[r][:1] for r in ("q02", "q04", "q05")}
    assert set(vllm.steps[0].hashed_blocks) == {ids[0] for ids in first.values()}
    pools = render_twin(kit, vllm, found, widget="prefix")
    assert f'class="pl-twin-pools" data-step="{again.step}"' in pools and "prefix hits this step: q02-again" in pools


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
