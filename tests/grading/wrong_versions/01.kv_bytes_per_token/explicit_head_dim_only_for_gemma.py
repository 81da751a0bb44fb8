"""Uses an explicit head_dim only for Gemma models (keyed on model_type), not for Qwen3 or Mistral-Nemo.

caught by: random cases against the reference, whole state compared
"""
REPLACE = [
    ('head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]',
     """if config["model_type"].startswith("gemma"):
        head_dim = config["head_dim"]
    else:
        head_dim = config["hidden_size"] // config["num_attention_heads"]"""),
]
