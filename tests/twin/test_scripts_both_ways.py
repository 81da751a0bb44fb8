"""Scripts both ways: vLLM's own offline examples (tests/compat/vllm_examples) and the kit's example
scripts (tests/compat/scripts, the README's ``serve.py``) print the same on real vLLM 0.32.0 and on the
kit (``pagedlab run-vllm --model-override '*'``), unchanged, with the same command-line arguments.

On real vLLM every script runs in one process (``pagedlab.twin.scripts``: the model name is overridden to
the kit's SmolLM2 folder, float32, as on the kit); on the kit each runs in this process. What is compared,
per script, is in ``SCRIPTS`` below: the whole stdout where the script is greedy and prints no timings;
where it samples (temperature 0.8) or times itself, what is deterministic.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from pagedlab import cli
from pagedlab.twin.scripts import ScriptRun, run_scripts_on_vllm

COMPAT = Path(__file__).resolve().parents[1] / "compat"
UPSTREAM, KIT = COMPAT / "vllm_examples", COMPAT / "scripts"
README = Path(__file__).resolve().parents[2] / "README.md"

#: Engine and sampling arguments for the scripts that take vLLM's command line (EngineArgs.add_cli_args):
#: float32 (the kit's dtype), a pool of 64 usable blocks of 32 (vLLM-CPU's attention takes multiples of 32).
CLI_ARGS = [
    *("--dtype", "float32", "--enforce-eager", "--block-size", "32", "--num-gpu-blocks-override", "65"),
    *("--max-model-len", "1024", "--gpu-memory-utilization", "0.1", "--temperature", "0", "--max-tokens", "8"),
]


def _lines(out: str, marker: str) -> list[str]:
    return [ln for ln in out.splitlines() if marker in ln]


def _same_stdout(kit: str, real: str) -> None:
    assert kit.strip(), "the script printed nothing"
    assert kit == real


def _basic(kit: str, real: str) -> None:
    # temperature 0.8, top_p 0.95 and no seed: the completions differ run to run; the prompts and the
    # number of completions do not
    assert _lines(kit, "Prompt:") == _lines(real, "Prompt:") and len(_lines(kit, "Prompt:")) == 4
    assert len(_lines(kit, "Output:")) == len(_lines(real, "Output:")) == 4


def _without_timings(kit: str, real: str) -> None:
    # greedy (temperature 0, max_tokens 100); only the "Generation time: ... seconds." lines differ
    def strip(s: str) -> str:
        return re.sub(r"^Generation time: .*$", "", s, flags=re.M)

    assert len(_lines(kit, "Output:")) == 2
    assert strip(kit) == strip(real)


def _prefix_caching_metrics(kit: str, real: str) -> None:
    # greedy answers equal; the second question hits the shared prefix on both, each in its own block size
    # (the kit's default 16, vLLM-CPU 0.32's 128: the script sets none), so the hit counts differ; the
    # prompt-token counters do not
    k, r = ([json.loads(ln) for ln in s.splitlines() if ln.startswith("{")] for s in (kit, real))
    assert [x.get("text") for x in k] == [x.get("text") for x in r] and len(k) == 3
    assert k[0]["num_cached_tokens"] == r[0]["num_cached_tokens"] == 0
    for side in (k, r):
        assert side[1]["num_cached_tokens"] > 0
        assert side[2]["metrics"]["vllm:prefix_cache_hits"] == side[1]["num_cached_tokens"]
    for name in ("vllm:prefix_cache_queries", "vllm:prompt_tokens", "vllm:request_success"):
        assert k[2]["metrics"][name] == r[2]["metrics"][name], name


def _metrics(kit: str, real: str) -> None:
    # temperature 0.8 without a seed, as basic.py: the prompts and completions count; then the counters that do
    # not depend on what was sampled (vLLM prints more metrics than the kit: only these are compared)
    assert _lines(kit, "Prompt:") == _lines(real, "Prompt:") and len(_lines(kit, "Prompt:")) == 4
    assert len(_lines(kit, "Generated text:")) == len(_lines(real, "Generated text:")) == 4
    # vLLM 0.32 keeps vllm:request_success per finish reason (one line each); the kit prints the total
    for name in ("vllm:prompt_tokens (counter)", "vllm:request_success (counter)"):
        mine, theirs = (sum(float(ln.rsplit("=", 1)[1]) for ln in _lines(s, name)) for s in (kit, real))
        assert len(_lines(kit, name)) == 1 and mine == theirs > 0, (name, mine, theirs)


def _readme_answer(kit: str, real: str) -> None:
    # the chat answer (greedy, 32 tokens) is the first line; then one line per metric, whose set differs
    assert kit.splitlines()[0] == real.splitlines()[0]
    assert "Paris" in kit.splitlines()[0]


def _readme_script(folder: Path) -> Path:
    """The README's ``serve.py`` (section "The API, as in vLLM"), written to ``folder``."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## The API, as in vLLM") :]
    code = section[section.index("```python\n") + len("```python\n") :]
    path = folder / "serve.py"
    path.write_text(code[: code.index("```")], encoding="utf-8")
    return path


#: name -> (script, its arguments, how the two outputs are compared)
SCRIPTS: dict[str, tuple[Path | None, list[str], Callable[[str, str], None]]] = {
    "upstream basic.py": (UPSTREAM / "basic" / "basic.py", [], _basic),
    "upstream generate.py": (UPSTREAM / "basic" / "generate.py", CLI_ARGS, _same_stdout),
    "upstream chat.py": (UPSTREAM / "basic" / "chat.py", CLI_ARGS, _same_stdout),
    "upstream automatic_prefix_caching.py": (UPSTREAM / "automatic_prefix_caching.py", [], _without_timings),
    "upstream metrics.py": (UPSTREAM / "metrics.py", [], _metrics),
    "kit generate_cli.py": (KIT / "generate_cli.py", CLI_ARGS, _same_stdout),
    "kit chat_batch.py": (KIT / "chat_batch.py", [], _same_stdout),
    "kit prefix_caching_metrics.py": (KIT / "prefix_caching_metrics.py", [], _prefix_caching_metrics),
    "README serve.py": (None, [], _readme_answer),
}


def _path(name: str, folder: Path) -> Path:
    path = SCRIPTS[name][0]
    return _readme_script(folder) if path is None else path


@pytest.fixture(scope="module")
def script_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("scripts")


@pytest.fixture(scope="module")
def on_vllm(script_folder: Path) -> dict[str, ScriptRun]:
    """Every script of ``SCRIPTS`` on real vLLM, in one vLLM process."""
    runs = run_scripts_on_vllm([(_path(n, script_folder), SCRIPTS[n][1]) for n in SCRIPTS])
    return dict(zip(SCRIPTS, runs))


def on_kit(script: Path, args: list[str]) -> str:
    """What ``pagedlab run-vllm --model-override '*' SCRIPT ARGS`` prints (run in this process)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cli.main(["run-vllm", "--model-override", "*", str(script), *args])
    assert rc == 0, f"{script.name} failed on the kit (exit {rc})"
    return buf.getvalue()


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_script_prints_the_same_on_both(name: str, on_vllm: dict[str, ScriptRun], script_folder: Path) -> None:
    script, args, compare = SCRIPTS[name]
    real = on_vllm[name]
    assert real.rc == 0 and real.error is None, f"{name} failed on real vLLM:\n{real.error}"
    compare(on_kit(_path(name, script_folder), args), real.stdout)
