"""``pagedlab labs build | check | copy``: the command line over :mod:`pagedlab.course.labs_build` (the
learner notebooks) and :mod:`pagedlab.course.formats` (the nbgrader and otter source assignments). It sits
above both, so neither imports the other's caller."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pagedlab import data
from pagedlab.course import formats
from pagedlab.course.labs_build import LabsBuildError, LabStatus, build, check, copy_labs, generate_lab, scan
from pagedlab.grading.points import add_points_argument, add_scoring_argument, parse_points
from pagedlab.i18n import LANGUAGES, notebooks
from pagedlab.i18n.messages import normalize_language

__all__ = ["add_arguments", "main"]


def _default_dir(name: str) -> Path:
    here = Path.cwd() / name
    if here.is_dir():
        return here
    repo = Path(__file__).resolve().parents[2] / name  # editable install: the checkout
    return repo if repo.is_dir() else here


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``labs build`` and ``labs check`` sub-commands."""
    sub = parser.add_subparsers(dest="labs_command", metavar="{build,check,copy}", required=True)
    cp = sub.add_parser(
        "copy",
        help="copy the learner notebooks shipped with the kit into a folder (never "
        "overwrites an edited one without --force)",
    )
    cp.add_argument("dest", type=Path, help="folder to copy the labs into (created if missing)")
    cp.add_argument("--force", action="store_true", help="also overwrite labs that were edited or run since copied")
    cp.add_argument("--lang", default="en", help="en (default) or zh: the labs in that language (labs/zh/)")
    for name, helptext in (
        ("build", "regenerate labs/ from solutions/ (never overwrites a changed lab without --force)"),
        ("check", "exit 1 if labs/ is out of date with solutions/"),
    ):
        p = sub.add_parser(name, help=helptext, description=helptext)
        p.add_argument("notebooks", nargs="*", help="only these notebooks (names in solutions/)")
        p.add_argument("--solutions", type=Path, default=None, help="source folder (default: ./solutions)")
        p.add_argument("--labs", "--out", dest="labs", type=Path, default=None, help="output folder (default: ./labs)")
        if name == "build":
            p.add_argument(
                "--format",
                choices=("labs", "nbgrader", "otter"),
                default="labs",
                help="labs: learner notebooks (default); nbgrader: a source assignment for `nbgrader "
                "generate_assignment` (--out COURSE/source/ASSIGNMENT); otter: master notebooks for `otter assign`",
            )
            add_points_argument(p)
            add_scoring_argument(p)
            p.add_argument(
                "--force",
                action="store_true",
                help="also overwrite labs that were edited or run since they were generated",
            )


def _translations(solutions: Path) -> list[str]:
    """The languages with catalogs beside the English notebooks (``solutions/zh/*.po``)."""
    return [lang for lang in LANGUAGES if lang != "en" and any((solutions / lang).glob("*.po"))]


def _translated(catalogs: Path, lang: str) -> Callable[[dict[str, Any], str, str], dict[str, Any]]:
    """:func:`generate_lab` of the solution with its markdown cells translated (stale ones stay English)."""

    def generate(solution: dict[str, Any], stem: str, source_path: str) -> dict[str, Any]:
        translated, _ = notebooks.translate_notebook(solution, notebooks.read(catalogs / f"{stem}.po"), lang)
        return generate_lab(translated, stem, source_path)

    return generate


def _translated_labs(solutions: Path, labs: Path, names: list[str], force: bool | None) -> list[LabStatus]:
    """Build (``force`` True/False) or check (None) ``labs/<lang>/`` for each translation; names ``<lang>/x``."""
    out = []
    for lang in _translations(solutions):
        generate = _translated(solutions / lang, lang)
        if force is None:
            done = [st for st, _ in scan(solutions, labs / lang, names, generate)]
        else:
            done = build(solutions, labs / lang, force, names, generate)
        for st in done:
            st.name = f"{lang}/{st.name}"
        out += done
    return out


def _lang_labs(lang: str) -> Path | None:
    """The shipped labs folder of ``lang`` (None: English, the default folder)."""
    lang = normalize_language(lang, "--lang")
    return None if lang == "en" else data.labs_directory() / lang


def _line(st: LabStatus) -> str:
    what = st.action or st.state
    return f"  {st.name:<40} {what}" + (f": {st.detail}" if st.detail and st.state != "up-to-date" else "")


def _report_kept(results: list[LabStatus]) -> int:
    """Print the warning for labs kept because they were changed; 1 if there were any."""
    kept = [st for st in results if st.action == "kept"]
    if kept:
        print(
            f"{len(kept)} lab(s) changed since they were generated were NOT overwritten; "
            "rename them to keep your work, or rerun with --force to replace them.",
            file=sys.stderr,
        )
    return 1 if kept else 0


def main(args: argparse.Namespace) -> int:
    if args.labs_command == "copy":
        results = copy_labs(args.dest, force=args.force, source=_lang_labs(args.lang))
        print(f"pagedlab labs copy{'' if args.lang == 'en' else ' --lang ' + args.lang}: -> {args.dest}")
        for st in results:
            print(_line(st))
        status = _report_kept(results)
        print(f"next: pagedlab fetch-model (once), then jupyter lab {args.dest}")
        return status
    solutions = args.solutions or _default_dir("solutions")
    fmt = getattr(args, "format", "labs")
    if fmt != "labs" and args.labs is None:
        raise LabsBuildError(
            f"--format {fmt} needs --out DIR"
            + (" (nbgrader: COURSE/source/ASSIGNMENT)" if fmt == "nbgrader" else " (a folder for the master notebooks)")
        )
    labs = args.labs or _default_dir("labs")
    if not solutions.is_dir():
        raise LabsBuildError(f"no solutions folder at {solutions}; run from the kit's root or pass --solutions")
    if args.labs_command == "build":
        generate = formats.generator(fmt, parse_points(args.points), getattr(args, "scoring", None))
        results = build(solutions, labs, force=args.force, names=args.notebooks, generate=generate)
        if fmt == "labs":  # and each translation: labs/<lang>/ from solutions/<lang>/*.po (pagedlab.i18n)
            results += _translated_labs(solutions, labs, args.notebooks, force=args.force)
        print(f"pagedlab labs build{'' if fmt == 'labs' else ' --format ' + fmt}: {solutions} -> {labs}")
        for st in results:
            print(_line(st))
        kept = _report_kept(results)
        return 1 if kept or any(st.state == "error" for st in results) else 0
    results = check(solutions, labs, names=args.notebooks)
    results += _translated_labs(solutions, labs, args.notebooks, force=None)
    bad = [st for st in results if st.state != "up-to-date"]
    if not bad:
        print(f"pagedlab labs check: {len(results)} lab(s) up to date with {solutions}")
        return 0
    print(f"pagedlab labs check: {len(bad)} of {len(results)} lab(s) out of date with {solutions}:")
    for st in bad:
        print(_line(st))
    print("fix: run `pagedlab labs build` (add --force to replace changed labs)")
    return 1
