"""Returns KiB per token (/ 1024) instead of bytes.

caught by: OPT-13B and LLaMA-13B in fp16: the vLLM paper's 800 KB per token
hint: return bytes, not KiB
not hint: no num_key_value_heads
"""
REPLACE = [
    ("    return 2 * layers * kv_heads * head_dim * DTYPE_BYTES[config[\"torch_dtype\"]]\n",
     "    return 2 * layers * kv_heads * head_dim * DTYPE_BYTES[config[\"torch_dtype\"]] // 1024\n"),
]
