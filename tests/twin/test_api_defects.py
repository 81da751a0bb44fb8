"""Issue 35's seven offline-API defects, each call run on real vLLM 0.32.0 (``pagedlab.vllm_version``) and on the kit.

One vLLM subprocess (``python -I``, in-process engine) starts one ``LLM`` with ``api_cases.ENGINE`` (a
``num_gpu_blocks_override`` with a ``kv_cache_memory_bytes``), answers every case of ``api_cases.run_cases``
and runs ``api_cases.SCRIPT`` (a script importing ``vllm.exceptions``); the kit runs the same cases on its own
``LLM`` with the same arguments, and the script under ``pagedlab run-vllm``'s import hook.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pagedlab.twin.hf_model import hf_model_dir
from pagedlab.vllm_env import vllm_env
from pagedlab.vllm_version import VLLM_VERSION, vllm_python
from tests.twin import api_cases

CASES = Path(api_cases.__file__)

PROBE = r"""
import contextlib, importlib.util, io, json, os, runpy, sys, tempfile
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
spec = importlib.util.spec_from_file_location("api_cases", sys.argv[2])
cases = importlib.util.module_from_spec(spec); spec.loader.exec_module(cases)
import psutil, vllm
from vllm import LLM, SamplingParams
from vllm.exceptions import VLLMValidationError
mem = psutil.virtual_memory()
llm = LLM(model=sys.argv[1], enforce_eager=True, disable_log_stats=True,
          gpu_memory_utilization=min(6 * 2**30, 0.8 * mem.available) / mem.total, **cases.ENGINE)
