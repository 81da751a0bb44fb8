"""Swap counted one way only.

caught by: LLaMA-13B on an A100 (the vLLM paper's setting)
hint: twice too high
"""
REPLACE = [
    ('return num_params * pcie_bandwidth / kv_bytes_per_token',
     'return 2 * num_params * pcie_bandwidth / kv_bytes_per_token'),
]
