"""Issue 35's seven offline-API defects, each call run on real vLLM 0.32.0 (``pagedlab.vllm_version``) and on the kit.

One vLLM subprocess (``python -I``, in-process engine; ``tests/twin/conftest.py``'s ``smollm_vllm_facts``, shared
with the output fuzz) starts one ``LLM`` with ``api_cases.ENGINE`` (a ``num_gpu_blocks_override`` with a
``kv_cache_memory_bytes``), answers every case of ``api_cases.run_cases`` and runs ``api_cases.SCRIPT`` (a script
importing ``vllm.exceptions``); the kit runs the same cases on its own ``LLM`` with the same arguments
(``smollm_kit_facts``), and the script under ``pagedlab run-vllm``'s import hook.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest

from tests.twin import api_cases

CASES = Path(api_cases.__file__)


@pytest.fixture(scope="module")
def vllm_facts(smollm_vllm_facts: dict[str, Any]) -> dict[str, Any]:
    return smollm_vllm_facts


@pytest.fixture(scope="module")
def kit_llm(smollm_kit_llm: Any) -> Any:
    return smollm_kit_llm


@pytest.fixture(scope="module")
def kit_facts(smollm_kit_facts: dict[str, Any]) -> dict[str, Any]:
    return smollm_kit_facts


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
