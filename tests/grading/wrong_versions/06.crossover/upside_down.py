"""Upside down.

caught by: LLaMA-13B on an A100 (the vLLM paper's setting)
hint: upside down?
"""
REPLACE = [
    ('return num_params * pcie_bandwidth / kv_bytes_per_token',
     'return kv_bytes_per_token / (num_params * pcie_bandwidth)'),
]
