"""Swaps in every swapped request that fits, skipping one that does not (the head of swapped may be overtaken).

caught by: random cases against the reference, whole state compared
hint: swapped requests come back in order
engine: a different swap-in order within every contract the engine checks: the tokens are the same; check() compares the queues
"""
REPLACE = [
    ("""\
    while not preempted and swapped and len(running) < max_num_seqs:
        req = swapped[0]
        if not kv_cache_manager.can_swap_in([req]):
            break
        swapped.popleft()
""",
     """\
    for req in list(swapped) if not preempted else []:
        if len(running) >= max_num_seqs:
            break
        if not kv_cache_manager.can_swap_in([req]):
            continue
        swapped.remove(req)
"""),
]
