"""Checks the head of the queue but removes it with waiting.pop(), which takes the END of the deque.

caught by: three requests arriving together: prefill, then decode one token per step
hint: it does not wait for the whole batch to finish
"""
REPLACE = [
    ("""\
        waiting.popleft()
        running.append(req)
""",
     """\
        waiting.pop()
        running.append(req)
"""),
]
