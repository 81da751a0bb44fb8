"""Does not charge waiting requests to the budget.

caught by: a budget used up exactly: nobody else joins in that step
hint: more than max_num_batched_tokens
"""
REPLACE = [
    ("""\
        scheduled[req.request_id] = n
        budget -= n
    return scheduled""",
     """\
        scheduled[req.request_id] = n
    return scheduled"""),
]
