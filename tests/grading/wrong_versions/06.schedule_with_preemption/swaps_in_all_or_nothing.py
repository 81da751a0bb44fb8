"""Swaps the whole swapped queue back in as one group (can_swap_in(list(swapped))): when only the first few fit, none comes back.

caught by: swap: the victim moves to the CPU pool and comes back before any waiting request
engine: a slower swap-in within every contract the engine checks: the tokens are the same; check() compares the schedule
"""
REPLACE = [
    ("""\
    while not preempted and swapped and len(running) < max_num_seqs:
        req = swapped[0]
        if not kv_cache_manager.can_swap_in([req]):
            break
        swapped.popleft()
        kv_cache_manager.swap_in([req])
        running.append(req)
        n = req.num_tokens - req.num_computed_tokens
        if n > 0 and kv_cache_manager.allocate_slots(req, n) is not None:
            scheduled[req.request_id] = n
""",
     """\
    group = list(swapped)[: max(0, max_num_seqs - len(running))]
    if not preempted and group and kv_cache_manager.can_swap_in(group):
        kv_cache_manager.swap_in(group)
        for req in group:
            swapped.popleft()
            running.append(req)
            n = req.num_tokens - req.num_computed_tokens
            if n > 0 and kv_cache_manager.allocate_slots(req, n) is not None:
                scheduled[req.request_id] = n
"""),
]
