"""get_all_free_blocks pops every block to list them, leaving the queue empty.

caught by: get_all_free_blocks lists the queue front first
hint: get_all_free_blocks only reads
pattern: changes an input it only reads
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
        out = []
        while self.num_free_blocks:
            out.append(self.popleft())
        return out
"""),
]
