"""Applies long_prefill_token_threshold only while a request is in its prompt (num_computed_tokens < num_prompt_tokens): a running request several tokens behind gets them all at once.

caught by: random cases against the reference, whole state compared
hint: a chunk may not exceed long_prefill_token_threshold
engine: a running request past its prompt misses one token a step in this engine, never more than the threshold: the cap only matters in the prompt
"""
REPLACE = [
    ("""\
        if long_prefill_token_threshold > 0:
""",
     """\
        if long_prefill_token_threshold > 0 and req.num_computed_tokens < req.num_prompt_tokens:
"""),
]
