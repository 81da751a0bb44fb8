"""Returns the crossover rounded to three significant digits, as it would print it.

caught by: LLaMA-13B on an A100 (the vLLM paper's setting)
hint: close, but off by a relative
"""
REPLACE = [
    ('    return num_params * pcie_bandwidth / kv_bytes_per_token',
     '    return float(f"{num_params * pcie_bandwidth / kv_bytes_per_token:.3g}")'),
]
