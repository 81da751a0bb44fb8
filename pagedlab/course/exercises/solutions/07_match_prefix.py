# EXERCISE 07.match_prefix
from pagedlab.grading.kit import TreeNode, new_tree, split_node, lock, unlock


def match_prefix(root, key, now):
    """The longest prefix of ``key`` (token ids) cached in the tree under ``root``.

    Walk down from the root, choosing at each node the child whose key starts with the next token.
    Stamp ``last_access_time = now`` on every node you pass (the root included). If the match
    ends inside a node's key, split that node with ``split_node`` so that the returned node covers
    exactly the matched tokens.

    Returns:
        ``(value, last_node)``: the KV slots of the matched tokens (one per token, in order) and the
        deepest node of the match (the root if nothing matched).
    """
    ### BEGIN SOLUTION
    node = root
    node.last_access_time = now
    value = []
    key = list(key)
    while key and key[0] in node.children:
        child = node.children[key[0]]
        child.last_access_time = now
        n = 0
        while n < min(len(child.key), len(key)) and child.key[n] == key[n]:
            n += 1
        if n < len(child.key):
            node = split_node(child, n)
            value += node.value
            break
        value += child.value
        node = child
        key = key[n:]
    return value, node
    ### END SOLUTION
