"""Memoizes the crossover by the model's size alone (num_params as the key): another KV layout or GPU for a model of that size gets the first one's crossover.

caught by: random cases against the reference, whole state compared
hint: that is the crossover of an earlier call
"""
REPLACE = [
    ('    return num_params * pcie_bandwidth / kv_bytes_per_token',
     """\
    if num_params not in _CROSSOVERS:
        _CROSSOVERS[num_params] = num_params * pcie_bandwidth / kv_bytes_per_token
    return _CROSSOVERS[num_params]"""),
    ('def crossover_flops_per_s(', '_CROSSOVERS = {}\n\n\ndef crossover_flops_per_s('),
]
