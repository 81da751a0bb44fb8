"""Takes head_dim whenever the key is in the config: a config with "head_dim": null crashes.

caught by: random cases against the reference, whole state compared
"""
REPLACE = [
    ('head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]',
     """if "head_dim" in config:
        head_dim = config["head_dim"]
    else:
        head_dim = config["hidden_size"] // config["num_attention_heads"]"""),
]
