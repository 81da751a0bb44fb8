"""``pagedlab run-vllm``: scripts written for vLLM run unchanged on the kit, in their own process only."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pagedlab import cli
from pagedlab.engine import arg_utils
from pagedlab.vllm_compat import VLLMFinder, provided_modules

pytestmark = pytest.mark.model
SCRIPTS = Path(__file__).parent / "scripts"
EXAMPLES = Path(__file__).parent / "vllm_examples"
HUB = "meta-llama/Llama-3.2-1B-Instruct"


def _run(capsys, *argv: str) -> tuple[int, list[dict], str]:
    rc = cli.main(["run-vllm", *argv])
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return rc, rows, err


def _assert_clean() -> None:
    """The runner left nothing behind: no finder, no vllm module, no override."""
    assert not any(isinstance(f, VLLMFinder) for f in sys.meta_path)
    assert not [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]
    assert arg_utils.MODEL_OVERRIDES == {}
    assert importlib.util.find_spec("vllm") is None, "the kit must never install a module named vllm"


def test_generate_script_matches_the_kit(capsys, small_llm):
    rc, rows, _ = _run(
        capsys,
        "--model-override",
        HUB,
        str(SCRIPTS / "generate_cli.py"),
        "--max-tokens",
        "6",
        "--temperature",
        "0",
        "--num-gpu-blocks-override",
        "64",
        "--max_model_len",
        "256",
    )
    assert rc == 0
    from pagedlab import SamplingParams

    prompts = [r["prompt"] for r in rows]
    assert prompts == ["The capital of France is", "Water boils at", "My favourite colour is"]
    mine = small_llm.generate(prompts, SamplingParams(temperature=0, max_tokens=6))
    assert [r["token_ids"] for r in rows] == [o.outputs[0].token_ids for o in mine]
    assert [r["text"] for r in rows] == [o.outputs[0].text for o in mine]
    assert all(1 <= len(r["token_ids"]) <= 6 for r in rows) and any(r["text"].strip() for r in rows)
    _assert_clean()


def test_chat_script_matches_the_kit(capsys, small_llm):
    rc, rows, _ = _run(
        capsys, "--model-override", f"{HUB}=HuggingFaceTB/SmolLM2-135M-Instruct", str(SCRIPTS / "chat_batch.py")
    )
    assert rc == 0
    from pagedlab import SamplingParams

    conv = [{"role": "system", "content": "You are a helpful assistant"}, {"role": "user", "content": "Name a planet."}]
    want = small_llm.chat(conv, SamplingParams(temperature=0, max_tokens=12))[0].outputs[0].text
    assert want.strip()
    assert rows == [{"single": want}, {"batch": want, "finished": True}, {"batch": want, "finished": True}]
    _assert_clean()


def test_prefix_caching_script_reports_hits(capsys):
    rc, rows, _ = _run(capsys, "--model-override", "*", str(SCRIPTS / "prefix_caching_metrics.py"))
    assert rc == 0
    first, second, summary = rows
    assert first["num_cached_tokens"] == 0
    assert second["num_cached_tokens"] >= 16 and second["num_cached_tokens"] % 16 == 0
    m = summary["metrics"]
    assert m["vllm:prefix_cache_hits"] == second["num_cached_tokens"]
    assert m["vllm:prefix_cache_queries"] == m["vllm:prompt_tokens"] > m["vllm:prefix_cache_hits"]
    assert m["vllm:time_to_first_token_seconds"]["count"] == 2
    assert m["vllm:num_requests_running"] == 0 and m["vllm:num_requests_waiting"] == 0
    assert m["vllm:request_success"] == 2
    _assert_clean()


def test_unprovided_vllm_module_is_named(capsys):
    rc, rows, err = _run(capsys, str(SCRIPTS / "imports_unprovided.py"))
    assert rc == 1 and rows == []
    assert "'vllm.lora'" in err and "vllm.sampling_params" in err and "Provided:" in err
    _assert_clean()


def test_other_model_names_the_bundled_one(capsys):
    rc, _, err = _run(capsys, str(SCRIPTS / "other_model.py"))
    assert rc == 1
    assert "'facebook/opt-125m'" in err and "HuggingFaceTB/SmolLM2-135M-Instruct" in err
    assert "--model-override" in err
    _assert_clean()


def test_missing_script_and_bad_override(capsys):
    assert cli.main(["run-vllm", str(SCRIPTS / "nope.py")]) == 2
    assert "no such script" in capsys.readouterr().err
    assert cli.main(["run-vllm", "--model-override", "=x", str(SCRIPTS / "other_model.py")]) == 1
    assert "NAME or NAME=MODEL" in capsys.readouterr().err
    _assert_clean()


def test_module_entry_point_exit_code_in_a_fresh_process():
    """``python -m pagedlab.vllm_compat`` returns the script's failure as its exit status."""
    p = subprocess.run(
        [sys.executable, "-m", "pagedlab.vllm_compat", str(SCRIPTS / "imports_unprovided.py")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert p.returncode == 1
    assert "'vllm.lora'" in p.stderr


def test_provided_modules_import_under_the_runner(tmp_path, capsys):
    script = tmp_path / "imports.py"
    lines = [f"import {m}" for m in provided_modules()]
    lines += [
        "from vllm.sampling_params import BeamSearchParams, SamplingParams",
        "from vllm.inputs import TokensPrompt, TextPrompt",
        "from vllm.v1.metrics.reader import Counter, Gauge, Histogram, Vector",
        "import pagedlab.sampling_params as kit",
        "assert SamplingParams is kit.SamplingParams",
        (
            "try:\n    from vllm import AsyncLLMEngine\nexcept ImportError as e:\n"
            "    assert \"does not provide 'vllm.AsyncLLMEngine'\" in str(e), e\nelse:\n    raise SystemExit(3)"
        ),
        "print('{\"ok\": true}')",
    ]
    script.write_text("\n".join(lines) + "\n")
    rc, rows, err = _run(capsys, str(script))
    assert (rc, rows) == (0, [{"ok": True}]), err
    _assert_clean()


UPSTREAM = ["basic/basic.py", "basic/chat.py", "basic/generate.py", "automatic_prefix_caching.py"]
GREEDY_ARGS = ["--max-tokens", "8", "--temperature", "0", "--num-gpu-blocks-override", "256"]


@pytest.fixture
def recorded_calls(monkeypatch):
    """Every ``LLM.generate`` / ``LLM.chat`` call a script makes: (method, args, kwargs, outputs, llm)."""
    from pagedlab.engine.llm import LLM

    calls: list[tuple[str, tuple, dict, list, object]] = []
    for name in ("generate", "chat"):
        original = getattr(LLM, name)

        def wrapper(self, *args, _name=name, _original=original, **kwargs):
            outs = _original(self, *args, **kwargs)
            calls.append((_name, args, kwargs, outs, self))
            return outs

        monkeypatch.setattr(LLM, name, wrapper)
    return calls


def _run_upstream(name: str, capsys, *args: str) -> str:
    path = EXAMPLES / name
    assert path.exists(), f"vLLM's {name} must be stored under tests/compat/vllm_examples/ (see its README)"
    rc = cli.main(["run-vllm", "--model-override", "*", str(path), *args])
    out, err = capsys.readouterr()
    assert rc == 0, err
    _assert_clean()
    return out


def test_vllm_upstream_basic(capsys, recorded_calls):
    """basic.py samples (temperature 0.8): four prompts, four non-empty completions, printed as vLLM prints."""
    out = _run_upstream("basic/basic.py", capsys)
    [(method, _, _, outs, _)] = [c for c in recorded_calls if c[0] == "generate"]
    assert [o.prompt for o in outs] == [
        "Hello, my name is",
        "The president of the United States is",
        "The capital of France is",
        "The future of AI is",
    ]
    assert all(o.outputs[0].token_ids for o in outs)
    assert out.count("Output:") == 4


def test_vllm_upstream_generate_is_greedy_equal_to_the_kit(capsys, recorded_calls, small_llm):
    from pagedlab import SamplingParams

    out = _run_upstream("basic/generate.py", capsys, *GREEDY_ARGS)
    [(_, args, _, outs, _)] = [c for c in recorded_calls if c[0] == "generate"][:1]
    prompts = [o.prompt for o in outs]
    assert len(prompts) == 4 and out.count("Generated text:") == 4
    mine = small_llm.generate(prompts, SamplingParams(temperature=0, max_tokens=8))
    assert [o.outputs[0].token_ids for o in outs] == [o.outputs[0].token_ids for o in mine]


def test_vllm_upstream_chat_is_greedy_equal_to_the_kit(capsys, recorded_calls, small_llm):
    from pagedlab import SamplingParams

    out = _run_upstream("basic/chat.py", capsys, *GREEDY_ARGS)
    chats = [c for c in recorded_calls if c[0] == "chat"]
    assert [len(c[3]) for c in chats] == [1, 10]
    conversation = chats[0][1][0]
    mine = small_llm.chat(conversation, SamplingParams(temperature=0, max_tokens=8))[0]
    assert chats[0][3][0].outputs[0].token_ids == mine.outputs[0].token_ids
    assert all(o.outputs[0].token_ids == mine.outputs[0].token_ids for o in chats[1][3])  # the batch: same answer
    assert out.count("Generated text:") == 11


def test_vllm_upstream_prefix_caching_hits_on_the_second_query(capsys, recorded_calls):
    out = _run_upstream("automatic_prefix_caching.py", capsys)
    first, second = [c[3][0] for c in recorded_calls if c[0] == "generate"]
    assert first.num_cached_tokens == 0
    # The shared markdown table is cached: all of its full blocks hit, the differing question does not.
    block_size = recorded_calls[0][4].llm_engine.cache_config.block_size
    shared = 0
    for a, b in zip(first.prompt_token_ids, second.prompt_token_ids):
        if a != b:
            break
        shared += 1
    assert second.num_cached_tokens == shared // block_size * block_size > 0
    assert out.count("Generation time:") == 2
