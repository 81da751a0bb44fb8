"""Converts kv_bytes_per_token to KiB (/ 1024) before dividing.

caught by: LLaMA-13B on an A100 (the vLLM paper's setting)
hint: off by a factor of 1024
"""
REPLACE = [
    ("    return num_params * pcie_bandwidth / kv_bytes_per_token\n",
     "    return num_params * pcie_bandwidth / (kv_bytes_per_token / 1024)\n"),
]
