"""matplotlib figures in Chinese (pagedlab.i18n.figures): the titles, axis labels, legends and annotations the labs
03-09 draw in their code cells have catalog entries, and a figure rendered after ``set_language("zh")`` shows
them translated while English figures stay as drawn."""

from __future__ import annotations

import ast
import io
import json
import re
from pathlib import Path

import pytest

from pagedlab.i18n import messages
from tests.i18n.source_strings import template

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "solutions").glob("0[3-9]_*.ipynb"))
KEYWORDS = ("title", "label", "xlabel", "ylabel")
METHODS = ("set_title", "set_xlabel", "set_ylabel", "suptitle", "annotate")


@pytest.fixture(autouse=True)
def _english_after():
    yield
    messages.set_language(None)


def figure_texts(notebook: Path) -> list[str]:
    """What ``notebook``'s code cells write on matplotlib figures: ``title=``/``label=``/... arguments and the
    first argument of ``set_title``/``set_xlabel``/``set_ylabel``/``suptitle``/``annotate``."""
    out = []
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        src = re.sub(r"^\s*[%!].*$", "", src, flags=re.M)  # IPython magics and shell lines are not Python
        for node in ast.walk(ast.parse(src)):
            if not isinstance(node, ast.Call):
                continue
            args = [k.value for k in node.keywords if k.arg in KEYWORDS]
            if isinstance(node.func, ast.Attribute) and node.func.attr in METHODS and node.args:
                args.append(node.args[0])
            out += [t for a in args if (t := template(a)) is not None]
    # a unit or a name ("ms", "GiB", "gpu_memory_utilization") and "{a} ({b})" stay as they are
    return [t for t in out if len(re.findall(r"[A-Za-z][\w/%.-]*", re.sub(r"\{\w\}", "", t))) >= 2]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_figure_text_of_the_lab_has_a_chinese_entry(notebook):
    cat = messages.catalog("zh")
    missing = [t for t in figure_texts(notebook) if cat.lookup(t) is None]
    assert not missing, f"{notebook.name}: figure texts without an entry in pagedlab/i18n/zh.po: {missing}"


def test_the_labs_draw_figures():
    texts = [t for nb in NOTEBOOKS for t in figure_texts(nb)]
    assert len(texts) > 80 and "memory saved by sharing (%)" in texts and "RefCountedPool, frame {a}" in texts


@pytest.mark.filterwarnings("ignore:Glyph .* missing from font")  # no CJK font here: test_cjk_fonts.py's matter
def test_a_figure_is_translated_as_it_is_rendered_and_english_stays():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def draw():
        fig, ax = plt.subplots()
        ax.plot([1, 2], [3, 4], label="GPU blocks used")
        ax.set_title("What the watermark saves")
        ax.set_xlabel("engine step")
        ax.set_ylabel("ms")
        ax.legend()
        return fig

    fig = draw()
    fig.savefig(io.BytesIO(), format="png")  # English (set_language not called): as drawn
    assert fig.axes[0].get_title() == "What the watermark saves"
    messages.set_language("zh")
    fig.savefig(io.BytesIO(), format="png")
    ax = fig.axes[0]
    assert ax.get_title() == "水位线省下了什么" and ax.get_xlabel() == "引擎步" and ax.get_ylabel() == "ms"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["已用 GPU 块"]
    plt.close(fig)
    messages.set_language("en")
    fig = draw()
    fig.savefig(io.BytesIO(), format="png")
    assert fig.axes[0].get_title() == "What the watermark saves"  # the hook stays, English figures do not change
    plt.close(fig)
