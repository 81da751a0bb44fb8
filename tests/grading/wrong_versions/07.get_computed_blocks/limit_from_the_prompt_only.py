"""Caps the hit with the prompt's length (num_prompt_tokens) instead of all the request's tokens: a preempted request, whose generated tokens are hashed too, hits fewer blocks than it has cached.

caught by: random cases against the reference, whole state compared
hint: every block up to the first miss hits
"""
REPLACE = [
    ('max_blocks = (request.num_tokens - 1) // block_size',
     'max_blocks = (request.num_prompt_tokens - 1) // block_size'),
]
