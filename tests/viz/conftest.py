"""Helpers for the renderer tests: parse an SVG string and select elements by class."""

import xml.etree.ElementTree as ET

import pytest

NS = "{http://www.w3.org/2000/svg}"


class Svg:
    """A parsed renderer output."""

    def __init__(self, s: str) -> None:
        assert s.startswith("<svg"), s[:80]
        self.text = s
        self.root = ET.fromstring(s)  # raises on malformed XML

    def all(self, tag: str = "*", cls: str = None):
        out = []
        for el in self.root.iter():
            if tag != "*" and el.tag != NS + tag:
                continue
            if cls is not None and cls not in (el.get("class") or "").split():
                continue
            out.append(el)
        return out

    def one(self, tag: str = "*", cls: str = None):
        found = self.all(tag, cls)
        assert len(found) == 1, f"expected one {tag}.{cls}, found {len(found)}"
        return found[0]

    def texts(self):
        return [el.text or "" for el in self.root.iter(NS + "text")]

    @property
    def width(self) -> float:
        return float(self.root.get("width"))


@pytest.fixture
def parse_svg():
    def parse(s: str) -> Svg:
        svg = Svg(s)
        assert "pl-viz" in svg.root.get("class").split()
        assert svg.root.get("data-step") is not None
        # readable in a notebook: between ~600 and 900 px wide, scaled by the viewBox
        assert 600 <= svg.width <= 900, svg.width
        assert svg.root.get("viewBox")
        return svg

    return parse
