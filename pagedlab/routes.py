"""The cloud routes (Google Colab, Binder), all made from one setting: the repository URL.

The one place that holds it is ``pyproject.toml``::

    [project.urls]
    Repository = "https://github.com/OWNER/pagedlab"

:func:`repository_url` reads it (from the checkout's ``pyproject.toml``, else from the installed package's
metadata, where pip copies ``[project.urls]``). From it come: the pip requirement Colab installs the kit from
(:func:`kit_requirement`, written into every lab's setup cell by ``python -m pagedlab.colab``), the
"Open in Colab" and Binder links atop each lab, in the README and on the course site. With no URL set,
each of them says so instead of pointing somewhere made up.

Change the URL, then run ``make routes`` (it rewrites the setup cells, the links atop the labs and the
README's block, then ``pagedlab labs build``).
"""

from __future__ import annotations

import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from urllib.parse import quote

#: The key of ``[project.urls]`` that names the repository.
URL_KEY = "Repository"
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
#: What the setup cell, the labs and the README say while no URL is set.
UNSET = (
    "no repository URL is set: pyproject.toml's [project.urls] has no Repository entry, "
    "so there is no Colab or Binder route yet (set it, then run `make routes`)"
)
_GITHUB = re.compile(r"^https://github\.com/(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+?)(?:\.git)?/?$")


def repository_url(pyproject: Path | None = None) -> str | None:
    """The repository URL from ``[project.urls]`` (None when unset).

    Raises:
        ValueError: the URL is set but is not an ``https://github.com/OWNER/REPO`` URL (the form Colab's
            and Binder's GitHub routes take).
    """
    path = PYPROJECT if pyproject is None else pyproject
    if path.exists():
        urls = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {}).get("urls", {})
        url = urls.get(URL_KEY)
    else:  # an installed wheel: pip copied [project.urls] into the metadata
        url = None
        try:
            for entry in metadata.metadata("pagedlab").get_all("Project-URL") or []:
                name, _, value = entry.partition(",")
                if name.strip() == URL_KEY:
                    url = value.strip()
        except metadata.PackageNotFoundError:
            return None
    if not url:
        return None
    if not _GITHUB.match(url):
        raise ValueError(f"[project.urls] {URL_KEY} = {url!r}: expected https://github.com/OWNER/REPO")
    return url.rstrip("/").removesuffix(".git")


def _owner_repo(url: str) -> tuple[str, str]:
    m = _GITHUB.match(url)
    if m is None:
        raise ValueError(f"not a GitHub repository URL: {url!r}")
    return m["owner"], m["repo"]


def kit_requirement(url: str, ref: str = "main") -> str:
    """The pip requirement that installs the kit from the repository (what Colab's setup cell runs)."""
    return f"pagedlab @ git+{url}.git@{ref}"


def colab_url(path: str, url: str, ref: str = "main") -> str:
    """Colab's "open this notebook from GitHub" link for ``path`` (relative to the repository root)."""
    owner, repo = _owner_repo(url)
    return f"https://colab.research.google.com/github/{owner}/{repo}/blob/{ref}/{quote(path)}"


def binder_url(path: str, url: str, ref: str = "main") -> str:
    """mybinder.org's link that builds the repository (binder/) and opens ``path`` in JupyterLab."""
    owner, repo = _owner_repo(url)
    return f"https://mybinder.org/v2/gh/{owner}/{repo}/{ref}?urlpath={quote('lab/tree/' + path, safe='')}"


def links_markdown(path: str, url: str | None) -> str:
    """The markdown line of links for notebook ``path`` (or the line saying no URL is set)."""
    if url is None:
        return f"*Cloud routes: {UNSET}.*"
    return f"[Open in Colab]({colab_url(path, url)}) · [Launch on Binder]({binder_url(path, url)})"


README_BEGIN = "<!-- routes: generated from [project.urls] Repository by `make routes`; do not edit -->"
README_END = "<!-- /routes -->"


def readme_block(url: str | None) -> str:
    """The README's block of cloud links (between :data:`README_BEGIN` and :data:`README_END`)."""
    if url is None:
        body = f"Colab and Binder: {UNSET}."
    else:
        body = (
            f"[Open the welcome lab in Colab]({colab_url('labs/00_welcome.ipynb', url)}) · "
            f"[Launch the labs on Binder]({binder_url('labs/00_welcome.ipynb', url)})"
        )
    return f"{README_BEGIN}\n{body}\n{README_END}"


def write_readme(readme: Path, url: str | None) -> bool:
    """Put :func:`readme_block` into ``readme`` (replacing an older one; else after the first heading).

    Returns whether the file changed.
    """
    text = readme.read_text(encoding="utf-8")
    block = readme_block(url)
    if README_BEGIN in text and README_END in text:
        start = text.index(README_BEGIN)
        end = text.index(README_END) + len(README_END)
        new = text[:start] + block + text[end:]
    else:
        first, _, rest = text.partition("\n")
        new = f"{first}\n\n{block}\n{rest}"
    if new == text:
        return False
    readme.write_text(new, encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m pagedlab.routes [README]``: rewrite the README's block of cloud links from the setting."""
    args = sys.argv[1:] if argv is None else argv
    readme = Path(args[0]) if args else PYPROJECT.parent / "README.md"
    url = repository_url()
    changed = write_readme(readme, url)
    print(f"  {readme}: {'links written' if changed else 'up to date'} ({url or 'no repository URL set'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
