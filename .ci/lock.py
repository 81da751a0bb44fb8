"""Write requirements.lock: the exact versions installed in this venv of everything
`pagedlab[lab,test,triton]` needs (its dependency closure, not the whole `pip freeze`).

    .venv/bin/python .ci/lock.py > requirements.lock        (or: make lock)

The lock is used as a pip *constraints* file (`-c`), so packages that a platform does not need
(triton on macOS) are simply ignored there. Local version labels are dropped (`torch==2.13.0`, not
`2.13.0+cpu`): pip then picks the CPU or CUDA build the index offers, and `==2.13.0` matches both.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = "pagedlab"
EXTRAS = ("lab", "test", "triton")


def closure() -> dict[str, str]:
    pins: dict[str, str] = {}
    todo: list[tuple[str, tuple[str, ...]]] = [(ROOT, EXTRAS)]
    seen: set[tuple[str, str]] = set()
    while todo:
        name, extras = todo.pop()
        dist = metadata.distribution(name)
        key = canonicalize_name(dist.metadata["Name"])
        for extra in ("",) + tuple(extras):
            if (key, extra) in seen:
                continue
            seen.add((key, extra))
            for line in dist.requires or []:
                req = Requirement(line)
                env = dict(default_environment(), extra=extra)
                if req.marker is not None and not req.marker.evaluate(env):
                    continue
                if req.marker is None and extra:
                    continue  # already handled with extra ""
                try:
                    dep = metadata.distribution(req.name)
                except metadata.PackageNotFoundError:
                    print(f"warning: {req.name} (needed by {name}) is not installed", file=sys.stderr)
                    continue
                dkey = canonicalize_name(dep.metadata["Name"])
                if dkey != canonicalize_name(ROOT):
                    pins[dkey] = dep.version
                todo.append((req.name, tuple(sorted(req.extras))))
    return pins


def main() -> None:
    pins = closure()
    print("# Exact versions the kit is tested with: the dependency closure of pagedlab[lab,test,triton].")
    print("# Used as a constraints file: pip install -e '.[lab,test,triton]' -c requirements.lock")
    print("# Regenerate from a working venv with `make lock` (.ci/lock.py). Do not edit torch's line to a")
    print("# local version (+cpu/+cu12x): `torch==2.13.0` accepts the CPU and the CUDA build.")
    print("# triton 3.7.1 is the version torch 2.13.0's CUDA build requires (Linux only).")
    print("# Needs Python >= 3.11.5 (soupsieve 4.1.3; transformers 5.24 and ipython 9 need 3.11).")
    for name in sorted(pins):
        version = re.sub(r"\+.*$", "", pins[name])
        print(f"{name}=={version}")


if __name__ == "__main__":
    main()
