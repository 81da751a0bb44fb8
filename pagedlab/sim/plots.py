"""Matplotlib figures of replay results: TTFT/TPOT CDFs and KV usage over time.

Pure functions: ``results`` (a dict name -> ``ReplayResult``) in, a ``matplotlib.figure.Figure``
out. They use ``Figure`` directly (no ``pyplot``), so they work headless, in notebooks and in
the CLI without touching the global backend; ``save_figures`` writes PNGs.
"""

from __future__ import annotations

from pathlib import Path

from pagedlab.sim.metrics import ReplayResult


def _figure(title: str, xlabel: str, ylabel: str):
    from matplotlib.figure import Figure  # lazy: start-up time (matplotlib, only when a figure is drawn)

    fig = Figure(figsize=(6, 4), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    return fig, ax


def cdf_figure(results: dict[str, ReplayResult], metric: str = "ttft", log: bool = True):
    """Empirical CDF of a per-request metric (``"ttft"``, ``"tpot"``, ``"e2e_latency"``, ``"max_itl"``), in seconds."""
    fig, ax = _figure(
        f"{metric.upper() if metric in ('ttft', 'tpot') else metric} CDF", f"{metric} (s)", "fraction of requests"
    )
    for name, res in results.items():
        xs = sorted(v for v in (getattr(r, metric) for r in res.requests) if v is not None)
        if not xs:
            continue
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        ax.step(xs, ys, where="post", label=name)
        if log and xs[0] > 0:
            ax.set_xscale("log")
    ax.set_ylim(0, 1.01)
    if results:
        ax.legend()
    return fig


def kv_usage_figure(results: dict[str, ReplayResult]):
    """KV blocks in use (fraction of the pool) after each step, against time."""
    fig, ax = _figure("KV-cache usage", "time (s)", "KV blocks used / pool")
    for name, res in results.items():
        ts = [s.start_time + s.step_time for s in res.steps]
        ys = [s.kv_blocks_used / max(1, s.kv_blocks_used + s.kv_blocks_free) for s in res.steps]
        ax.plot(ts, ys, label=name, linewidth=1)
    ax.set_ylim(0, 1.05)
    if results:
        ax.legend()
    return fig


def save_figures(results: dict[str, ReplayResult], out_dir) -> list[Path]:
    """Write ``ttft_cdf.png``, ``tpot_cdf.png`` and ``kv_usage.png`` into ``out_dir``; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figs = {
        "ttft_cdf.png": cdf_figure(results, "ttft"),
        "tpot_cdf.png": cdf_figure(results, "tpot"),
        "kv_usage.png": kv_usage_figure(results),
    }
    paths = []
    for name, fig in figs.items():
        fig.savefig(out / name)
        paths.append(out / name)
    return paths
