"""Two-way checks for every exercise: the solution cell passes, the generated stub fails, and every
plausible wrong implementation fails (with a message naming a step)."""
from __future__ import annotations

from typing import Dict, List, Tuple

import pytest

from pagedlab.grading import registry
from pagedlab.grading.checking import check
from pagedlab.grading.extract import MARKER_RE

from tests.grading.helpers import stub_source, variant

EXERCISES = [ex.id for ex in registry.all_exercises()]

# exercise id -> [(what the mistake is, cell source)]
WRONG: Dict[str, List[Tuple[str, str]]] = {
    "01.kv_bytes_per_token": [
        ("forgets that K and V are both stored", variant("01.kv_bytes_per_token", ("return 2 * layers", "return layers"))),
        ("counts query heads instead of KV heads", variant("01.kv_bytes_per_token", (
            'config.get("num_key_value_heads") or config["num_attention_heads"]', 'config["num_attention_heads"]'))),
        ("assumes 2 bytes per element", variant("01.kv_bytes_per_token", ('DTYPE_BYTES[config["torch_dtype"]]', "2"))),
        ("ignores an explicit head_dim", variant("01.kv_bytes_per_token", ('config.get("head_dim") or ', ""))),
        ("returns a float", variant("01.kv_bytes_per_token", ("return 2 * layers", "return 2.0 * layers"))),
    ],
    "01.waste_accounting": [
        ("every hole counts as external", variant("01.waste_accounting",
                                                  ('acc["external" if h < need else "free"] += h', 'acc["external"] += h'))),
        ("reservation for future tokens counted as internal waste", variant(
            "01.waste_accounting", ('acc["reservation"] += r["final_len"] - r["num_tokens"]', "pass"),
            ('r["reserved"] - r["final_len"]', 'r["reserved"] - r["num_tokens"]'))),
        ("forgets the hole after the last reservation", variant(
            "01.waste_accounting", ('    if snapshot["capacity"] > pos:\n        holes.append(snapshot["capacity"] - pos)\n', ""))),
    ],
    "02.free_queue": [
        ("LIFO: popleft takes the back", variant("02.free_queue", (
            "block = self.fake_free_list_head.next_free_block\n        if block is self.fake_free_list_tail:",
            "block = self.fake_free_list_tail.prev_free_block\n        if block is self.fake_free_list_head:"))),
        ("remove leaves stale links", variant("02.free_queue", (
            "        block.prev_free_block = block.next_free_block = None\n        self.num_free_blocks -= 1\n",
            "        self.num_free_blocks -= 1\n"))),
        ("append does not count the block", variant("02.free_queue", (
            "        self.fake_free_list_tail.prev_free_block = block\n        self.num_free_blocks += 1\n",
            "        self.fake_free_list_tail.prev_free_block = block\n"))),
        ("O(n) remove: walks from the head to find the block", variant("02.free_queue", (
            "        block.prev_free_block.next_free_block = block.next_free_block\n",
            "        node = self.fake_free_list_head\n        while node is not block:\n"
            "            node = node.next_free_block\n"
            "        block.prev_free_block.next_free_block = block.next_free_block\n"))),
    ],
    "02.slot_mapping": [
        ("swaps // and %", variant("02.slot_mapping", ("block_table[pos // block_size] * block_size + pos % block_size",
                                                       "block_table[pos % block_size] * block_size + pos // block_size"))),
        ("forgets to multiply by block_size", variant("02.slot_mapping", (
            "block_table[pos // block_size] * block_size + pos % block_size",
            "block_table[pos // block_size] + pos % block_size"))),
        ("returns the logical position", variant("02.slot_mapping", (
            "block_table[pos // block_size] * block_size + pos % block_size", "pos"))),
    ],
    "03.fork": [
        ("copies the blocks instead of sharing them", variant("03.fork", (
            "    for block_id in parent.block_table:\n        pool.incref(block_id)\n"
            "    return Seq(child_id, list(parent.block_table), parent.num_tokens)",
            "    return Seq(child_id, [pool.allocate() for _ in parent.block_table], parent.num_tokens)"))),
        ("shares the parent's list object", variant("03.fork", ("list(parent.block_table)", "parent.block_table"))),
        ("forgets the reference counts", variant("03.fork", ("        pool.incref(block_id)", "        pass"))),
    ],
    "03.append_token": [
        ("writes into a shared block (no copy)", variant("03.append_token", ("if pool.ref_cnt(last) > 1:", "if False:"))),
        ("copies but never releases the shared block", variant("03.append_token", ("            pool.free(last)\n", ""))),
        ("copies even a private block", variant("03.append_token", ("if pool.ref_cnt(last) > 1:",
                                                                     "if pool.ref_cnt(last) >= 1:"))),
        ("forgets to count the token", variant("03.append_token", ("    seq.num_tokens += 1\n", ""))),
    ],
    "04.schedule_step": [
        ("static batching: new requests wait for the batch to drain", variant("04.schedule_step", (
            "while waiting and len(running) < max_num_seqs:", "while waiting and not running and len(running) < max_num_seqs:"))),
        ("ignores max_num_seqs", variant("04.schedule_step", ("while waiting and len(running) < max_num_seqs:",
                                                               "while waiting:"))),
        ("lets later requests overtake the head of the queue", variant("04.schedule_step", (
            "    while waiting and len(running) < max_num_seqs:\n        req = waiting[0]\n"
            "        n = req.num_tokens - req.num_computed_tokens\n"
            "        if kv_cache_manager.allocate_slots(req, n) is None:\n            break\n"
            "        waiting.popleft()\n",
            "    for req in list(waiting):\n        if len(running) >= max_num_seqs:\n            break\n"
            "        n = req.num_tokens - req.num_computed_tokens\n"
            "        if kv_cache_manager.allocate_slots(req, n) is None:\n            continue\n"
            "        waiting.remove(req)\n"))),
    ],
    "05.schedule_with_budget": [
        ("ignores long_prefill_token_threshold", variant("05.schedule_with_budget",
                                                         ("if long_prefill_token_threshold > 0:", "if False:"))),
        ("does not charge waiting requests to the budget", variant("05.schedule_with_budget", (
            "        scheduled[req.request_id] = n\n        budget -= n\n    return scheduled",
            "        scheduled[req.request_id] = n\n    return scheduled"))),
        ("no chunked prefill: a prompt waits until it fits whole", variant("05.schedule_with_budget", (
            "        req = waiting[0]\n        n = chunk(req)\n",
            "        req = waiting[0]\n        n = chunk(req)\n"
            "        if n < req.num_tokens - req.num_computed_tokens and long_prefill_token_threshold == 0:\n"
            "            break\n"))),
    ],
    "06.pick_victim": [
        ("priority: preempts the most important request", variant("06.pick_victim", ("return max(running", "return min(running"))),
        ("priority: ignores the arrival time among equals", variant("06.pick_victim", (
            "key=lambda r: (r.priority, r.arrival_time)", "key=lambda r: r.priority"))),
        ("fcfs: preempts the oldest", variant("06.pick_victim", ("return running[-1]", "return running[0]"))),
        ("removes the victim from the running list", variant("06.pick_victim", ("return running[-1]", "return running.pop()"))),
    ],
    "06.crossover": [
        ("swap counted one way only", variant("06.crossover", ("return num_params * pcie_bandwidth / kv_bytes_per_token",
                                                                "return 2 * num_params * pcie_bandwidth / kv_bytes_per_token"))),
        ("upside down", variant("06.crossover", ("return num_params * pcie_bandwidth / kv_bytes_per_token",
                                                 "return kv_bytes_per_token / (num_params * pcie_bandwidth)"))),
    ],
    "07.match_prefix": [
        ("does not split a partly matched node", variant("07.match_prefix", (
            "            node = split_node(child, n)\n            value += node.value\n",
            "            value += child.value[:n]\n            node = child\n"))),
        ("does not stamp the access time", variant("07.match_prefix", ("        child.last_access_time = now\n", ""))),
    ],
    "07.insert": [
        ("returns the number of new tokens", variant("07.insert", ("    return total\n", "    return len(key)\n"))),
        ("overwrites the slots of cached tokens", variant("07.insert", (
            "        key, value = key[n:], value[n:]\n        node = split_node(child, n) if n < len(child.key) else child\n",
            "        if n == len(child.key):\n            child.value = value[:n]\n"
            "        key, value = key[n:], value[n:]\n        node = split_node(child, n) if n < len(child.key) else child\n"))),
    ],
    "07.evict": [
        ("evicts locked nodes", variant("07.evict", ("elif node is not root and node.lock_ref == 0:", "elif node is not root:"),
                                        (" and parent.lock_ref == 0:", ":"))),
        ("most recently used first", variant("07.evict", ("    heapq.heapify(leaves)\n",
                                                          "    leaves.sort(reverse=True)\n"),
                                             ("        x = heapq.heappop(leaves)\n", "        x = leaves.pop(0)\n"),
                                             ("            heapq.heappush(leaves, parent)\n",
                                              "            leaves.append(parent)\n"))),
        ("a parent left without children is never evicted", variant("07.evict", (
            "            heapq.heappush(leaves, parent)\n", "            pass\n"))),
    ],
    "08.load_kv_tile": [
        ("looks up the block table for masked lanes", variant("08.load_kv_tile", (
            "logical = torch.where(mask, pos // block_size, torch.zeros_like(pos))", "logical = pos // block_size"))),
        ("leaves masked rows unzeroed", variant("08.load_kv_tile", (
            "    rows = torch.where(mask[:, None, None], rows, torch.zeros((), dtype=cache.dtype))\n", ""))),
        ("row offset pos // block_size", variant("08.load_kv_tile", ("rows = cache[blocks, pos % block_size]",
                                                                     "rows = cache[blocks, (pos // block_size) % block_size]"))),
    ],
}


