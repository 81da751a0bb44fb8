"""pagedlab labs build / check: stubs, hidden tests, stripping, staleness, learner protection."""

import argparse
import json
from pathlib import Path

import nbformat
import pytest

from pagedlab.course import labs_build as lb
from pagedlab.course import labs_cli

REPO = Path(__file__).resolve().parents[1]


def _cell(kind, source, **extra):
    c = {"cell_type": kind, "metadata": extra.pop("metadata", {}), "source": source, "id": extra.pop("id")}
    if kind == "code":
        c.update({"execution_count": extra.pop("execution_count", None), "outputs": extra.pop("outputs", [])})
    return c


SOLUTION_CODE = '''def slot_mapping(block_table, pos, block_size):
    """Physical slot of token `pos`."""
    ### BEGIN SOLUTION
    block = block_table[pos // block_size]
    return block * block_size + pos % block_size
    ### END SOLUTION


class FreeQueue:
    def popleft(self):
        """Pop the LRU block."""
        ### BEGIN SOLUTION ex02.popleft
        return self._blocks.pop(0)
        ### END SOLUTION
'''


def _solution_nb():
    return {
        "cells": [
            _cell("markdown", "# Lab 99\n\nA question?", id="c0"),
            _cell(
                "code",
                SOLUTION_CODE,
                id="c1",
                execution_count=3,
                outputs=[{"output_type": "stream", "name": "stdout", "text": "hi\n"}],
                metadata={"tags": ["exercise"], "execution": {"iopub.status.busy": "x"}, "scrolled": True},
            ),
            _cell(
                "code",
                "check(slot_mapping)\n### BEGIN HIDDEN TESTS\nassert slot_mapping([3], 1, 4) == 13\n"
                "### END HIDDEN TESTS",
                id="c2",
            ),
            _cell("code", "### BEGIN HIDDEN TESTS\nsecret = 42\n### END HIDDEN TESTS\n", id="c3"),
            _cell("code", "print('instructor only')", id="c4", metadata={"tags": ["hidden-tests"]}),
            _cell("markdown", "Why?\n\n### BEGIN SOLUTION\nBecause blocks.\n### END SOLUTION", id="c5"),
            _cell(
                "code",
                "x = 1\nx",
                id="c6",
                execution_count=7,
                outputs=[
                    {"output_type": "execute_result", "execution_count": 7, "metadata": {}, "data": {"text/plain": "1"}}
                ],
            ),
        ],
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python", "version": "3.11.7"},
            "widgets": {"application/vnd.jupyter.widget-state+json": {"state": {"abc": {}}}},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


@pytest.fixture
def kit(tmp_path):
    sol, labs = tmp_path / "solutions", tmp_path / "labs"
    sol.mkdir()
    (sol / "99_demo.ipynb").write_text(json.dumps(_solution_nb(), indent=1))
    return sol, labs


def _lab(labs, name="99_demo.ipynb"):
    return json.loads((labs / name).read_text())


def _src(cell):
    return "".join(cell["source"])


def test_solution_regions_become_stubs(kit):
    sol, labs = kit
    [st] = lb.build(sol, labs)
    assert st.action == "written"
    code = _src(_lab(labs)["cells"][1])
    assert "block_table[pos // block_size]" not in code and "self._blocks.pop" not in code
    assert "BEGIN SOLUTION" not in code and "END SOLUTION" not in code
    assert (
        'def slot_mapping(block_table, pos, block_size):\n    """Physical slot of token `pos`."""\n'
        '    raise NotImplementedError("exercise 99_demo/slot_mapping:' in code
    )
    assert '        raise NotImplementedError("exercise ex02.popleft:' in code
    compile(code, "stub", "exec")  # still valid Python
    ns = {}
    exec(code, ns)
    with pytest.raises(NotImplementedError, match="99_demo/slot_mapping"):
        ns["slot_mapping"]([1], 0, 4)
    md = _src(_lab(labs)["cells"][3])
    assert "Because blocks" not in md and lb.MARKDOWN_ANSWER in md and md.startswith("Why?")


def test_hidden_tests_removed(kit):
    sol, labs = kit
    lb.build(sol, labs)
    cells = _lab(labs)["cells"]
    text = "\n".join(_src(c) for c in cells)
    assert "HIDDEN" not in text and "secret" not in text and "13" not in text
    assert "instructor only" not in text
    assert [c["id"] for c in cells] == ["c0", "c1", "c2", "c5", "c6"]
    assert _src(cells[2]) == "check(slot_mapping)"


def test_outputs_counts_and_widget_state_stripped(kit):
    sol, labs = kit
    lb.build(sol, labs)
    nb = _lab(labs)
    for c in nb["cells"]:
        if c["cell_type"] == "code":
            assert c["outputs"] == [] and c["execution_count"] is None
    assert nb["cells"][1]["metadata"] == {"tags": ["exercise"]}
    assert "widgets" not in nb["metadata"]
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    assert nb["metadata"]["pagedlab"]["generated_sha"] == lb.fingerprint(nb)
    nbformat.validate(nbformat.reads((labs / "99_demo.ipynb").read_text(), as_version=4))


def test_build_is_idempotent_and_check_passes(kit, capsys):
    sol, labs = kit
    assert [s.state for s in lb.check(sol, labs)] == ["missing"]
    lb.build(sol, labs)
    first = (labs / "99_demo.ipynb").read_bytes()
    assert [s.action for s in lb.build(sol, labs)] == [""]
    assert (labs / "99_demo.ipynb").read_bytes() == first
    assert [s.state for s in lb.check(sol, labs)] == ["up-to-date"]


def test_check_detects_stale_lab_and_build_refreshes_it(kit):
    sol, labs = kit
    lb.build(sol, labs)
    nb = _solution_nb()
    nb["cells"][0]["source"] = "# Lab 99, revised"
    (sol / "99_demo.ipynb").write_text(json.dumps(nb))
    [st] = lb.check(sol, labs)
    assert st.state == "stale"
    [st] = lb.build(sol, labs)
    assert st.action == "written"
    assert _src(_lab(labs)["cells"][0]) == "# Lab 99, revised"


@pytest.mark.parametrize("how", ["edit", "run"])
def test_changed_lab_is_never_overwritten_without_force(kit, how):
    sol, labs = kit
    lb.build(sol, labs)
    nb = _lab(labs)
    if how == "edit":
        nb["cells"][1]["source"] = ["def slot_mapping(block_table, pos, block_size):\n", "    return 0  # my try\n"]
    else:  # opened, run and saved: outputs are the learner's too
        nb["cells"][4]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "1\n"}]
        nb["cells"][4]["execution_count"] = 1
    mine = json.dumps(nb, indent=1)
    (labs / "99_demo.ipynb").write_text(mine)
    # the solution changes too: the lab is both stale and changed
    sol_nb = _solution_nb()
    sol_nb["cells"][0]["source"] = "# Lab 99 v2"
    (sol / "99_demo.ipynb").write_text(json.dumps(sol_nb))
    [st] = lb.check(sol, labs)
    assert st.state == "changed"
    [st] = lb.build(sol, labs)
    assert (st.state, st.action) == ("changed", "kept")
    assert (labs / "99_demo.ipynb").read_text() == mine
    [st] = lb.build(sol, labs, force=True)
    assert st.action == "overwritten (--force)"
    assert _src(_lab(labs)["cells"][0]) == "# Lab 99 v2"


