"""The tiny random-weight model the property run uses (pagedlab/twin/tiny_model.py) and the kit's loader
of a Hugging Face folder (``pagedlab.model.loader.load_hf_folder``), which reads the very folder vLLM loads.

That vLLM's greedy tokens equal the kit's on it is checked over every fuzz workload
(tests/twin/test_fuzz.py::test_random_workloads_give_the_same_tokens).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from pagedlab.errors import ModelNotFoundError
from pagedlab.model.loader import load_hf_folder
from pagedlab.twin import EngineSettings, TwinRequest, Workload, run_on_kit
from pagedlab.twin.hf_model import hf_model_dir
from pagedlab.twin.tiny_model import TINY_SHAPE, build_tiny_model, ensure_tiny_model


def test_the_builder_is_deterministic_and_has_smollm2s_shape(tmp_path: Path) -> None:
    a = build_tiny_model(tmp_path / "a", hf_model_dir())
    b = build_tiny_model(tmp_path / "b", hf_model_dir())
    wa, wb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    real = json.loads((hf_model_dir() / "config.json").read_text())
    tiny = json.loads((a / "config.json").read_text())
    assert {k: tiny[k] for k in TINY_SHAPE} == TINY_SHAPE
    same = ("vocab_size", "rope_parameters", "tie_word_embeddings", "eos_token_id", "rms_norm_eps", "model_type")
    assert {k: tiny[k] for k in same} == {k: real[k] for k in same}
    assert (a / "tokenizer.json").read_bytes() == (hf_model_dir() / "tokenizer.json").read_bytes()
    with pytest.raises(FileExistsError):
        build_tiny_model(a, hf_model_dir())


def test_the_kit_generates_transformers_greedy_tokens_from_the_folder() -> None:
    """The kit's twin side on the folder (``run_on_kit(..., model=folder)``) gives HF transformers' greedy
    tokens from the same folder; they vary, and the logits are far from ties (no flip on float rounding)."""
    from transformers import AutoModelForCausalLM

    folder = ensure_tiny_model()
    prompt = [1, 4000, 17, 30000, 9, 123, 49000, 77, 5000, 2500]
    ref = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.inference_mode():
        out = ref.generate(
            torch.tensor([prompt]),
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            do_sample=False,
            max_new_tokens=16,
            min_new_tokens=16,
            output_scores=True,
            return_dict_in_generate=True,
            pad_token_id=2,
        )
    want = out.sequences[0, len(prompt) :].tolist()
    top2 = torch.stack(out.scores)[:, 0].topk(2, dim=-1).values
    assert float((top2[:, 0] - top2[:, 1]).min()) > 1e-3
    assert len(set(want)) > 4, f"the tiny model repeats itself: {want}"
    sampling = {"temperature": 0.0, "max_tokens": 16, "ignore_eos": True}
    w = Workload("tiny", EngineSettings(num_gpu_blocks=4), [TwinRequest("a", prompt, sampling)])
    assert run_on_kit(w, model=folder).tokens["a"] == [want]


def test_load_hf_folder_refuses_a_folder_without_weights(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text((hf_model_dir() / "config.json").read_text())
    with pytest.raises(ModelNotFoundError, match="no model.safetensors"):
        load_hf_folder(tmp_path)
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        load_hf_folder(tmp_path / "missing")
