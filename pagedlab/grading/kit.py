"""The learner-facing kit of labs 03 and 07 (``RefCountedPool``, ``Seq``; ``TreeNode`` and helpers).

The classes live in :mod:`pagedlab.analysis.kit` (below ``grading``, so lab helpers can use them
without importing the grader); this module is the name the notebooks and exercises import::

    from pagedlab.grading.kit import RefCountedPool, Seq            # lab 03
    from pagedlab.grading.kit import TreeNode, new_tree, split_node, lock, unlock   # lab 07
"""

from __future__ import annotations

from pagedlab.analysis.kit import (
    RefCountedPool,
    Seq,
    TreeNode,
    format_tree,
    lock,
    new_tree,
    split_node,
    tree_size,
    unlock,
)

__all__ = ["RefCountedPool", "Seq", "TreeNode", "new_tree", "split_node", "lock", "unlock", "tree_size", "format_tree"]
