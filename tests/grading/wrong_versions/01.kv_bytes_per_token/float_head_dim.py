"""Divides hidden_size / num_attention_heads with /, returning a float.

caught by: OPT-13B and LLaMA-13B in fp16: the vLLM paper's 800 KB per token
hint: return an int
pattern: returns another container or number type
"""
REPLACE = [
    ('config["hidden_size"] // config["num_attention_heads"]',
     'config["hidden_size"] / config["num_attention_heads"]'),
]
