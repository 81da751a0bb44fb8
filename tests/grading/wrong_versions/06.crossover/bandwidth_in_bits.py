"""Treats pcie_bandwidth as bits per second (multiplies bytes by 8).

caught by: LLaMA-13B on an A100 (the vLLM paper's setting)
hint: off by a factor of 8
"""
REPLACE = [
    ('return num_params * pcie_bandwidth / kv_bytes_per_token',
     'return num_params * pcie_bandwidth / (8 * kv_bytes_per_token)'),
]
