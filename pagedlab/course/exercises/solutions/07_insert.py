# EXERCISE 07.insert
from pagedlab.grading.kit import TreeNode, new_tree, split_node, lock, unlock


def insert(root, key, value, now):
    """Cache ``key`` (token ids) with ``value`` (their KV slots, one per token) in the tree.

    Walk down like ``match_prefix`` (stamping ``last_access_time = now`` on the path, splitting a
    node where the new key leaves it). Tokens already in the tree keep their existing slots; the
    rest of ``key`` becomes ONE new leaf (with the matching part of ``value``) under the last
    node reached.

    Returns:
        how many leading tokens of ``key`` were already in the tree (the caller frees its own
        duplicate slots for those).
    """
    ### BEGIN SOLUTION
    node = root
    node.last_access_time = now
    key, value = list(key), list(value)
    total = 0
    while key and key[0] in node.children:
        child = node.children[key[0]]
        child.last_access_time = now
        n = 0
        while n < min(len(child.key), len(key)) and child.key[n] == key[n]:
            n += 1
        total += n
        key, value = key[n:], value[n:]
        node = split_node(child, n) if n < len(child.key) else child
    if key:
        node.children[key[0]] = TreeNode(key, value, node, now)
    return total
    ### END SOLUTION
