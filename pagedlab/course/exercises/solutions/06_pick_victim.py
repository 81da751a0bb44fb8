# EXERCISE 06.pick_victim
def pick_victim(running, policy):
    """The running request to preempt when the KV cache is full (vLLM v1 ``Scheduler``).

    ``running`` lists the running requests in the order they were admitted (each a
    ``pagedlab.request.Request`` with ``request_id``, ``priority`` and ``arrival_time``).

    * ``policy == "fcfs"``: the request admitted last - the end of the running list.
    * ``policy == "priority"``: the least important request: the largest ``(priority, arrival_time)``
      (a larger priority value means less important; among equals, the later arrival).

    Returns one of the requests in ``running`` (do not remove it from the list).
    """
    ### BEGIN SOLUTION
    if policy == "priority":
        return max(running, key=lambda r: (r.priority, r.arrival_time))
    return running[-1]
    ### END SOLUTION
