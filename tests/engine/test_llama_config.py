"""``LlamaConfig.from_hf``: every field from an HF config, by name, and HF's defaults for the optional ones."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pagedlab.model.llama import LlamaConfig

#: A tiny config, every value distinct: a field read under another's name shows.
HF_FIELDS = dict(
    vocab_size=100,
    hidden_size=48,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=6,
    num_key_value_heads=3,
    rms_norm_eps=1e-6,
    max_position_embeddings=256,
)


def test_from_hf_copies_every_field_of_a_new_config():
    hf = SimpleNamespace(**HF_FIELDS, head_dim=16, rope_parameters={"rope_theta": 500.0}, tie_word_embeddings=False)
    assert LlamaConfig.from_hf(hf) == LlamaConfig(**HF_FIELDS, head_dim=16, rope_theta=500.0, tie_word_embeddings=False)


def test_from_hf_derives_what_an_older_config_lacks():
    hf = SimpleNamespace(**HF_FIELDS, rope_theta=20000, head_dim=None)  # no rope_parameters, no tie flag
    cfg = LlamaConfig.from_hf(hf)
    assert cfg == LlamaConfig(**HF_FIELDS, head_dim=48 // 6, rope_theta=20000.0, tie_word_embeddings=True)
    assert isinstance(cfg.rope_theta, float)
    no_rope = LlamaConfig.from_hf(SimpleNamespace(**HF_FIELDS))
    assert (no_rope.rope_theta, no_rope.head_dim) == (10000.0, 8)  # HF's LlamaConfig default theta


def test_from_hf_names_a_missing_field():
    fields = {k: v for k, v in HF_FIELDS.items() if k != "rms_norm_eps"}
    with pytest.raises(AttributeError, match="rms_norm_eps"):
        LlamaConfig.from_hf(SimpleNamespace(**fields, head_dim=8))
