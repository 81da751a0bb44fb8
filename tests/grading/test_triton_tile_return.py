"""Lab 08's Triton tile load that returns the wrong number of values gets a message naming the contract
``(tile, mask)``, not the interpreter's ``TypeError: 'int' object is not iterable`` from inside
``triton/language/core.py`` (found by trying the lab as a learner); an error raised inside the learner's own
helper keeps its own message."""

from __future__ import annotations

import pytest

from pagedlab.grading import registry
from pagedlab.grading.checking import check
from pagedlab.kernels.runtime import kernels_can_run
from tests.grading.helpers import variant

pytestmark = pytest.mark.skipif(not kernels_can_run("cpu"), reason="triton's interpreter is not available")

EID = "08.triton_load_kv_tile"


@pytest.mark.parametrize(
    "returned, why",
    [
        ("return tile", "'int' object is not iterable"),  # the tile alone: unpacked row by row
        ("return tile, mask, pos", "too many values to unpack"),
        ("return (tile,)", "not enough values to unpack"),
    ],
)
def test_a_wrong_number_of_returned_values_is_named(returned: str, why: str) -> None:
    fn = registry.snippet_object(EID, variant(EID, ("return tile, mask", returned)))
    res = check(fn, EID, show=False)
    text = res.text()
    # every test that runs the helper fails; only the one reading its source (no run) may pass
    ran = [o for o in res.outcomes if not o.title.startswith("what only a GPU would show")]
    assert not res.passed and ran and not any(o.passed for o in ran), text
    assert "triton_load_kv_tile must return two values, (tile, mask)" in text, text
    assert why in text, text  # the original error stays visible
    assert "line 1104" not in text and "enumerate(slices)" not in text, text


def test_an_error_inside_the_learners_helper_keeps_its_own_message() -> None:
    fn = registry.snippet_object(EID, variant(EID, ("offs_d = tl.arange(0, HEAD_DIM)", "offs_d = len(3)")))
    text = check(fn, EID, show=False).text()
    assert "has no len()" in text and "must return two values" not in text, text
