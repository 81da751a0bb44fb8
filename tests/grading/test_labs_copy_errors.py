"""`pagedlab labs copy` into a place it cannot write: one line naming the folder, exit 1 (issue 26)."""

from __future__ import annotations

import pytest

from pagedlab import cli


@pytest.mark.parametrize("where", ["under-a-file", "read-only-filesystem"])
def test_labs_copy_into_an_unwritable_place_is_one_line_and_exit_1(tmp_path, capsys, where):
    if where == "under-a-file":
        (tmp_path / "notes.txt").write_text("a file, not a folder")
        dest = tmp_path / "notes.txt" / "labs"
    else:
        dest = "/proc/pagedlab-labs"  # no one may create files in /proc, root included
    assert cli.main(["labs", "copy", str(dest)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"pagedlab labs: error: cannot write {dest}:") and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
