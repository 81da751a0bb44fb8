# EXERCISE 07.evict
import heapq

from pagedlab.grading.kit import TreeNode, new_tree, split_node, lock, unlock


def evict(root, num_tokens):
    """Free at least ``num_tokens`` tokens by removing unlocked leaves, least recently used first.

    Only leaves (nodes without children) with ``lock_ref == 0`` may go, never the root. Repeatedly
    remove the leaf with the smallest ``(last_access_time, id)`` (``TreeNode`` orders that way, so a
    ``heapq`` of nodes works). When a removal leaves its parent without children, the parent becomes
    a leaf and may be evicted too (if unlocked and not the root). Stop once ``num_tokens`` tokens
    are freed or nothing evictable is left.

    Returns:
        the KV slots freed (each evicted node's ``value``), in eviction order.
    """
    ### BEGIN SOLUTION
    leaves, stack = [], [root]
    while stack:
        node = stack.pop()
        if node.children:
            stack.extend(node.children.values())
        elif node is not root and node.lock_ref == 0:
            leaves.append(node)
    heapq.heapify(leaves)
    freed, evicted = [], 0
    while evicted < num_tokens and leaves:
        x = heapq.heappop(leaves)
        freed += x.value
        evicted += len(x.key)
        parent = x.parent
        del parent.children[x.key[0]]
        if parent is not root and not parent.children and parent.lock_ref == 0:
            heapq.heappush(leaves, parent)
    return freed
    ### END SOLUTION
