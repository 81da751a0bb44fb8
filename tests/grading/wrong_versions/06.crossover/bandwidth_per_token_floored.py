"""Computes the tokens per second PCIe moves with floor division (pcie_bandwidth // kv_bytes_per_token), dropping the fraction of a token.

caught by: LLaMA-13B on an A100 (the vLLM paper's setting)
hint: close, but off by a relative
"""
REPLACE = [
    ('    return num_params * pcie_bandwidth / kv_bytes_per_token',
     '    return num_params * (pcie_bandwidth // kv_bytes_per_token)'),
]
