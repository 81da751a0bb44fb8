# EXERCISE 05.schedule_with_budget
def schedule_with_budget(running, waiting, kv_cache_manager, max_num_seqs, max_num_batched_tokens,
                         long_prefill_token_threshold):
    """One step of continuous batching with chunked prefill under a token budget (vLLM v1).

    As ``schedule_step``, but a step computes at most ``max_num_batched_tokens`` tokens in total.
    Each request (running ones first, in order, then waiting ones, first come first served) gets

        n = min(missing tokens, long_prefill_token_threshold (only if > 0), budget left)

    tokens, and the budget shrinks by ``n``. A prompt that does not fit is split into chunks
    over several steps: a waiting request is admitted even when it only gets part of its prompt.
    Stop scheduling once the budget is used up. Waiting requests join only while fewer than
    ``max_num_seqs`` run and ``kv_cache_manager.allocate_slots(request, n)`` succeeds (``None``:
    the pool is full; stop).

    Returns:
        ``{request_id: number of tokens scheduled}`` for this step.
    """
    ### BEGIN SOLUTION
    scheduled = {}
    budget = max_num_batched_tokens

    def chunk(req):
        n = req.num_tokens - req.num_computed_tokens
        if long_prefill_token_threshold > 0:
            n = min(n, long_prefill_token_threshold)
        return min(n, budget)

    for req in running:
        if budget <= 0:
            break
        n = chunk(req)
        if n <= 0:
            continue
        kv_cache_manager.allocate_slots(req, n)
        scheduled[req.request_id] = n
        budget -= n
    while waiting and budget > 0 and len(running) < max_num_seqs:
        req = waiting[0]
        n = chunk(req)
        if kv_cache_manager.allocate_slots(req, n) is None:
            break
        waiting.popleft()
        running.append(req)
        scheduled[req.request_id] = n
        budget -= n
    return scheduled
    ### END SOLUTION
