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


def test_a_folder_where_a_lab_goes_is_one_line_and_exit_1(tmp_path, capsys):
    """Was: IsADirectoryError's traceback (the copy read the path to see whether it may be replaced)."""
    from pagedlab import data

    first = sorted(data.labs_directory().glob("*.ipynb"))[0].name
    (tmp_path / "labs" / first).mkdir(parents=True)
    assert cli.main(["labs", "copy", str(tmp_path / "labs")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"pagedlab labs: error: cannot write {tmp_path / 'labs' / first}: Is a directory; ") and (
        "choose a folder you can write" in err
    ), err
    assert len(err.strip().splitlines()) == 1, err


def test_a_lab_that_is_not_utf8_is_kept_as_changed(tmp_path, capsys):
    """Was: UnicodeDecodeError's traceback. A file there that is not UTF-8 is a learner's, changed: kept unless --force."""
    from pagedlab import data

    first = sorted(data.labs_directory().glob("*.ipynb"))[0].name
    (tmp_path / "labs").mkdir()
    (tmp_path / "labs" / first).write_bytes(b"\xff\xfe not a notebook")
    assert cli.main(["labs", "copy", str(tmp_path / "labs")]) == 1
    out, err = capsys.readouterr()
    assert f"{first}" in out and "kept: the file is not UTF-8 text" in out and "Traceback" not in err, (out, err)
    assert (tmp_path / "labs" / first).read_bytes() == b"\xff\xfe not a notebook"
    assert cli.main(["labs", "copy", "--force", str(tmp_path / "labs")]) == 0
    assert (tmp_path / "labs" / first).read_text(encoding="utf-8") == (data.labs_directory() / first).read_text(
        encoding="utf-8"
    )
