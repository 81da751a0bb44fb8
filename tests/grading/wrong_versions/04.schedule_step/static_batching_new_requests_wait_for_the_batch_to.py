"""Static batching: new requests wait for the batch to drain.

caught by: three requests arriving together: prefill, then decode one token per step
hint: it does not wait for the whole batch to finish
"""
REPLACE = [
    ('while waiting and len(running) < max_num_seqs:',
     'while waiting and not running and len(running) < max_num_seqs:'),
]
