"""Plain-data snapshots of learner-facing structures the grader draws and compares.

``tree_state`` reads a radix tree (the kit's :class:`~pagedlab.core.radix_cache.TreeNode` or a learner's
object, possibly a proxy into the learner's process under ``pagedlab grade``) into nested dicts: lab 07's
tests observe it, and :mod:`pagedlab.grading.plug` draws the engine's tree from it when a plugged part fails.
"""

from __future__ import annotations

from typing import Any

from pagedlab.containment.rpc import is_a

__all__ = ["tree_state"]


def tree_state(root: Any) -> dict[str, Any]:
    """Plain nested snapshot (children sorted by first token; ids in depth-first order)."""
    counter = [0]

    def dump(node: Any, child_key: Any, parent: Any) -> dict[str, Any]:
        kids = []
        children = getattr(node, "children", {})
        items = (
            sorted(children.items(), key=lambda kv: (str(type(kv[0])), repr(kv[0]))) if is_a(children, dict) else []
        )  # children may live in the learner's process (pagedlab grade)
        d = {
            "key": list(getattr(node, "key", [])),
            "value": list(getattr(node, "value", [])),
            "lock_ref": getattr(node, "lock_ref", None),
            "last_access_time": getattr(node, "last_access_time", None),
            "child_key": child_key,
            "parent_ok": getattr(node, "parent", None) is parent,
        }
        d["id"] = counter[0]
        counter[0] += 1
        for k, c in items:
            if counter[0] > 10_000:
                break
            kids.append(dump(c, k, node))
        d["children"] = kids
        return d

    return dump(root, None, None)
