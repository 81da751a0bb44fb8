"""Containment: running code you do not trust in a process of its own. It knows no grader and no exercise,
and imports nothing else of pagedlab (tests/test_layers.py). ``pagedlab.grading.sandbox`` applies it in order.

* ``rpc`` - the channel: remote objects between a trusted and an untrusted process, plain data over pipes.
* ``kernel`` - Landlock (files, network, signals) and a seccomp filter (no new process, program, exec memory).
* ``guard`` - the audit hook refusing, with a clear error, what the untrusted code may not do.
* ``limits``, ``reaper`` - a child's resource limits and preloads; children die with their parent.
"""
