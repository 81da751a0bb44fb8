"""Computes in numpy float32: a near miss (relative error about 1e-7).

caught by: LLaMA-13B on an A100 (the vLLM paper's setting)
hint: close, but off by a relative
not hint: upside down
"""
REPLACE = [
    ('return num_params * pcie_bandwidth / kv_bytes_per_token',
     """\
import numpy as np
    return float(np.float32(num_params) * np.float32(pcie_bandwidth) / np.float32(kv_bytes_per_token))"""),
]
