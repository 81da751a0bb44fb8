"""``History``: the bounded record behind ``LLMEngine.step_stats`` and ``finished_requests``."""

from __future__ import annotations

import pytest

from pagedlab.engine.history import History


def test_keeps_the_last_maxlen_items_and_reads_as_a_list() -> None:
    h: History[int] = History(3)
    for i in range(5):
        h.append(i)
    assert list(h) == [2, 3, 4] and len(h) == 3 and h.total == 5
    assert h[0] == 2 and h[-1] == 4 and h[1:] == [3, 4] and h[::-1] == [4, 3, 2]
    assert 3 in h and 0 not in h
    with pytest.raises(IndexError):
        h[3]


def test_since_takes_exactly_the_new_items_and_refuses_when_some_were_dropped() -> None:
    h: History[str] = History(4)
    h.append("a")
    mark = h.total
    assert h.since(mark) == []
    h.append("b")
    h.append("c")
    assert h.since(mark) == ["b", "c"]
    for x in "defg":
        h.append(x)
    with pytest.raises(ValueError, match=r"6 items were appended since total=1 but only the last 4 are kept"):
        h.since(mark)
    h.clear()
    assert len(h) == 0 and h.total == 7 and h.since(7) == []


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, None])
def test_maxlen_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match="maxlen must be an int >= 1"):
        History(bad)  # type: ignore[arg-type]
