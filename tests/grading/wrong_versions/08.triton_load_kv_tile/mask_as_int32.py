"""Builds the mask as int32 lanes (`(pos < seq_len).to(tl.int32)`) instead of a bool (int1) block.

caught by: what only a GPU would show, read from your helper's code: masked table load, other=0.0, int64 ids
hint: keep the mask as the comparison's bool
pattern: what only a GPU would show (Triton)
"""
REPLACE = [
    ("    mask = pos < seq_len\n",
     "    mask = (pos < seq_len).to(tl.int32)\n"),
]
