"""Most recently used first.

caught by: the least recently used leaf goes first
hint: smallest (last_access_time, id) first
"""
REPLACE = [
    ('    heapq.heapify(leaves)\n',
     '    leaves.sort(reverse=True)\n'),
    ('        x = heapq.heappop(leaves)\n',
     '        x = leaves.pop(0)\n'),
    ('            heapq.heappush(leaves, parent)\n',
     '            leaves.append(parent)\n'),
]
