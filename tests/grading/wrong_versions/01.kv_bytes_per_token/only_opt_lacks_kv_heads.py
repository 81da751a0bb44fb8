"""Treats OPT as the only model without num_key_value_heads (keyed on model_type): other MHA configs crash.

caught by: random cases against the reference, whole state compared
"""
REPLACE = [
    ('kv_heads = config.get("num_key_value_heads") or config["num_attention_heads"]',
     """if config["model_type"] == "opt":
        kv_heads = config["num_attention_heads"]
    else:
        kv_heads = config["num_key_value_heads"]"""),
]
