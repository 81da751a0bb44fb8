"""The twin view (pagedlab.twin.view): two traces in the batch Gantt, the first divergence outlined in both;
and the labs' "on real vLLM" cell where vLLM is not installed (it says how to install it, builds nothing)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pagedlab.twin.records import StepRecord, Trace, diff, first_block_id_difference
from pagedlab.twin.view import render_twin, trace_steps, twin_player

NS = "{http://www.w3.org/2000/svg}"


def _trace(engine: str, decode_at_3: int = 1, extra_token: bool = False) -> Trace:
    """Two requests: a (prefill 40 in step 0, then decodes), b (arrives at step 1, prefill 37, then decodes)."""
    steps = [
        StepRecord(0, [["a", 40]]),
        StepRecord(1, [["a", 1], ["b", 37]]),
        StepRecord(2, [["a", 1], ["b", 1]]),
        StepRecord(3, [["a", 1], ["b", decode_at_3]]),
        StepRecord(4, [["a", 1], ["b", 1]], finished=[["a", "length"], ["b", "length"]]),
    ]
    toks = {"a": [[5, 6, 7, 8, 9]], "b": [[1, 2, 3, 4] + ([99] if extra_token else [])]}
    return Trace(engine, "w", steps, toks, {"a": ["length"], "b": ["length"]}, num_free_blocks=8)


def _parse(html: str) -> ET.Element:
    return ET.fromstring(html)  # raises on malformed markup


def _marks(root: ET.Element) -> list[ET.Element]:
    return [el for el in root.iter(NS + "rect") if el.get("class") == "pl-divergence"]


def _cell(svg: ET.Element, step: int, req: str) -> ET.Element:
    return next(
        el
        for el in svg.iter(NS + "rect")
        if el.get("class") == "pl-cell" and el.get("data-step") == str(step) and el.get("data-req") == req
    )


def test_the_first_divergence_is_outlined_on_its_step_and_request_in_both_charts() -> None:
    kit, vllm = _trace("kit"), _trace("vllm", decode_at_3=2)
    found = diff(kit, vllm)
    assert found is not None and (found.step, found.request_id, found.field) == (3, "b", "scheduled")
    root = _parse(render_twin(kit, vllm))
    assert root.get("data-divergence-step") == "3" and root.get("data-divergence-req") == "b"
    svgs = list(root.iter(NS + "svg"))
    assert len(svgs) == 2
    for svg in svgs:
        (mark,) = _marks(svg)
        assert (mark.get("data-step"), mark.get("data-req")) == ("3", "b")
        cell = _cell(svg, 3, "b")  # the outline sits over step 3's column, on request b's row
        mx, mw = float(mark.get("x")), float(mark.get("width"))
        cx, cw = float(cell.get("x")), float(cell.get("width"))
        assert mx <= cx and cx + cw <= mx + mw
        my, mh = float(mark.get("y")), float(mark.get("height"))
        cy, ch = float(cell.get("y")), float(cell.get("height"))
        assert my <= cy and cy + ch <= my + mh
        row_a = _cell(svg, 3, "a")  # ... narrowed to b's row: request a's cell of step 3 is outside it
        ay, ah = float(row_a.get("y")), float(row_a.get("height"))
        assert ay + ah <= my or ay >= my + mh
        other = _cell(svg, 2, "b")  # ... and not over the step before
        assert float(other.get("x")) + float(other.get("width")) <= mx + 1.6
    summary = next(el for el in root.iter("div") if el.get("class") == "pl-twin-summary")
    assert "step 3" in summary.text and "'b'" in summary.text and "scheduled" in summary.text


def test_identical_traces_have_no_outline_and_say_so() -> None:
    root = _parse(render_twin(_trace("kit"), _trace("vllm")))
    assert _marks(root) == [] and root.get("data-divergence-step") == "-1"
    summary = next(el for el in root.iter("div") if el.get("class") == "pl-twin-summary")
    assert "same decisions at every one of 5 steps" in summary.text
    rows = [el for el in root.iter("tr") if el.get("class") == "pl-twin-row"]
    assert [(r.get("data-req"), r.get("data-differs")) for r in rows] == [("a", "0"), ("b", "0")]


def test_a_token_divergence_marks_the_request_row_and_no_step() -> None:
    root = _parse(render_twin(_trace("kit"), _trace("vllm", extra_token=True)))
    assert _marks(root) == [] and root.get("data-divergence-step") == "-1"
    rows = {r.get("data-req"): r.get("data-differs") for r in root.iter("tr") if r.get("class") == "pl-twin-row"}
    assert rows == {"a": "0", "b": "1"}


def test_steps_missing_on_one_side_are_drawn_empty_so_the_columns_line_up() -> None:
    short = _trace("vllm")
    short.steps = short.steps[:3]
    cols = [0, 1, 2, 3, 4]
    drawn = trace_steps(short, cols)
    assert [s["step"] for s in drawn] == cols and drawn[3]["scheduled"] == [] and drawn[4]["scheduled"] == []
    kinds = [(r, n, p) for s in trace_steps(_trace("kit")) for r, n, p in s["scheduled"] if s["step"] <= 1]
    assert kinds == [("a", 40, True), ("a", 1, False), ("b", 37, True)]
    root = _parse(render_twin(_trace("kit"), short))
    (mark_kit, mark_vllm) = _marks(root)
    assert mark_kit.get("data-step") == mark_vllm.get("data-step") == "3"


def test_traces_of_different_workloads_are_refused() -> None:
    other = _trace("vllm")
    other.workload = "x"
    with pytest.raises(ValueError, match="different workloads"):
        render_twin(_trace("kit"), other)


def test_the_player_opens_on_the_divergence_step() -> None:
    player = twin_player(_trace("kit"), _trace("vllm", decode_at_3=2))
    assert player.frames == [0, 1, 2, 3, 4]
    assert player.slider.value == 3


def test_the_lab_cell_without_vllm_prints_how_to_install_it(monkeypatch, capsys, tmp_path) -> None:
    import pagedlab.twin.labs as labs
    from pagedlab.vllm_version import ENV_VLLM_PYTHON, VLLM_REQUIREMENT, VLLM_VERSION

    monkeypatch.setenv(ENV_VLLM_PYTHON, str(tmp_path / "no-such-python"))
    monkeypatch.delenv(labs.LAB_VLLM_ENV, raising=False)

    def no_build(lab: str):
        raise AssertionError("the workload was built although vLLM is missing")

    monkeypatch.setattr(labs, "lab_workload", no_build)
    assert labs.on_vllm("04") is None
    out = capsys.readouterr().out
    assert f"Real vLLM {VLLM_VERSION} did not run this cell: no vLLM interpreter" in out and "`make vllm`" in out
    assert VLLM_REQUIREMENT in out and str(tmp_path / "no-such-python") in out
    assert labs.run_script_on_vllm(tmp_path / "serve.py") is None
    assert "`make vllm`" in capsys.readouterr().out


def test_the_lab_cell_of_a_pip_install_gives_the_steps_it_can_run(monkeypatch, capsys) -> None:
    """Found by trying the kit as a learner through pip: the lab cell said "no vLLM interpreter at
    <site-packages>/.venv-vllm/bin/python (run `make vllm` ...)" and "`make vllm` in the kit's checkout",
    where there is neither a checkout nor a Makefile. It now says the variable is unset and gives the
    steps by hand, as `pagedlab doctor` does."""
    import pagedlab.twin as twin
    import pagedlab.twin.labs as labs
    from pagedlab import vllm_version
    from pagedlab.vllm_version import ENV_VLLM_PYTHON, VLLM_REQUIREMENT

    monkeypatch.delenv(ENV_VLLM_PYTHON, raising=False)
    monkeypatch.delenv(labs.LAB_VLLM_ENV, raising=False)
    monkeypatch.setattr(vllm_version, "in_checkout", lambda: False)
    monkeypatch.setattr(twin, "vllm_python", lambda: Path("/nowhere/.venv-vllm/bin/python"))  # as beside a pip install
    assert labs.on_vllm("04") is None
    out = capsys.readouterr().out
    assert "make" not in out and ".venv-vllm/bin/python" not in out.split("\n")[0], out
    assert f"no vLLM interpreter: {ENV_VLLM_PYTHON} is not set (`pagedlab doctor` gives the steps)" in out
    assert f"pip install '{VLLM_REQUIREMENT}'" in out and "python -m pagedlab.twin.hf_model" in out
    assert f"export {ENV_VLLM_PYTHON}=" in out and "re-run this cell" in out


def test_the_lab_cells_can_be_switched_off_and_refuse_a_bad_setting(monkeypatch, capsys) -> None:
    """PAGEDLAB_LAB_VLLM=off (the suite's notebook run) takes the not-installed branch without asking vLLM."""
    import pagedlab.twin as twin
    import pagedlab.twin.labs as labs

    def no_probe() -> tuple[bool, str]:
        raise AssertionError("vLLM was probed although the cells are switched off")

    monkeypatch.setattr(twin, "vllm_status", no_probe)
    monkeypatch.setenv(labs.LAB_VLLM_ENV, "off")
    assert labs.on_vllm("04") is None and labs.run_script_on_vllm("serve.py") is None
    out = capsys.readouterr().out
    assert out.count("switched off by PAGEDLAB_LAB_VLLM=off") == 2 and "`make vllm`" in out
    monkeypatch.setenv(labs.LAB_VLLM_ENV, "maybe")
    with pytest.raises(ValueError, match="PAGEDLAB_LAB_VLLM must be 'on' or 'off'"):
        labs.on_vllm("04")


def test_every_lab_with_a_cell_has_a_workload_and_others_are_refused() -> None:
    from pagedlab.twin.labs import LAB_WORKLOADS, lab_workload

    assert sorted(LAB_WORKLOADS) == ["02", "04", "05", "06", "07", "09"]
    with pytest.raises(ValueError, match="no twin workload for lab '03'"):
        lab_workload("03")


# ------------------------------------------------------------------ labs 02 and 07: the pool widgets


def _pool_trace(engine: str, b_blocks: list[int], queue: list[int]) -> Trace:
    """Two requests in a pool of 6 blocks; a hits block 0 (cached) in step 1; b's table and the free queue
    at step 1 are the parameters."""
    s0 = StepRecord(0, [["a", 40]], num_cached_tokens={"a": 0})
    from pagedlab.twin.records import record_pool

    record_pool(s0, {"a": [0, 1]}, [2, 3, 4, 5], [0], 32)
    s1 = StepRecord(1, [["a", 1], ["b", 37]], num_cached_tokens={"b": 32}, finished=[["a", "length"]])
    rest = [x for x in range(6) if x not in {0, 1, *b_blocks}]
    record_pool(s1, {"a": [0, 1], "b": b_blocks}, queue if queue else rest, [0], 32)
    return Trace(engine, "p", [s0, s1], {"a": [[1]], "b": [[2]]}, {"a": ["length"], "b": ["length"]}, 6)


def _pool_svgs(root: ET.Element) -> dict[str, ET.Element]:
    return {
        div.get("data-engine"): next(s for s in div.iter(NS + "svg") if "pl-pool" in s.get("class", ""))
        for div in root.iter("div")
        if div.get("class") == "pl-twin-pool"
    }


@pytest.mark.parametrize("widget", ["pool", "prefix"])
def test_a_block_id_difference_alone_is_a_divergence_named_and_outlined_on_both_pools(widget: str) -> None:
    # the same decisions (b holds a's block 0 and one block of its own), other ids: since the kit frees as
    # vLLM 0.32.0 does, the ids must agree too
    kit, vllm = _pool_trace("kit", [0, 2], []), _pool_trace("vllm", [0, 3], [])
    found = diff(kit, vllm)
    assert found is not None and (found.step, found.request_id, found.field) == (1, "b", "block_ids")
    ids = first_block_id_difference(kit, vllm)
    assert ids is not None and (ids.step, ids.request_id, ids.field) == (1, "b", "block_ids")
    root = _parse(render_twin(kit, vllm, widget=widget))
    assert root.get("data-widget") == widget and root.get("data-divergence-step") == "1"
    assert root.get("data-divergence-field") == "block_ids"
    assert not [d for d in root.iter("div") if d.get("class") == "pl-twin-ids"]  # the divergence names it
    summary = next(d for d in root.iter("div") if d.get("class") == "pl-twin-summary")
    assert "block_ids: kit=[0, 2] vs vllm=[0, 3]" in "".join(summary.itertext())
    (pools,) = [d for d in root.iter("div") if d.get("class") == "pl-twin-pools"]
    assert pools.get("data-step") == "1" and pools.get("data-differing-blocks") == "2 3"
    svgs = _pool_svgs(root)
    assert sorted(svgs) == ["kit", "vllm"]
    for engine, svg in svgs.items():
        assert sorted(m.get("data-block-id") for m in _marks(svg)) == ["2", "3"]
        owner = {
            b.get("data-block-id"): b.get("data-owner") for b in svg.iter(NS + "rect") if b.get("class") == "pl-block"
        }
        assert len(owner) == 6 and owner["0"] == "a b" and owner["1"] == "a"
        assert owner["2" if engine == "kit" else "3"] == "b" and owner["3" if engine == "kit" else "2"] == ""


def test_sharing_a_different_block_is_a_divergence_named_and_outlined() -> None:
    kit, vllm = _pool_trace("kit", [0, 2], []), _pool_trace("vllm", [1, 2], [])
    found = diff(kit, vllm)
    assert found is not None and (found.step, found.request_id) == (1, "b")
    assert found.field == "block_ids (which blocks are shared)"
    root = _parse(render_twin(kit, vllm, widget="prefix"))
    assert root.get("data-divergence-step") == "1" and root.get("data-divergence-field") == found.field
    summary = next(d for d in root.iter("div") if d.get("class") == "pl-twin-summary")
    assert "first divergence: step 1, request 'b', block_ids (which blocks are shared)" in "".join(summary.itertext())
    for svg in _pool_svgs(root).values():
        assert sorted(m.get("data-block-id") for m in _marks(svg)) == ["0", "1"]


def test_the_free_count_and_the_number_of_hit_blocks_are_compared() -> None:
    kit, vllm = _pool_trace("kit", [0, 2], []), _pool_trace("vllm", [0, 2], [])
    vllm.steps[1].num_free_blocks = 2
    assert (diff(kit, vllm).step, diff(kit, vllm).field) == (1, "num_free_blocks")
    vllm = _pool_trace("vllm", [0, 2], [])
    vllm.steps[1].hit_block_ids = {"b": []}
    assert diff(kit, vllm).field == "hit_block_ids (count)"


def test_the_pool_widget_shows_the_free_queue_and_marks_a_reordered_queue() -> None:
    kit, vllm = _pool_trace("kit", [0, 2], [3, 4, 5]), _pool_trace("vllm", [0, 2], [4, 3, 5])
    found = diff(kit, vllm)
    assert found is not None and (found.step, found.field) == (1, "free_queue")
    ids = first_block_id_difference(kit, vllm)
    assert ids is not None and (ids.step, ids.field) == (1, "free_queue")
    root = _parse(render_twin(kit, vllm, widget="pool"))
    assert "free queue (3)" in "".join(root.itertext())
    for svg in _pool_svgs(root).values():
        assert sorted(m.get("data-block-id") for m in _marks(svg)) == ["3", "4"]


def test_the_prefix_widget_underlines_and_lists_the_hit_blocks_and_agreeing_pools_mark_nothing() -> None:
    kit, vllm = _pool_trace("kit", [0, 2], []), _pool_trace("vllm", [0, 2], [])
    assert diff(kit, vllm) is None and first_block_id_difference(kit, vllm) is None
    root = _parse(render_twin(kit, vllm, widget="prefix"))
    assert root.get("data-divergence-step") == "-1" and not _marks(root)
    assert not [d for d in root.iter("div") if d.get("class") == "pl-twin-ids"]
    (pools,) = [d for d in root.iter("div") if d.get("class") == "pl-twin-pools"]
    assert pools.get("data-step") == "1" and pools.get("data-differing-blocks") == ""  # the first hit's step
    assert "prefix hits this step: b ← blocks [0]" in "".join(root.itertext())
    for svg in _pool_svgs(root).values():
        changed = [el for el in svg.iter(NS + "rect") if el.get("class") == "pl-changed"]
        assert len(changed) == 1
        block0 = next(b for b in svg.iter(NS + "rect") if b.get("data-block-id") == "0")
        assert block0.get("data-state") == "shared" and block0.get("data-hashed") == "1"


def test_pool_widgets_refuse_traces_without_pools_and_unknown_widgets() -> None:
    kit, vllm = _trace("kit"), _trace("vllm")
    with pytest.raises(ValueError, match="recorded no pool"):
        render_twin(kit, vllm, widget="pool")
    with pytest.raises(ValueError, match="unknown widget"):
        render_twin(kit, vllm, widget="radix")
