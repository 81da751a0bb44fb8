"""Off by one: keeps evicting while evicted <= num_tokens (one node too many).

caught by: the least recently used leaf goes first
hint: then you evicted more
"""
REPLACE = [
    ('    while evicted < num_tokens and leaves:',
     '    while evicted <= num_tokens and leaves:'),
]
