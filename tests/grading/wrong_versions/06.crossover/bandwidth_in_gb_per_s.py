"""Converts pcie_bandwidth to GB/s first (/ 1e9), though it is given in bytes/s.

caught by: LLaMA-13B on an A100 (the vLLM paper's setting)
hint: off by a factor of 1e9
"""
REPLACE = [
    ("    return num_params * pcie_bandwidth / kv_bytes_per_token\n",
     "    return num_params * (pcie_bandwidth / 1e9) / kv_bytes_per_token\n"),
]
