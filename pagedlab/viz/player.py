"""``Player``: scrub through pre-recorded frames, animated in the browser with core ipywidgets only.

Record, then scrub: the algorithm runs once and keeps immutable snapshots; the player renders every frame
once, up front, into its own ``widgets.HTML`` and puts them all in a ``widgets.Stack`` (one child per
frame). The front end links ``Play.value -> IntSlider.value -> Stack.selected_index`` with ``jslink``, so
Play and the slider change frames **in the browser, without the kernel**: in JupyterLab, Notebook 7 and
VS Code, and in a saved or exported page whose widget state was stored (the course site, ``make site``).
Prev/Next are kernel-side buttons (one round trip per click; they clamp at the ends); the course site
wires them to the slider in the page itself.

Google Colab: its built-in widget manager once broke ``jslink`` (googlecolab/colabtools#1612, 2020); the
custom widget manager the labs enable (``pagedlab.colab.setup``) supports it since
googlecolab/colab-cdn-widget-manager#18 (2021). Untested here (no Colab), so inside Colab the player also
links the three values kernel-side (``widgets.link``/``widgets.dlink``): one round trip per frame there, as
before, whichever link arrives first.

Each frame's HTML wraps the SVG in ``<div class="pl-frame" data-frame=i data-frames=n>`` followed by the
caption (``pl-caption``), so a browser test can tell which frame is shown; the player itself has the CSS
class ``pl-player``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from html import escape
from typing import Any

import ipywidgets as widgets

from pagedlab.i18n.messages import tr_lines

Caption = None | str | Sequence[str] | Callable[[Any, int], str]


def _in_colab() -> bool:
    return "google.colab" in sys.modules


class Player(widgets.VBox):
    """A frame player: an SVG view with a caption per frame, Play, a step slider and Prev/Next.

    Args:
        frames: the recorded items (snapshots, or ready SVG strings when ``render`` is None).
        render: ``item -> SVG string``; called once per frame when the player is built.
        caption: a fixed string, one string per frame, or ``(item, index) -> str``.
        interval: milliseconds between frames while playing.
        description: slider label.
        start: the frame shown first (clamped to the frames there are).

    Raises:
        ValueError: ``frames`` is empty, or ``caption`` is a sequence of another length than ``frames``.

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
        if caption is not None and not isinstance(caption, str) and not callable(caption):
            caption = list(caption)
            if len(caption) != len(frames):
                raise ValueError(f"Player got {len(caption)} captions for {len(frames)} frames")
        self.frames = frames
        self.render = render
        self._caption = caption
        self._cache: dict[int, str] = {}
        last = len(frames) - 1
        start = max(0, min(int(start), last))
        views = []
        for i in range(len(frames)):
            view = widgets.HTML(self.frame_html(i), layout=widgets.Layout(min_height="80px"))
            view.add_class("pl-frame-view")
            views.append(view)
        self.stack = widgets.Stack(views, selected_index=start)
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
        # Front-end links: frames change in the browser with no kernel round trip (module docstring).
        self._link: Any = widgets.jslink((self.play, "value"), (self.slider, "value"))
        self._stack_link: Any = widgets.jslink((self.slider, "value"), (self.stack, "selected_index"))
        if _in_colab():  # kernel-side fallback beside them (module docstring)
            self._kernel_links = (
                widgets.link((self.play, "value"), (self.slider, "value")),
                widgets.dlink((self.slider, "value"), (self.stack, "selected_index")),
            )
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
        controls = widgets.HBox([self.play, self.prev_button, self.next_button, self.slider])
        controls.add_class("pl-controls")
        super().__init__([controls, self.stack])
        self.add_class("pl-player")

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
        i = max(0, min(int(i), self.num_frames - 1))
        # all three, from the kernel: the front end's links only act on changes made in the browser
        self.play.value = i
        self.slider.value = i
        self.stack.selected_index = i

    @property
    def html(self) -> widgets.HTML:
        """The HTML widget of the frame shown (the SVG and its caption)."""
        view: widgets.HTML = self.stack.children[self.value]
        return view

    @property
    def caption(self) -> widgets.HTML:
        """Kept for callers of the former single caption widget: the frame shown (it holds the caption)."""
        return self.html

    def frame_svg(self, i: int) -> str:
        """The SVG string of frame ``i`` (rendered once, then cached)."""
        if i not in self._cache:
            item = self.frames[i]
            self._cache[i] = item if self.render is None else self.render(item)
        return self._cache[i]

    def frame_html(self, i: int) -> str:
        """Frame ``i``'s HTML: the SVG in a ``pl-frame`` div, then its caption."""
        return (
            f'<div class="pl-frame" data-frame="{i}" data-frames="{self.num_frames}">{self.frame_svg(i)}</div>'
            f'<div class="pl-caption"><span class="pl-caption-text" style="font-size:13px">'
            f"{escape(tr_lines(self.caption_text(i)))}</span></div>"  # the learner's language (pagedlab.i18n)
        )

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
