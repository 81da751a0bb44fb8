"""Ignores long_prefill_token_threshold.

caught by: long_prefill_token_threshold caps a chunk even when budget remains
hint: a chunk may not exceed long_prefill_token_threshold
"""
REPLACE = [
    ('if long_prefill_token_threshold > 0:',
     'if False:'),
]
