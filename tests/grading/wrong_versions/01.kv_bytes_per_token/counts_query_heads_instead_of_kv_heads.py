"""Counts query heads instead of KV heads.

caught by: grouped-query attention: LLaMA-3-8B and LLaMA-3-70B
hint: with grouped-query attention only the 8 KV heads
"""
REPLACE = [
    ('config.get("num_key_value_heads") or config["num_attention_heads"]',
     'config["num_attention_heads"]'),
]
