"""Getting a learner's exercises out of a notebook, robustly."""

from __future__ import annotations

import json

import pytest

from pagedlab.grading import registry
from pagedlab.grading.checking import check
from pagedlab.grading.extract import NotebookError, exercise_names, find_exercises, load_exercises, read_notebook
from tests.grading.helpers import make_notebook, write_notebook

NAMES = exercise_names()


def load(cells):
    nb = json.loads(json.dumps(make_notebook(cells)))
    ext = find_exercises(nb, NAMES)
    return ext, load_exercises(ext, NAMES)


def test_marker_cells_are_found_and_only_needed_setup_runs():
    cells = [
        ("md", "# Lab 02"),
        "import math as m\nimport module_that_does_not_exist_xyz\nBS = 4\npool = make_a_pool()",
        "%matplotlib inline\nfrom collections import deque",
        "# EXERCISE 02.slot_mapping\n"
        "def slot_mapping(block_table, positions, block_size=BS):\n"
        "    assert m.floor(1.5) == 1\n"
        "    return [block_table[p // block_size] * block_size + p % block_size for p in positions]\n"
        "print(slot_mapping([1], [0], 4))\ncheck(slot_mapping)\nassert False\n",
        "check(slot_mapping)",
    ]
    ext, res = load(cells)
    assert list(ext.cells) == ["02.slot_mapping"] and ext.cells["02.slot_mapping"].found_by == "marker"
    le = res["02.slot_mapping"]
    assert le.ok, le.error
    assert not le.notes  # the broken import and make_a_pool() were never needed, so never run
    assert check(le.obj, "02.slot_mapping", show=False).passed


def test_metadata_marker_and_unmarked_cells():
    nb = make_notebook([registry.snippet_source("06.pick_victim").split("\n", 1)[1]])
    nb["cells"][0]["metadata"]["pagedlab"] = {"exercise": "06.pick_victim"}
    ext = find_exercises(json.loads(json.dumps(nb)), NAMES)
    assert ext.cells["06.pick_victim"].found_by == "metadata"
    ext, res = load(["def kv_bytes_per_token(config):\n    return 1\n"])
    assert ext.cells["01.kv_bytes_per_token"].found_by == "name"
    assert any("no '# EXERCISE 01.kv_bytes_per_token' first line" in n for n in ext.notes)
    assert res["01.kv_bytes_per_token"].ok


def test_renamed_function_syntax_error_and_sys_exit_are_per_exercise():
    cells = [
        "# EXERCISE 02.slot_mapping\ndef slot_map(a, b, c):\n    return []\n",
        "# EXERCISE 06.pick_victim\ndef pick_victim(running, policy)\n    return running[-1]\n",
        "# EXERCISE 06.crossover\nimport sys\nif True:\n    sys.exit(0)\ndef crossover_flops_per_s(p, k, b):\n"
        "    return 1.0\n",
        "# EXERCISE 01.kv_bytes_per_token\nimport sys\nsys.exit(0)  # a bare call runs, as in the notebook\n"
        "def kv_bytes_per_token(config):\n    return 0\n",
    ]
    _, res = load(cells)
    assert "does not define slot_mapping; it defines slot_map" in res["02.slot_mapping"].error
    assert "syntax error at line 2" in res["06.pick_victim"].error
    assert "called sys.exit()" in res["06.crossover"].error
    assert "called sys.exit()" in res["01.kv_bytes_per_token"].error


def test_a_raising_cell_is_reported_with_its_line():
    _, res = load(["# EXERCISE 02.slot_mapping\nx = 1\ny = 1 / 0\n"])
    assert "raised ZeroDivisionError: division by zero (line 3)" in res["02.slot_mapping"].error


def test_duplicate_and_foreign_markers_are_noted():
    src = registry.snippet_source("02.slot_mapping")
    ext, res = load([src.replace("return [", "return [0 * "), src, "# EXERCISE 42.not_ours\nx = 1\n"])
    assert ext.cells["02.slot_mapping"].index == 1
    assert any("appears in cells 0 and 1" in n for n in ext.notes)
    assert any("not an exercise of this course" in n for n in ext.notes)
    assert check(res["02.slot_mapping"].obj, show=False).passed


def test_another_course_notebook_has_no_exercises():
    ext, res = load([("md", "# Linear regression"), "import numpy as np\nX = np.ones(3)", "def fit(X):\n    return X"])
    assert not ext.cells and not res


@pytest.mark.parametrize(
    "content,message",
    [
        ("{not json", "not valid JSON"),
        ("", "not valid JSON"),
        ('{"a": 1}', "not a Jupyter notebook"),
        ("[1, 2]", "not a Jupyter notebook"),
        ('{"nbformat": 3, "worksheets": []}', "nbformat 3"),
        ('{"nbformat": 4, "cells": {}}', "'cells' is not a list"),
    ],
)
def test_bad_files_give_clear_messages(tmp_path, content, message):
    p = tmp_path / "x.ipynb"
    p.write_text(content)
    with pytest.raises(NotebookError, match=message):
        read_notebook(p)


def test_binary_and_missing_files(tmp_path):
    p = tmp_path / "b.ipynb"
    p.write_bytes(b"\xff\xfe\x00\x81binary")
    with pytest.raises(NotebookError, match="not a text notebook"):
        read_notebook(p)
    with pytest.raises(NotebookError, match="cannot read"):
        read_notebook(tmp_path / "missing.ipynb")


def test_nbformat_written_notebooks_round_trip(tmp_path):
    p = write_notebook(tmp_path / "lab.ipynb", [registry.snippet_source("03.fork"), "check(fork)"])
    nb = read_notebook(p)
    ext = find_exercises(nb, NAMES)
    res = load_exercises(ext, NAMES)
    assert check(res["03.fork"].obj, show=False).passed


def test_an_endless_loop_at_top_level_is_cut_by_the_runner():
    from pagedlab.grading.runner import time_limit

    def limited(fn):
        with time_limit(0.3):
            return fn()

    nb = json.loads(
        json.dumps(
            make_notebook(
                ["# EXERCISE 02.slot_mapping\nwhile True:\n    pass\n", registry.snippet_source("06.pick_victim")]
            )
        )
    )
    res = load_exercises(find_exercises(nb, NAMES), NAMES, run=limited)
    assert "did not finish in time" in res["02.slot_mapping"].error
    assert res["06.pick_victim"].ok


def test_top_level_calls_in_an_exercise_cell_run_and_only_no_op_lines_are_left_out():
    """A top-level expression statement used to be dropped silently, so a method attached with ``setattr`` was
    missing under the grader (issue 22). Calls run; asserts, ``check(...)`` and a bare name do not."""
    cell = (
        "# EXERCISE 02.slot_mapping\n"
        "def _impl(block_table, positions, block_size):\n"
        "    return [block_table[p // block_size] * block_size + p % block_size for p in positions]\n"
        "class _Holder: pass\n"
        "setattr(_Holder, 'fn', staticmethod(_impl))\n"
        "slot_mapping = _Holder.fn\n"
        "assert slot_mapping([0], [0], 4) == [99], 'a spot check of its own'\n"
        "check(slot_mapping)\n"
        "slot_mapping\n"
    )
    res = load([cell])[1]["02.slot_mapping"]
    assert res.ok, res.error
    assert res.obj([3, 9], [0, 5], 4) == [12, 37]
