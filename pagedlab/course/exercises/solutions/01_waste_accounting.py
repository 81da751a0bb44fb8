# EXERCISE 01.waste_accounting
def waste_accounting(snapshot):
    """Classify every token slot of a contiguous KV arena (the pre-PagedAttention allocator).

    ``snapshot`` is a dict::

        {"capacity": 64,                 # token slots in the arena
         "requests": [                   # running requests, each with one contiguous reservation
             {"id": "r0", "start": 0, "reserved": 24, "num_tokens": 7, "final_len": 20}, ...],
         "next_request_size": 16}        # slots the request at the head of the queue needs (0: none)

    Returns a dict of five ints that add up to ``capacity``:

    * ``used``        - slots holding a token's KV (``num_tokens`` per request);
    * ``reservation`` - reserved for tokens the request will still generate (up to ``final_len``);
    * ``internal``    - reserved but never used (beyond ``final_len``);
    * ``external``    - free slots in holes too small for the next request;
    * ``free``        - all other free slots.
    """
    ### BEGIN SOLUTION
    acc = {"used": 0, "reservation": 0, "internal": 0, "external": 0, "free": 0}
    for r in snapshot["requests"]:
        acc["used"] += r["num_tokens"]
        acc["reservation"] += r["final_len"] - r["num_tokens"]
        acc["internal"] += r["reserved"] - r["final_len"]
    need = snapshot["next_request_size"]
    pos = 0
    holes = []
    for r in sorted(snapshot["requests"], key=lambda r: r["start"]):
        if r["start"] > pos:
            holes.append(r["start"] - pos)
        pos = r["start"] + r["reserved"]
    if snapshot["capacity"] > pos:
        holes.append(snapshot["capacity"] - pos)
    for h in holes:
        acc["external" if h < need else "free"] += h
    return acc
    ### END SOLUTION
