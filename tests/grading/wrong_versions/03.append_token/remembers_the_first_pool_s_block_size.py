"""Remembers block_size from the first pool it sees: another pool alive at once (another block size) is misread.

caught by: beam search: beams forked in the middle of decoding
hint: so it needs 3 blocks
engine: the engine has one GPU pool of one block size, so the first block size seen is always the right one
"""
REPLACE = [
    ("""\
def append_token(pool, seq):
""",
     """\
_BLOCK_SIZE = []


def append_token(pool, seq):
"""),
    ("""\
    copy = None
    if seq.num_tokens % pool.block_size == 0:
""",
     """\
    copy = None
    if not _BLOCK_SIZE:
        _BLOCK_SIZE.append(pool.block_size)
    if seq.num_tokens % _BLOCK_SIZE[0] == 0:
"""),
]
