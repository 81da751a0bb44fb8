"""The ``pagedlab`` command.

Each subcommand lives in its own module, which exposes two functions::

    def add_arguments(parser: argparse.ArgumentParser) -> None: ...
    def main(args: argparse.Namespace) -> int: ...

and is registered here with one line in :data:`COMMANDS`. Only the module of the subcommand being
run is imported (``pagedlab --help`` imports none of them, so it is instant and works even while a
module is missing or broken). A subcommand that needs nested commands (``labs build``/``labs
check``) adds its own sub-parsers in ``add_arguments``.

Errors derived from :class:`pagedlab.errors.PagedLabError` are printed as one clear message (no
traceback) with exit status 1; Ctrl-C exits 130; a closed output pipe (``| head``) exits 141
without a message. Subcommands validate their input files before loading the model.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NamedTuple, Protocol, cast

from pagedlab.errors import PagedLabError


class Command(NamedTuple):
    name: str  #: the subcommand, as typed
    module: str  #: module exposing add_arguments(parser) and main(args) -> int
    help: str  #: one line for `pagedlab --help`


class CommandModule(Protocol):
    """What a subcommand's module exposes (see the module docstring)."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def main(self, args: argparse.Namespace) -> int: ...


#: The registry. Add a subcommand with one line here.
COMMANDS: list[Command] = [
    Command("doctor", "pagedlab.doctor", "check the installation and say how to fix each problem"),
    Command("fetch-model", "pagedlab.model.fetch", "download and verify the SmolLM2-135M GGUF (~98 MB)"),
    Command("generate", "pagedlab.demo", "serve a file of chat prompts through the paged engine (headless demo)"),
    Command(
        "replay", "pagedlab.sim.replay", "replay a request trace (Azure, Mooncake) in the simulator or on the engine"
    ),
    Command(
        "labs",
        "pagedlab.course.labs_cli",
        "labs build: generate labs/ from solutions/; labs check: are they in sync; labs copy DIR: the shipped labs into DIR",
    ),
    Command(
        "translate",
        "pagedlab.i18n.cli",
        "translate status: stale or missing translations of the notebooks; translate update: follow the English",
    ),
    Command(
        "grade",
        "pagedlab.grading.grade",
        "grade submitted notebooks in sandboxed processes (CSV, feedback, results.json)",
    ),
    Command(
        "gradescope-bundle",
        "pagedlab.grading.gradescope",
        "build a Gradescope autograder zip (setup.sh, run_autograder, hidden tests)",
    ),
    Command(
        "run-vllm",
        "pagedlab.vllm_compat",
        "run a script written for vLLM on pagedlab, unchanged (import vllm -> the kit)",
    ),
]

EXIT_UNAVAILABLE = 2
EXIT_BROKEN_PIPE = 141


def _version() -> str:
    try:
        # lazy: inside the try, so a package without __version__ still prints 'pagedlab ?'
        from pagedlab import __version__
    except Exception:  # pragma: no cover
        __version__ = "?"
    return f"pagedlab {__version__}"


def _chosen(argv: Sequence[str]) -> Command | None:
    names = {c.name: c for c in COMMANDS}
    for tok in argv:
        if tok == "--":
            return None
        if not tok.startswith("-"):
            return names.get(tok)
    return None


def build_parser(
    argv: Sequence[str] = (),
) -> tuple[argparse.ArgumentParser, Command | None, CommandModule | ImportError | None]:
    """The top-level parser; the chosen subcommand's module (if any in ``argv``) is imported and
    adds its arguments. Returns (parser, chosen command, its module or an ImportError)."""
    parser = argparse.ArgumentParser(
        prog="pagedlab",
        description="pagedlab: a course kit on KV-cache memory management in LLM serving.",
        epilog="Run `pagedlab COMMAND --help` for a command's options.",
        formatter_class=lambda prog: argparse.HelpFormatter(prog, max_help_position=26, width=100),
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    chosen = _chosen(argv)
    loaded: CommandModule | ImportError | None = None
    for cmd in COMMANDS:
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        if chosen is not None and cmd.name == chosen.name:
            try:
                # a module satisfies the protocol by convention; import_module can only say ModuleType
                module = cast(CommandModule, importlib.import_module(cmd.module))
                module.add_arguments(p)
                loaded = module
            except ImportError as e:
                loaded = e
                # accept anything so the clear "not available" message wins over argparse noise
                p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser, chosen, loaded


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, chosen, loaded = build_parser(argv)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_UNAVAILABLE
    assert chosen is not None and chosen.name == args.command
    assert loaded is not None  # build_parser imported (or failed to import) the chosen module
    if isinstance(loaded, ImportError):
        print(
            f"pagedlab {chosen.name}: not available: module {chosen.module} could not be imported\n"
            f"  ({type(loaded).__name__}: {loaded})\n"
            "  fix: if you are on an older checkout, update it; otherwise reinstall with `make setup`",
            file=sys.stderr,
        )
        return EXIT_UNAVAILABLE

    try:
        rc = loaded.main(args)
        sys.stdout.flush()  # a closed pipe shows up here at the latest, not at interpreter exit
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except PagedLabError as e:
        print(f"pagedlab {chosen.name}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"pagedlab {chosen.name}: interrupted", file=sys.stderr)
        return 130
    return int(rc or 0)


def _quiet_broken_pipe() -> int:
    """The reader of stdout went away (``pagedlab doctor | head -1``): exit quietly with 141.

    stdout is pointed at ``/dev/null`` so the interpreter's final flush cannot raise again (the
    recipe of Python's ``signal`` documentation); 141 = 128 + SIGPIPE, what a shell tool returns.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout has no file descriptor (e.g. captured in tests)
        pass
    return EXIT_BROKEN_PIPE


if __name__ == "__main__":  # python -m pagedlab.cli
    sys.exit(main())
