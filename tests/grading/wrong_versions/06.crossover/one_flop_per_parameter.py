"""Counts 1 FLOP per parameter per token for the recompute (a multiply-add is 2).

caught by: LLaMA-13B on an A100 (the vLLM paper's setting)
hint: half
"""
REPLACE = [
    ('return num_params * pcie_bandwidth / kv_bytes_per_token',
     'return num_params * pcie_bandwidth / (2 * kv_bytes_per_token)'),
]
