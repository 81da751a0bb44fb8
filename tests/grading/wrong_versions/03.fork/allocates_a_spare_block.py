"""Allocates a fresh block for the child's next token at fork time.

caught by: fork shares every block and allocates nothing
hint: a reference was never given back
"""
REPLACE = [
    ('    return Seq(child_id, list(parent.block_table), parent.num_tokens)',
     """\
    pool.allocate()
    return Seq(child_id, list(parent.block_table), parent.num_tokens)"""),
]
