"""``Player``: scrub through pre-recorded frames with core ipywidgets only.

Record, then scrub: the algorithm runs once and keeps immutable snapshots; the player draws frame
``i`` from snapshot ``i`` into one ``widgets.HTML`` (one trait update per frame, no flicker).
Controls are ``widgets.Play`` + ``widgets.IntSlider`` tied with ``widgets.link`` - kernel-side,
so it works in JupyterLab, VS Code and Colab alike (``jslink`` fails outside the browser and has
failed in Colab) - plus Prev/Next buttons, which clamp at the ends.

The HTML value wraps the SVG in ``<div class="pl-frame" data-frame=i data-frames=n>`` so a
browser test can tell which frame is shown; the player itself has the CSS class ``pl-player``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as widgets

Caption = None | str | Sequence[str] | Callable[[Any, int], str]


class Player(widgets.VBox):
    """A frame player: an SVG view, Play, a step slider, Prev/Next and a caption.

    Args:
        frames: the recorded items (snapshots, or ready SVG strings when ``render`` is None).
        render: ``item -> SVG string``; called lazily the first time a frame is shown, then cached.
        caption: a fixed string, one string per frame, or ``(item, index) -> str``.
        interval: milliseconds between frames while playing.
        description: slider label.
        start: the frame shown first.

    Raises:
        ValueError: ``frames`` is empty.

    Example::

        snaps = rebuild_snapshots(llm.llm_engine.tracer.events)
        Player(snaps, render=render_block_pool, caption=lambda s, i: f"step {s['step']}")
    """

    def __init__(
        self,
        frames: Sequence[Any],
        render: Callable[[Any], str] | None = None,
        caption: Caption = None,
        interval: int = 300,
        description: str = "frame",
        start: int = 0,
    ) -> None:
        frames = list(frames)
        if not frames:
            raise ValueError("Player needs at least one frame")
        self.frames = frames
        self.render = render
        self._caption = caption
        self._cache: dict[int, str] = {}
        last = len(frames) - 1
        start = max(0, min(int(start), last))
        self.html = widgets.HTML(layout=widgets.Layout(min_height="80px"))
        self.html.add_class("pl-frame-view")
        self.play = widgets.Play(
            value=start, min=0, max=last, step=1, interval=int(interval), description="Play", show_repeat=False
        )
        self.slider = widgets.IntSlider(
            value=start,
            min=0,
            max=last,
            step=1,
            description=description,
            continuous_update=True,
            layout=widgets.Layout(width="420px"),
        )
        # Kernel-side link (not jslink): see the module docstring.
        self._link = widgets.link((self.play, "value"), (self.slider, "value"))
        self.prev_button = widgets.Button(
            description="◀ Prev", tooltip="previous frame", layout=widgets.Layout(width="80px")
        )
        self.next_button = widgets.Button(
            description="Next ▶", tooltip="next frame", layout=widgets.Layout(width="80px")
        )
        self.prev_button.add_class("pl-prev")
        self.next_button.add_class("pl-next")
        self.prev_button.on_click(lambda _: self.step(-1))
        self.next_button.on_click(lambda _: self.step(+1))
        self.caption = widgets.HTML()
        self.caption.add_class("pl-caption")
        self.slider.observe(self._on_value, names="value")
        controls = widgets.HBox([self.play, self.prev_button, self.next_button, self.slider])
        super().__init__([controls, self.html, self.caption])
        self.add_class("pl-player")
        self._show(start)

    # --- frames -----------------------------------------------------------------------------
    @property
    def num_frames(self) -> int:
        return len(self.frames)

    @property
    def value(self) -> int:
        """Index of the frame shown."""
        return int(self.slider.value)

    @value.setter
    def value(self, i: int) -> None:
        self.slider.value = max(0, min(int(i), self.num_frames - 1))

    def frame_svg(self, i: int) -> str:
        """The SVG string of frame ``i`` (rendered once, then cached)."""
        if i not in self._cache:
            item = self.frames[i]
            self._cache[i] = item if self.render is None else self.render(item)
        return self._cache[i]

    def frame_html(self, i: int) -> str:
        """The HTML widget's value for frame ``i``: the SVG in a ``pl-frame`` div."""
        return f'<div class="pl-frame" data-frame="{i}" data-frames="{self.num_frames}">{self.frame_svg(i)}</div>'

    def caption_text(self, i: int) -> str:
        c = self._caption
        if c is None:
            return f"frame {i + 1} of {self.num_frames}"
        if isinstance(c, str):
            return c
        if callable(c):
            return str(c(self.frames[i], i))
        return str(c[i])

    def step(self, delta: int) -> None:
        """Move ``delta`` frames, clamped to ``[0, num_frames - 1]`` (what Prev/Next do)."""
        self.value = self.value + delta

    # --- internals --------------------------------------------------------------------------
    def _on_value(self, change: dict[str, Any]) -> None:
        self._show(int(change["new"]))

    def _show(self, i: int) -> None:
        from html import escape

        from pagedlab.i18n.messages import tr_lines

        self.html.value = self.frame_html(i)
        caption = tr_lines(self.caption_text(i))  # in the learner's language (pagedlab.i18n)
        self.caption.value = f'<span class="pl-caption-text" style="font-size:13px">{escape(caption)}</span>'

        self.prev_button.disabled = i <= 0
        self.next_button.disabled = i >= self.num_frames - 1
