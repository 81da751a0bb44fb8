# EXERCISE 04.schedule_step
def schedule_step(running, waiting, kv_cache_manager, max_num_seqs):
    """One step of continuous (iteration-level) batching.

    ``running`` is a list and ``waiting`` a ``collections.deque`` of ``Request`` objects; a request
    still misses ``request.num_tokens - request.num_computed_tokens`` tokens (its whole prompt at
    first, then 1 per step: the token sampled last step).

    1. Every running request, in order, is scheduled for all its missing tokens; reserve their KV
       slots with ``kv_cache_manager.allocate_slots(request, n)`` (in this lab the pool always has
       room for running requests).
    2. Then waiting requests join, first come first served, while fewer than ``max_num_seqs``
       requests run: ``allocate_slots(request, n)`` for all its missing tokens; if it returns
       ``None`` the pool is full - stop (no request may overtake the head of the queue). An
       admitted request moves from the front of ``waiting`` to the end of ``running``.

    Do not change ``num_computed_tokens`` (the engine advances it after the step).

    Returns:
        ``{request_id: number of tokens scheduled}`` for this step.
    """
    ### BEGIN SOLUTION
    scheduled = {}
    for req in running:
        n = req.num_tokens - req.num_computed_tokens
        if n > 0:
            kv_cache_manager.allocate_slots(req, n)
            scheduled[req.request_id] = n
    while waiting and len(running) < max_num_seqs:
        req = waiting[0]
        n = req.num_tokens - req.num_computed_tokens
        if kv_cache_manager.allocate_slots(req, n) is None:
            break
        waiting.popleft()
        running.append(req)
        scheduled[req.request_id] = n
    return scheduled
    ### END SOLUTION
