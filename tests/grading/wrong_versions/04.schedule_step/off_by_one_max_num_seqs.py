"""Off by one at the cap: admits while len(running) <= max_num_seqs.

caught by: max_num_seqs caps the batch; a finished request's place is refilled
hint: nobody behind it may join
pattern: more requests than max_num_seqs
"""
REPLACE = [
    ('while waiting and len(running) < max_num_seqs:',
     'while waiting and len(running) <= max_num_seqs:'),
]
