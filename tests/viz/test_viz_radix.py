"""render_radix_tree over real RadixCache snapshots: spans, locks, splits, evictions."""

from pagedlab.core.radix_cache import RadixCache
from pagedlab.viz import radix_frames, render_radix_tree


def _nodes(svg):
    return {int(g.get("data-node-id")): g for g in svg.all("g", "pl-radix-node")}


def test_tree_nodes_locks_and_sizes(parse_svg):
    rc = RadixCache()
    rc.insert([1, 2, 3, 4, 5, 6])
    rc.insert([1, 2, 3, 9, 9])  # splits [1..6] at 3
    rc.insert([7, 8])
    _, node = rc.match_prefix([1, 2, 3, 4])
    rc.inc_lock_ref(node)
    svg = parse_svg(render_radix_tree(rc))  # a RadixCache is accepted directly
    nodes = _nodes(svg)
    assert len(nodes) == len(rc.nodes()) + 1  # + root
    states = {g.get("data-state") for g in nodes.values()}
    assert states == {"root", "locked", "evictable"}
    locked_tokens = sum(int(g.get("data-len")) for g in nodes.values() if g.get("data-state") == "locked")
    assert locked_tokens == rc.protected_size()
    free_tokens = sum(int(g.get("data-len")) for g in nodes.values() if g.get("data-state") == "evictable")
    assert free_tokens == rc.evictable_size()
    assert svg.root.get("data-protected") == str(rc.protected_size())
    # every non-root node has an edge to its parent
    assert len(svg.all("path", "pl-radix-edge")) == len(rc.nodes())
    assert any(t.startswith("1 2 3") for t in svg.texts())


def test_frames_mark_evicted_and_new_nodes(parse_svg):
    rc = RadixCache()
    s0 = rc.snapshot()
    rc.insert([1, 2, 3, 4])
    s1 = rc.snapshot()
    rc.insert([1, 2, 9])  # split: a new parent [1,2] and a new leaf [9]
    s2 = rc.snapshot()
    rc.evict(1, lambda v: None)  # LRU leaf first
    s3 = rc.snapshot()
    frames = radix_frames([s0, s1, s2, s3])
    assert len(frames) == 4
    assert frames[0]["evicted"] == [] and frames[0]["new_ids"] == []
    assert len(frames[2]["new_ids"]) == 2
    assert len(frames[3]["evicted"]) == 1
    svgs = [parse_svg(render_radix_tree(**f)) for f in frames]
    ghosts = [g for g in svgs[3].all("g", "pl-radix-node") if g.get("data-state") == "evicted"]
    assert len(ghosts) == 1 and ghosts[0].get("data-node-id") == str(frames[3]["evicted"][0]["id"])
    assert sum(g.get("data-new") == "1" for g in svgs[2].all("g", "pl-radix-node")) == 2
    assert len({s.text for s in svgs}) == 4


def test_token_text_labels(parse_svg):
    rc = RadixCache()
    rc.insert([10, 11])
    svg = parse_svg(render_radix_tree(rc.snapshot(), token_text=lambda ids: "".join(chr(55 + i) for i in ids)))
    assert "AB" in svg.texts()


def test_empty_tree(parse_svg):
    svg = parse_svg(render_radix_tree(RadixCache().snapshot()))
    assert [g.get("data-state") for g in svg.all("g", "pl-radix-node")] == ["root"]
