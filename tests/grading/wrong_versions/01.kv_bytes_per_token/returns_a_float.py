"""Returns a float.

caught by: OPT-13B and LLaMA-13B in fp16: the vLLM paper's 800 KB per token
hint: return an int
pattern: returns another container or number type
"""
REPLACE = [
    ('return 2 * layers',
     'return 2.0 * layers'),
]
