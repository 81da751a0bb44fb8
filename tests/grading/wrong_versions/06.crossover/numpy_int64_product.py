"""Multiplies the inputs as numpy int64 (np.prod): params x bandwidth overflows int64 (above 9.2e18) and wraps around.

caught by: LLaMA-13B on an A100 (the vLLM paper's setting)
"""
REPLACE = [
    ('    return num_params * pcie_bandwidth / kv_bytes_per_token',
     """\
    import numpy as np
    return float(np.prod(np.array([num_params, pcie_bandwidth], dtype=np.int64)) / kv_bytes_per_token)"""),
]
