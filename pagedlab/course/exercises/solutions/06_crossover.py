# EXERCISE 06.crossover
def crossover_flops_per_s(num_params, kv_bytes_per_token, pcie_bandwidth):
    """The effective FLOP/s at which recomputing a preempted request costs as much as swapping it.

    For a request holding T tokens of KV:

    * swap: its KV goes to host memory and later comes back over PCIe (``pcie_bandwidth`` bytes/s
      in each direction), ``kv_bytes_per_token`` bytes per token each way;
    * recompute: its T tokens are prefilled again, 2 FLOPs per parameter per token.

    With more FLOP/s than the crossover, recomputing is faster; with less, swapping is.

    Returns:
        FLOP/s, a float (or int).
    """
    ### BEGIN SOLUTION
    # swap = 2 * T * kv / pcie ; recompute = 2 * P * T / F ; equal when F = P * pcie / kv (T cancels)
    return num_params * pcie_bandwidth / kv_bytes_per_token
    ### END SOLUTION