facts = {"vllm_version": vllm.__version__}
facts["num_gpu_blocks"] = llm.llm_engine.vllm_config.cache_config.num_gpu_blocks
sched = llm.llm_engine.engine_core.engine_core.scheduler
facts["num_free_blocks"] = sched.kv_cache_manager.block_pool.get_num_free_blocks()
facts["cases"] = cases.run_cases(llm, SamplingParams, VLLMValidationError)
with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
    f.write(cases.SCRIPT)
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    runpy.run_path(f.name, run_name="__main__")
facts["script"] = buf.getvalue()
print("FACTS" + json.dumps(facts))
"""


@pytest.fixture(scope="module")
def vllm_facts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    env = vllm_env()
    done = subprocess.run(
        [str(vllm_python()), "-I", "-c", PROBE, str(hf_model_dir()), str(CASES)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=tmp_path_factory.mktemp("vllm"),
    )
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("FACTS")]
    assert done.returncode == 0 and line, (done.stdout + done.stderr)[-4000:]
    facts: dict[str, Any] = json.loads(line[0][len("FACTS") :])
    assert facts["vllm_version"] == VLLM_VERSION
    return facts


@pytest.fixture(scope="module")
def kit_llm() -> Any:
    from pagedlab import LLM

    return LLM(**api_cases.ENGINE)


@pytest.fixture(scope="module")
def kit_facts(kit_llm: Any) -> dict[str, Any]:
    from pagedlab import SamplingParams
    from pagedlab.exceptions import VLLMValidationError

    return api_cases.run_cases(kit_llm, SamplingParams, VLLMValidationError)


def _same(vllm_facts: dict[str, Any], kit_facts: dict[str, Any], *names: str) -> None:
    for name in names:
        assert kit_facts[name] == vllm_facts["cases"][name], name


def test_the_stop_token_is_left_out_of_the_text_as_vllm(vllm_facts: dict[str, Any], kit_facts: dict[str, Any]) -> None:
    real = vllm_facts["cases"]
    assert real["eos_special_tokens_kept"]["text"] == "The sky is not blue."  # EOS <|im_end|> not in the text
    assert real["eos_special_tokens_kept_included"]["text"].endswith("<|im_end|>")
    assert real["stop_token_id"]["text"] == " Paris" and real["stop_token_id"]["stop_reason"] == 30
    assert real["stop_token_id_included"]["text"] == " Paris."
    _same(
        vllm_facts,
        kit_facts,
        "eos_special_tokens_kept",
        "eos_special_tokens_kept_included",
        "stop_token_id",
        "stop_token_id_included",
    )


def test_chat_takes_vllms_arguments_and_text_parts(vllm_facts: dict[str, Any], kit_facts: dict[str, Any]) -> None:
    real = vllm_facts["cases"]
    assert "Hi\nthere" in real["chat_content_parts"]["prompt"]  # "string" format: parts joined by newlines
    assert (
        real["chat_content_parts_openai_template"]["prompt"] == "user: [Hi] [there]assistant:"
    )  # trim_blocks eats the newline
    assert real["chat_template_and_kwargs"]["prompt"] == "user: Hi\nbot:"
    assert real["chat_continue_final_message"]["prompt"].endswith("The answer is")
    _same(
        vllm_facts,
        kit_facts,
        "chat_content_parts",
        "chat_content_parts_openai_template",
        "chat_continue_final_message",
        "chat_template_and_kwargs",
    )
    both = real["chat_continue_with_generation_prompt"]
    mine = kit_facts["chat_continue_with_generation_prompt"]
    assert both["refused"] and both["validation_error"] and not both["value_error"]  # vLLM's is no ValueError
    assert mine["refused"] and mine["validation_error"] and mine["value_error"]  # the kit's is both
    assert "continue_final_message and add_generation_prompt are not compatible" in both["message"]
    assert "continue_final_message and add_generation_prompt are not compatible" in mine["message"]


def test_logprobs_carry_decoded_tokens_as_vllm(vllm_facts: dict[str, Any], kit_facts: dict[str, Any]) -> None:
    real = vllm_facts["cases"]
    assert real["decoded_tokens"][0]["7042"] == " Paris"
    assert all(d is None for e in real["decoded_tokens_without_detokenize"] for d in e.values())
    _same(vllm_facts, kit_facts, "decoded_tokens", "decoded_tokens_without_detokenize")


def test_requests_vllm_refuses_are_refused_alike(vllm_facts: dict[str, Any], kit_facts: dict[str, Any]) -> None:
    """Stop strings without detokenization, an out-of-vocabulary stop token, a negative temperature: refused on
    both with vLLM's message; ``except VLLMValidationError`` catches each on both."""
    for name in ("stop_without_detokenize", "stop_token_id_out_of_vocabulary", "temperature_refusal"):
        real, mine = vllm_facts["cases"][name], kit_facts[name]
        assert real["refused"] and real["validation_error"] and not real["value_error"], name
        assert mine["refused"] and mine["validation_error"] and mine["value_error"], name
    for name in ("stop_without_detokenize", "stop_token_id_out_of_vocabulary"):
        assert kit_facts[name]["message"] == vllm_facts["cases"][name]["message"], name
    assert "Vocabulary size: 49152" in kit_facts["stop_token_id_out_of_vocabulary"]["message"]


def test_an_override_with_a_kv_budget_starts_as_vllm(vllm_facts: dict[str, Any], kit_llm: Any) -> None:
    """``num_gpu_blocks_override`` with ``kv_cache_memory_bytes``: vLLM takes both and the override wins (16 blocks,
    15 free after its null block); the kit the same."""
    assert vllm_facts["num_gpu_blocks"] == 16 and vllm_facts["num_free_blocks"] == 15
    assert kit_llm.llm_engine.kv_cache_manager.num_free_blocks == vllm_facts["num_free_blocks"]


def test_a_script_catching_vllm_exceptions_runs_on_both(vllm_facts: dict[str, Any], tmp_path: Path) -> None:
    from pagedlab.vllm_compat import run_script

    script = tmp_path / "catch.py"
    script.write_text(api_cases.SCRIPT)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert run_script(str(script), []) == 0
    assert "VLLMValidationError is a ValueError: False" in vllm_facts["script"]
    assert buf.getvalue() == vllm_facts["script"]
