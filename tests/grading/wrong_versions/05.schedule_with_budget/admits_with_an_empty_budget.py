"""Keeps admitting while budget >= 0: a request is admitted with 0 tokens once the budget is spent.

caught by: a budget used up exactly: nobody else joins in that step
hint: num_new_tokens must be an int >= 1, got 0
"""
REPLACE = [
    ('    while waiting and budget > 0 and len(running) < max_num_seqs:',
     '    while waiting and budget >= 0 and len(running) < max_num_seqs:'),
]
