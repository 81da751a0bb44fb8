"""Writes get_all_free_blocks as a generator (yield): the caller gets no list (no len(), no indexing, one pass only).

caught by: get_all_free_blocks lists the queue front first
hint: get_all_free_blocks returned a generator, not a list
hint: the contract of get_all_free_blocks
pattern: returns another container or number type
engine: the engine never calls get_all_free_blocks while it serves (traces, widgets and the vLLM twin read the queue; not the scheduler)
"""
REPLACE = [
    ("""\
        out = []
        block = self.fake_free_list_head.next_free_block
        while block is not self.fake_free_list_tail:
            out.append(block)
            block = block.next_free_block
        return out
""",
     """\
        block = self.fake_free_list_head.next_free_block
        while block is not self.fake_free_list_tail:
            yield block
            block = block.next_free_block
"""),
]
