"""Off by one at the block boundary: allocates a new block when num_tokens % block_size == 1.

caught by: a token that starts a new block allocates one
hint: so it needs 3 blocks
"""
REPLACE = [
    ("""\
    if seq.num_tokens % pool.block_size == 0:
""",
     """\
    if seq.num_tokens % pool.block_size == 1 or not seq.block_table:
"""),
]
