"""Masks the cache load but gives no other=0.0: a masked lane's value is undefined on a GPU (the interpreter gives 0).

caught by: what only a GPU would show, read from your helper's code: masked table load, other=0.0, int64 ids
hint: needs other=0.0
pattern: what only a GPU would show (Triton)
"""
REPLACE = [
    ('tile = tl.load(cache_ptr + rows[:, None] + offs_d[None, :], mask=mask[:, None], other=0.0)',
     'tile = tl.load(cache_ptr + rows[:, None] + offs_d[None, :], mask=mask[:, None])'),
]
