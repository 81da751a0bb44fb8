"""Reads num_key_value_heads with .get(key, default): a config that has the key set to null (None) crashes.

caught by: random cases against the reference, whole state compared
"""
REPLACE = [
    ('kv_heads = config.get("num_key_value_heads") or config["num_attention_heads"]',
     'kv_heads = config.get("num_key_value_heads", config["num_attention_heads"])'),
]
