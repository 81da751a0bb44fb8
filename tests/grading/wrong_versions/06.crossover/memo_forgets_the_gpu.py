"""Memoizes the crossover per model ((num_params, kv_bytes_per_token) as the key): the same model on a second GPU gets the first GPU's crossover.

caught by: random cases against the reference, whole state compared
hint: that is the crossover of an earlier call
"""
REPLACE = [
    ('    return num_params * pcie_bandwidth / kv_bytes_per_token',
     """\
    key = (num_params, kv_bytes_per_token)
    if key not in _CROSSOVERS:
        _CROSSOVERS[key] = num_params * pcie_bandwidth / kv_bytes_per_token
    return _CROSSOVERS[key]"""),
    ('def crossover_flops_per_s(', '_CROSSOVERS = {}\n\n\ndef crossover_flops_per_s('),
]
