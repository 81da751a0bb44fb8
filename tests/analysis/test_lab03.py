"""lab03.group_blocks groups fork children with their submitted request structurally (issue 14)."""

from __future__ import annotations

from pagedlab import SamplingParams
from pagedlab.analysis.lab03 import group_blocks
from tests.robust.helpers import tiny_engine


def test_group_blocks_follows_the_engines_fork_groups_not_hashes_in_ids() -> None:
    eng = tiny_engine(block_size=4, num_gpu_blocks=32)
    sp = SamplingParams(temperature=0, max_tokens=4, n=2, ignore_eos=True)
    prompt = {"prompt_token_ids": [1, 2, 3, 4, 5, 6]}
    eng.add_request("a#1", prompt, sp)  # a user id with '#' is its own group
    eng.add_request("a", prompt, sp)
    assert eng.get_request_group_id("a#1") == "a#1" and eng.get_request_group_id("nope") is None
    eng.step()  # prefill, first token: each forks into 2 completions
    members = sorted(eng.kv_cache_manager.req_to_blocks)
    assert len(members) == 4
    by_group = {m: eng.get_request_group_id(m) for m in members}
    assert sorted(by_group.values()) == ["a", "a", "a#1", "a#1"]
    got = group_blocks(eng)
    kv = eng.kv_cache_manager
    for g in ("a", "a#1"):
        tables = [{b.block_id for b in kv.req_to_blocks[m]} for m, gg in by_group.items() if gg == g]
        assert got[g] == (len(set.union(*tables)), sum(map(len, tables)))
        assert got[g][0] < got[g][1], "the two completions share their prompt's full block"
    assert set(got) == {"a", "a#1"}
