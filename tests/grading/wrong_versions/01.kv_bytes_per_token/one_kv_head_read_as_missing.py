"""Uses 1 as the 'missing' default of num_key_value_heads, so a multi-query model (1 KV head) counts every head.

caught by: random cases against the reference, whole state compared
hint: with grouped-query attention only the 1 KV heads
"""
REPLACE = [
    ('kv_heads = config.get("num_key_value_heads") or config["num_attention_heads"]',
     """kv_heads = config.get("num_key_value_heads") or 1
    if kv_heads == 1:  # no grouped-query attention
        kv_heads = config["num_attention_heads"]"""),
]
