"""Memory a learner's code allocates and never writes holds NaN under check() and ``pagedlab grade`` (issue 39,
item 4): a verdict never depends on what the allocator happened to leave there.

Measured before: a lab 08 tile built with ``torch.empty`` whose masked rows are "zeroed" by multiplying with the
mask passed ``check()`` 16 times in 20 (the rows held zeros, or NaN that the fp16 test happened to see).
"""

from __future__ import annotations

import torch

from pagedlab.grading import registry
from pagedlab.grading.checking import check
from pagedlab.grading.grade import E2EOptions, grade
from pagedlab.parts.poison import poison, poisoned_allocations
from tests.grading.helpers import write_notebook, wrong_versions

TILE = "08.load_kv_tile"
UNINITIALISED = [w for w in wrong_versions() if w.name in ("empty_tile_times_the_mask", "masked_rows_never_written")]


def test_every_uninitialised_allocation_is_poisoned_inside_and_only_inside():
    with poisoned_allocations():
        with poisoned_allocations():  # nested: the outer block keeps it on
            pass
        made = [
            torch.empty(3),
            torch.empty_like(torch.zeros(2, dtype=torch.float16)),
            torch.empty_strided((2, 2), (1, 2), dtype=torch.bfloat16),
            torch.zeros(1).new_empty(4),
            torch.zeros(1, dtype=torch.int32).new_empty_strided((2,), (1,)),
            torch.empty(2, dtype=torch.int64),
            torch.empty(2, dtype=torch.bool),
        ]
    assert all(bool(torch.isnan(t).all()) for t in made[:4]), made
    assert made[4].tolist() == [2**31 - 1] * 2 and made[5].tolist() == [2**63 - 1] * 2 and made[6].all()
    assert not hasattr(torch.empty, "__pagedlab_unpoisoned__")  # given back
    assert poison(torch.zeros(1, device="meta")).device.type == "meta"


def test_an_uninitialised_tile_fails_check_every_time():
    assert len(UNINITIALISED) == 2
    for w in UNINITIALISED:
        titles = set()
        for _ in range(20):
            res = check(registry.snippet_object(TILE, w.source), TILE, show=False, pictures=False)
            assert not res.passed
            titles.add(res.first_failure.title)
        assert titles == {w.caught_by}, (w.name, titles)


def test_an_uninitialised_tile_fails_under_grade(tmp_path):
    """In ``pagedlab grade`` the learner's code runs in the learner's process, which poisons for good."""
    subs = tmp_path / "subs"
    for w in UNINITIALISED:
        write_notebook(subs / f"{w.name}.ipynb", [w.source])
    results = grade([subs], tmp_path / "out", timeout=120, quiet=True, exercises=[TILE], e2e=E2EOptions(enabled=False))
    assert len(results) == len(UNINITIALISED)
    for r in results:
        w = next(w for w in UNINITIALISED if w.name == r.learner.name)
        er = r.exercises[TILE]
        caught = next(o for o in er.outcomes if o.title == w.caught_by)
        assert caught.status == "failed" and er.score < er.max_score, (w.name, caught.status, caught.message)