def test_every_exercise_has_wrong_implementations_and_tests():
    assert set(WRONG) == set(EXERCISES)
    for ex in registry.all_exercises():
        assert ex.public_tests(), ex.id
        assert ex.summary and ex.name


@pytest.mark.parametrize("eid", EXERCISES)
def test_solution_cell_format(eid):
    src = registry.snippet_source(eid)
    first = src.splitlines()[0]
    m = MARKER_RE.match(first)
    assert m and m.group(1) == eid, f"first line must be '# EXERCISE {eid}'"
    assert "### BEGIN SOLUTION" in src and "### END SOLUTION" in src
    ex = registry.get(eid)
    assert f"def {ex.name}(" in src or f"class {ex.name}" in src


@pytest.mark.parametrize("eid", EXERCISES)
def test_solution_passes(eid):
    res = check(registry.snippet_object(eid), eid, show=False)
    assert res.passed, res.text()


@pytest.mark.parametrize("eid", EXERCISES)
def test_generated_stub_fails_as_not_implemented(eid):
    stub = stub_source(eid)
    assert "raise NotImplementedError" in stub and "### BEGIN SOLUTION" not in stub
    res = check(registry.snippet_object(eid, stub), eid, show=False)
    assert not res.passed
    assert all(o.status == "not_implemented" for o in res.outcomes), res.text()
    assert "not implemented yet" in res.text()


