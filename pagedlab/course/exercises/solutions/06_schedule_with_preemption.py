# EXERCISE 06.schedule_with_preemption
def schedule_with_preemption(running, waiting, swapped, kv_cache_manager, max_num_seqs, policy, preemption_mode):
    """One step of continuous batching that preempts when the KV cache is full (vLLM v1 ``Scheduler.schedule``;
    swap as vLLM v0).

    ``running`` is a list, ``waiting`` and ``swapped`` are ``collections.deque``s of ``Request``s; a request
    misses ``num_tokens - num_computed_tokens`` tokens.

    1. Each running request, in order, gets all its missing tokens. While
       ``kv_cache_manager.allocate_slots(request, n)`` returns ``None``, preempt a victim and retry:

       * the victim: ``policy == "fcfs"``: the end of ``running``; ``"priority"``: the largest
         ``(priority, arrival_time)``. It leaves ``running`` (and this step's schedule, if it was in it);
       * ``preemption_mode == "swap"`` and ``kv_cache_manager.can_swap_out([victim])``:
         ``kv_cache_manager.swap_out([victim])``, then append it to ``swapped``;
       * otherwise recompute: ``kv_cache_manager.free(victim)``, ``victim.num_computed_tokens = 0``, and
         put it back at the **front** of ``waiting``;
       * if the victim was the request itself, stop: schedule no more running requests this step.
    2. Only if nothing was preempted in this step: swapped requests come back first, in order, while fewer than
       ``max_num_seqs`` run and ``kv_cache_manager.can_swap_in([r])``: ``swap_in([r])``, append to
       ``running``, and schedule its missing tokens if ``allocate_slots`` succeeds.
    3. Only if nothing was preempted and nothing is swapped out: admit waiting requests as ``schedule_step``
       (lab 04) does.

    Returns:
        ``({request_id: tokens scheduled}, [ids preempted in this step, in order])``.
    """
    ### BEGIN SOLUTION
    scheduled, preempted = {}, []
    i = 0
    while i < len(running):
        req = running[i]
        n = req.num_tokens - req.num_computed_tokens
        if n <= 0:
            i += 1
            continue
        while kv_cache_manager.allocate_slots(req, n) is None:
            if policy == "priority":
                victim = max(running, key=lambda r: (r.priority, r.arrival_time))
            else:
                victim = running[-1]
            running.remove(victim)
            scheduled.pop(victim.request_id, None)
            preempted.append(victim.request_id)
            if preemption_mode == "swap" and kv_cache_manager.can_swap_out([victim]):
                kv_cache_manager.swap_out([victim])
                swapped.append(victim)
            else:
                kv_cache_manager.free(victim)
                victim.num_computed_tokens = 0
                waiting.appendleft(victim)
            if victim is req:
                break
        if req not in running:
            break
        scheduled[req.request_id] = n
        i = running.index(req) + 1
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
    while not preempted and not swapped and waiting and len(running) < max_num_seqs:
        req = waiting[0]
        n = req.num_tokens - req.num_computed_tokens
        if kv_cache_manager.allocate_slots(req, n) is None:
            break
        waiting.popleft()
        running.append(req)
        scheduled[req.request_id] = n
    return scheduled, preempted
    ### END SOLUTION
