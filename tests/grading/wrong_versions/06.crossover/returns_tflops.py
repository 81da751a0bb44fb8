"""Returns TFLOP/s (/ 1e12) instead of FLOP/s.

caught by: LLaMA-13B on an A100 (the vLLM paper's setting)
hint: off by a factor of 1e12
"""
REPLACE = [
    ("    return num_params * pcie_bandwidth / kv_bytes_per_token\n",
     "    return num_params * pcie_bandwidth / kv_bytes_per_token / 1e12\n"),
]
