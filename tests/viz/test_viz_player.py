"""Player: frame stepping in the kernel (slider -> HTML), Prev/Next clamping, Play link, helpers."""

import re

import ipywidgets as widgets
import pytest

from pagedlab import viz
from pagedlab.engine.step_stats import StepStats
from pagedlab.viz import Player


def _frames(n=4):
    return [{"step": i} for i in range(n)]


def _render(item):
    return f'<svg class="pl-viz" data-step="{item["step"]}"></svg>'


def _frame_no(p):
    return int(re.search(r'data-frame="(\d+)"', p.html.value).group(1))


def test_frames_live_on_the_client_linked_by_jslink():
    p = Player(_frames(), render=_render)
    assert isinstance(p, widgets.VBox) and "pl-player" in p._dom_classes
    assert isinstance(p.play, widgets.Play) and isinstance(p.slider, widgets.IntSlider)
    assert (p.slider.min, p.slider.max, p.play.max) == (0, 3, 3)
    # one HTML child per frame, each already holding its SVG: the browser switches between them
    assert isinstance(p.stack, widgets.Stack) and len(p.stack.children) == 4
    assert [_frame_no_of(v.value) for v in p.stack.children] == [0, 1, 2, 3]
    # front-end links (widgets, synced to the page), Play -> slider -> Stack.selected_index
    assert isinstance(p._link, widgets.widget_link.Link) and isinstance(p._stack_link, widgets.widget_link.Link)
    assert (p._link.source, p._link.target) == ((p.play, "value"), (p.slider, "value"))
    assert (p._stack_link.source, p._stack_link.target) == ((p.slider, "value"), (p.stack, "selected_index"))
    assert not hasattr(p, "_kernel_links")


def test_colab_adds_kernel_side_links(monkeypatch):
    import sys
    import types

    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    p = Player(_frames(), render=_render)
    p.play.value = 3  # what Colab's front end sends each tick if its jslink does not act
    assert p.slider.value == 3 and p.stack.selected_index == 3 and _frame_no(p) == 3


def _frame_no_of(html):
    return int(re.search(r'data-frame="(\d+)"', html).group(1))


def test_value_moves_play_slider_and_stack_together():
    p = Player(_frames(), render=_render, caption=lambda item, i: f"at {item['step']}")
    assert 'data-step="0"' in p.html.value and _frame_no(p) == 0
    p.value = 2
    assert (p.play.value, p.slider.value, p.stack.selected_index) == (2, 2, 2)
    assert p.html.value == p.frame_html(2) and 'data-step="2"' in p.html.value
    assert "at 2" in p.caption.value
    assert 'data-frames="4"' in p.html.value


def test_front_end_moves_are_read_back():
    # the browser moves slider and stack through jslink; the kernel then reads the synced values
    p = Player(_frames(), render=_render)
    p.slider.value = 3
    p.stack.selected_index = 3
    assert p.value == 3 and _frame_no(p) == 3
    p.step(-1)
    assert (p.play.value, p.slider.value, p.stack.selected_index) == (2, 2, 2)


def test_next_prev_clamp_at_ends():
    p = Player(_frames(3), render=_render)
    p.prev_button.click()
    assert p.value == 0 and _frame_no(p) == 0
    p.next_button.click()
    p.next_button.click()
    assert p.value == 2
    p.next_button.click()
    assert p.value == 2 and _frame_no(p) == 2 and p.play.value == 2
    p.prev_button.click()
    assert p.value == 1 and p.stack.selected_index == 1
    p.value = 99
    assert p.value == 2
    p.value = -5
    assert p.value == 0


def test_frames_render_once_each():
    calls = []

    def render(item):
        calls.append(item["step"])
        return _render(item)

    p = Player(_frames(5), render=render)
    assert calls == [0, 1, 2, 3, 4]
    p.value = 3
    p.value = 0
    assert p.frame_svg(3) == _render({"step": 3}) and calls == [0, 1, 2, 3, 4]


def test_caption_count_must_match():
    with pytest.raises(ValueError, match="3 captions for 2 frames"):
        Player(["<svg/>", "<svg/>"], caption=["a", "b", "c"])


def test_ready_svg_strings_captions_and_start():
    p = Player(["<svg>a</svg>", "<svg>b</svg>"], caption=["first", "second"], start=1)
    assert "<svg>b</svg>" in p.html.value and "second" in p.caption.value
    assert Player(["<svg/>"], caption="fixed").caption_text(0) == "fixed"
    assert "frame 1 of 1" in Player(["<svg/>"]).caption.value


def test_empty_frames_rejected():
    with pytest.raises(ValueError):
        Player([])


def _stats():
    return [
        StepStats(
            i,
            [("0", 20 if i == 0 else 1, i == 0)],
            20 if i == 0 else 0,
            0 if i == 0 else 1,
            [],
            2 + i // 2,
            14 - i // 2,
            0.01,
            running=1,
        )
        for i in range(6)
    ]


def test_kv_usage_player_frames_differ():
    p = viz.kv_usage_player(_stats())
    assert p.num_frames == 6
    first = p.html.value
    p.value = 5
    assert p.html.value != first and 'data-step="5"' in p.html.value
    assert "step 5" in p.caption.value


def test_pool_player_from_events():
    events = [
        {"step": 0, "kind": "init", "num_gpu_blocks": 4},
        {"step": 0, "kind": "alloc", "block_ids": [0, 1], "owner": "0"},
        {"step": 1, "kind": "alloc", "block_ids": [2], "owner": "1"},
        {"step": 2, "kind": "free", "block_ids": [1, 0], "to_front": [1, 0], "to_tail": [], "owner": "0"},
    ]
    p = viz.pool_player(events)
    assert p.num_frames == 3
    assert p.html.value.count('class="pl-block"') == 4
    p.value = 2
    assert 'data-step="2"' in p.html.value and "1 free" in p.caption.value
    assert viz.pool_player(events, per="event").num_frames == 4


def test_other_players_build():
    assert viz.gantt_player(_stats()).num_frames == 6
    assert viz.queues_player(_stats()).num_frames == 6
    assert viz.kernel_player(viz.kernel_walk_steps([3, 1], 20, 16)).num_frames == 2
    assert viz.mapping_player(viz.mapping_frames([3, 1], 20, 16, 4)).num_frames == 20
    with pytest.raises(ValueError, match="no mapping frames"):
        viz.mapping_player([])
    from pagedlab.core.radix_cache import RadixCache

    rc = RadixCache()
    snaps = [rc.snapshot()]
    rc.insert([1, 2, 3])
    snaps.append(rc.snapshot())
    assert viz.radix_player(snaps).num_frames == 2
    with pytest.raises(ValueError):
        viz.kv_usage_player([])
