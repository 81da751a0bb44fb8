"""``pagedlab translate status | update``: which notebook cells lack a current translation, and bring the
catalogs (``solutions/<lang>/*.po``) in line with the English notebooks (:mod:`pagedlab.i18n.notebooks`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pagedlab.i18n import notebooks
from pagedlab.i18n.messages import LANGUAGES, I18nError

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="translate_command", metavar="{status,update}", required=True)
    for name, helptext in (
        ("status", "list each notebook's stale, missing and obsolete translations (exit 1 if any)"),
        ("update", "follow the English: add new cells, mark changed ones fuzzy (stale), drop removed ones"),
    ):
        p = sub.add_parser(name, help=helptext, description=helptext)
        p.add_argument("notebooks", nargs="*", help="only these notebooks (names in solutions/)")
        p.add_argument("--lang", default="zh", help="language code (default zh)")
        p.add_argument("--solutions", type=Path, default=Path("solutions"), help="folder of the English notebooks")
        p.add_argument("-v", "--verbose", action="store_true", help="print each stale/missing cell's first line")


def _first_line(solution: Path, cid: str) -> str:
    for c, src in notebooks.cells(json.loads(solution.read_text(encoding="utf-8"))):
        if c == cid:
            return src.strip().splitlines()[0][:70] if src.strip() else ""
    return ""


def _notebooks(solutions: Path, names: list[str]) -> list[Path]:
    paths = sorted(p for p in solutions.glob("*.ipynb") if not p.name.startswith((".", "_")))
    if names:
        wanted = {n if n.endswith(".ipynb") else n + ".ipynb" for n in names}
        unknown = wanted - {p.name for p in paths}
        if unknown:
            raise I18nError(f"no such notebook(s) in {solutions}: {', '.join(sorted(unknown))}")
        paths = [p for p in paths if p.name in wanted]
    return paths


def main(args: argparse.Namespace) -> int:
    if args.lang not in LANGUAGES or args.lang == "en":
        raise I18nError(f"--lang {args.lang!r}: translations exist for {', '.join(k for k in LANGUAGES if k != 'en')}")
    if not args.solutions.is_dir():
        raise I18nError(f"no folder {args.solutions}; run from the kit's root or pass --solutions")
    bad = 0
    paths = _notebooks(args.solutions, args.notebooks)
    for p in paths:
        st = notebooks.update(p, args.lang) if args.translate_command == "update" else notebooks.status(p, args.lang)
        line = f"  {p.name:<40} {st.translated}/{st.cells} cells translated"
        for what in ("stale", "missing", "obsolete", "unfaithful"):
            ids = getattr(st, what)
            if ids:
                line += f", {len(ids)} {what}"
        print(line)
        if args.verbose:
            for cid in st.stale + st.missing + st.unfaithful:
                what = "stale  " if cid in st.stale else "missing" if cid in st.missing else "changes code"
                print(f"      {what} {cid}: {_first_line(p, cid)}")
        bad += not st.ok
    where = f"{args.solutions}/{args.lang}/"
    if args.translate_command == "update":
        print(f"updated the catalogs in {where}; translate the empty and fuzzy entries (a .po editor, or by hand)")
    elif bad:
        print(f"{bad} notebook(s) need work: `pagedlab translate update --lang {args.lang}` then edit {where}*.po")
    return 1 if bad and args.translate_command == "status" else 0