def test_metadata_only_changes_are_not_learner_edits(kit):
    sol, labs = kit
    lb.build(sol, labs)
    nb = _lab(labs)
    nb["metadata"]["language_info"] = {"name": "python", "version": "3.12.1", "mimetype": "text/x-python"}
    nb["cells"][1]["metadata"]["trusted"] = True
    (labs / "99_demo.ipynb").write_text(json.dumps(nb))
    [st] = lb.check(sol, labs)
    assert st.state == "stale"
    assert lb.build(sol, labs)[0].action == "written"


def test_foreign_lab_is_protected_and_scratch_notebooks_ignored(kit):
    sol, labs = kit
    labs.mkdir()
    (labs / "99_demo.ipynb").write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    (labs / "my_notes.ipynb").write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    [st] = lb.build(sol, labs)
    assert (st.state, st.action) == ("changed", "kept")
    assert "not generated" in st.detail


def test_orphaned_generated_lab_is_reported(kit):
    sol, labs = kit
    lb.build(sol, labs)
    (sol / "99_demo.ipynb").rename(sol / "98_renamed.ipynb")
    states = {s.name: s.state for s in lb.check(sol, labs)}
    assert states == {"98_renamed.ipynb": "missing", "99_demo.ipynb": "orphan"}
    lb.build(sol, labs)
    assert (labs / "99_demo.ipynb").exists()  # never deleted


@pytest.mark.parametrize(
    "source",
    [
        "### BEGIN SOLUTION\nx = 1\n",
        "x = 1\n### END SOLUTION\n",
        "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n",
    ],
)
def test_unbalanced_markers_are_errors(kit, source):
    sol, labs = kit
    nb = _solution_nb()
    nb["cells"][1]["source"] = source
    (sol / "99_demo.ipynb").write_text(json.dumps(nb))
    [st] = lb.build(sol, labs)
    assert st.state == "error" and "cell 1" in st.detail
    assert not (labs / "99_demo.ipynb").exists()


def _cli(*argv):
    parser = argparse.ArgumentParser()
    labs_cli.add_arguments(parser)
    return labs_cli.main(parser.parse_args(list(argv)))


def test_cli_build_and_check(kit, capsys):
    sol, labs = kit
    paths = ["--solutions", str(sol), "--labs", str(labs)]
    assert _cli("check", *paths) == 1
    out = capsys.readouterr().out
    assert "99_demo.ipynb" in out and "missing" in out
    assert _cli("build", *paths) == 0
    assert _cli("check", *paths) == 0
    nb = _lab(labs)
    nb["cells"][0]["source"] = "mine"
    (labs / "99_demo.ipynb").write_text(json.dumps(nb))
    assert _cli("check", *paths) == 1
    assert "changed" in capsys.readouterr().out
    assert _cli("build", *paths) == 1
    captured = capsys.readouterr()
    assert "kept" in captured.out and "--force" in captured.err
    assert _source_of(labs) == "mine"
    assert _cli("build", "--force", *paths) == 0
    assert _source_of(labs) == "# Lab 99\n\nA question?"
    assert _cli("build", "99_demo", *paths) == 0
    with pytest.raises(lb.LabsBuildError):
        _cli("build", "nope", *paths)


def _source_of(labs):
    return _src(_lab(labs)["cells"][0])


def test_repository_labs_are_in_sync_with_solutions():
    """`labs/` must be regenerated (`pagedlab labs build`) whenever `solutions/` changes."""
    sol, labs = REPO / "solutions", REPO / "labs"
    if not any(sol.glob("*.ipynb")):
        pytest.skip("no solution notebooks yet")
    bad = [f"{s.name}: {s.state} {s.detail}" for s in lb.check(sol, labs) if s.state != "up-to-date"]
    assert not bad, "labs/ is out of date; run `pagedlab labs build`:\n" + "\n".join(bad)