@pytest.mark.parametrize("eid,what,src", [(e, w, s) for e, lst in WRONG.items() for w, s in lst],
                         ids=[f"{e}:{w}" for e, lst in WRONG.items() for w, _ in lst])
def test_wrong_implementation_fails_with_a_step(eid, what, src):
    res = check(registry.snippet_object(eid, src), eid, show=False)
    assert not res.passed, f"{eid}: the mistake '{what}' passes every test"
    first = res.first_failure
    assert first.status in ("failed", "error", "timeout"), res.text()
    assert first.message and first.step >= 1, res.text()
    # a teaching message never shows solution code (the learner's own line, "at line N: ...", may be quoted)
    message = "\n".join(ln for ln in first.message.splitlines() if not ln.strip().startswith("at line"))
    solution_lines = {ln.strip() for ln in registry.snippet_source(eid).split("### BEGIN SOLUTION")[1]
                      .split("### END SOLUTION")[0].splitlines() if len(ln.strip()) > 25}
    for ln in solution_lines:
        assert ln not in message, f"message reveals solution line {ln!r}"


def test_references_are_cached_and_library_backed():
    from pagedlab.core.block_pool import FreeKVCacheBlockQueue
    assert registry.get("02.free_queue").get_reference() is FreeKVCacheBlockQueue
    assert registry.get("07.insert").get_reference() is registry.get("07.insert").get_reference()


@pytest.mark.parametrize("eid", [ex.id for ex in registry.all_exercises() if ex.render is not None])
def test_failures_come_with_a_picture_of_the_state(eid):
    pictures = [check(registry.snippet_object(eid, src), eid, show=False).first_failure.picture for _, src in WRONG[eid]]
    assert any(p.startswith("<svg") and "pl-viz" in p for p in pictures), eid
