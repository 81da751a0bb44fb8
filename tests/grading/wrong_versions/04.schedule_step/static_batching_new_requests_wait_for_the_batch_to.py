"""Static batching: new requests wait for the batch to drain.

caught by: three requests arriving together: prefill, then decode one token per step
hint: it does not wait for the whole batch to finish
engine: static batching is a slower schedule that keeps every contract the engine checks (order, slots, max_num_seqs); check() compares the schedule with continuous batching's
"""
REPLACE = [
    ('while waiting and len(running) < max_num_seqs:',
     'while waiting and not running and len(running) < max_num_seqs:'),
]
