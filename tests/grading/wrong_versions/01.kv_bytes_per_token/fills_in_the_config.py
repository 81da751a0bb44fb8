"""Fills the missing fields into the caller's config (config.setdefault) before computing.

caught by: OPT-13B and LLaMA-13B in fp16: the vLLM paper's 800 KB per token
hint: your function changed `config`
pattern: changes an input it only reads
"""
REPLACE = [
    ("""\
    kv_heads = config.get("num_key_value_heads") or config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
""",
     """\
    config.setdefault("num_key_value_heads", config["num_attention_heads"])
    config.setdefault("head_dim", config["hidden_size"] // config["num_attention_heads"])
    kv_heads = config["num_key_value_heads"] or config["num_attention_heads"]
    head_dim = config["head_dim"] or config["hidden_size"] // config["num_attention_heads"]
"""),
]
