"""Returns a one-element tuple (a trailing comma after the expression) instead of the number.

caught by: LLaMA-13B on an A100 (the vLLM paper's setting)
"""
REPLACE = [
    ('    return num_params * pcie_bandwidth / kv_bytes_per_token',
     '    return num_params * pcie_bandwidth / kv_bytes_per_token,'),
]
