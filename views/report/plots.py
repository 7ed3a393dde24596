"""The report's PNG plots (matplotlib, drawn off-screen with the Agg canvas; no pyplot global state).

Each function draws one figure from :class:`~.data.ReportData` and writes it to a path; every figure has a
title, labelled axes with units, and says "no data" rather than failing when the run has none yet.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from views.report.data import ReportData
from views.report.replica import NO_JOB
from views.watch.render import gpu_label

__all__ = ["EPISODE_PLOTS", "PLOTS", "plots_for", "write_plots"]

_DPI: Final = 110
# Colour-blind-safe (Okabe-Ito).
_BLUE, _GREEN, _ORANGE, _RED, _PURPLE, _SKY, _YELLOW, _GREY = (
    "#0072B2",
    "#009E73",
    "#E69F00",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#F0E442",
    "#999999",
)
_CYCLE: Final = (_BLUE, _ORANGE, _GREEN, _PURPLE, _SKY, _RED, _YELLOW, _GREY)


def _figure(width: float = 9.0, height: float = 5.0, cols: int = 1) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(1, cols, i + 1) for i in range(cols)]
    return fig, axes


def _no_data(ax: Axes, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what} yet", ha="center", va="center", transform=ax.transAxes, color=_GREY, fontsize=12)


def _steps_axis(ax: Axes, steps: Sequence[int]) -> None:
    ax.set_xlabel("outer step")
    ax.set_xticks(list(steps))
    ax.grid(axis="y", alpha=0.3)


def reward_per_step(d: ReportData, path: Path) -> None:
    fig, (ax,) = _figure()
    wv, wq, ws = d.weights
    if not d.steps:
        _no_data(ax, "collected outer steps")
    else:
        x = [s.step for s in d.steps]
        parts = [
            (f"validation ({wv:g} x validation)", [s.validation for s in d.steps], _BLUE),
            (f"job quality ({wq:g} x quality)", [s.quality for s in d.steps], _GREEN),
            (f"train speed ({ws:g} x speed)", [s.speed for s in d.steps], _ORANGE),
            ("no-submission penalty", [s.penalty for s in d.steps], _RED),
        ]
        up = [0.0] * len(x)
        down = [0.0] * len(x)
        for label, values, colour in parts:
            if not any(values):
                continue
            bottoms = [up[i] if v >= 0 else down[i] for i, v in enumerate(values)]
            ax.bar(x, values, bottom=bottoms, color=colour, width=0.6, label=label, alpha=0.9)
            for i, v in enumerate(values):
                if v >= 0:
                    up[i] += v
                else:
                    down[i] += v
        rewards = [s.reward for s in d.steps]
        ax.plot(x, rewards, color="black", marker="o", linewidth=2, label="mean reward")
        for xi, r in zip(x, rewards, strict=True):  # boxed, so a label over a bar stays readable
            ax.annotate(
                f"{r:+.3f}",
                (xi, r),
                textcoords="offset points",
                xytext=(10, 6),
                ha="left",
                fontsize=9,
                bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none", "alpha": 0.85},
            )
        ax.axhline(0.0, color=_GREY, linewidth=0.8)
        _steps_axis(ax, x)
        ax.legend(loc="upper left", fontsize=8)
        ax.margins(y=0.15)
    ax.set_ylabel("mean episode reward (weighted parts stack to it)")
    ax.set_title("Reward per outer step and its decomposition")
    fig.savefig(path, dpi=_DPI)


def rates(d: ReportData, path: Path) -> None:
    fig, (ax,) = _figure()
    if not d.steps:
        _no_data(ax, "collected outer steps")
    else:
        x = [s.step for s in d.steps]
        val = [100.0 * s.validated / s.episodes if s.episodes else 0.0 for s in d.steps]
        ok = [100.0 * s.jobs_succeeded / s.jobs_ended if s.jobs_ended else float("nan") for s in d.steps]
        ax.plot(x, val, marker="o", color=_BLUE, linewidth=2, label="validated episodes (of the step's episodes)")
        ax.plot(x, ok, marker="s", color=_GREEN, linewidth=2, label="inner jobs succeeded (of jobs that ended)")
        for s, v, o in zip(d.steps, val, ok, strict=True):
            # Each count goes on the side away from the other line, so the two never print over each other.
            above = not s.jobs_ended or v >= o
            ax.annotate(
                f"{s.validated}/{s.episodes}",
                (s.step, v),
                textcoords="offset points",
                xytext=(0, 8 if above else -14),
                ha="center",
                fontsize=8,
                color=_BLUE,
            )
            if s.jobs_ended:
                ax.annotate(
                    f"{s.jobs_succeeded}/{s.jobs_ended}",
                    (s.step, o),
                    textcoords="offset points",
                    xytext=(0, -14 if above else 8),
                    ha="center",
                    fontsize=8,
                    color=_GREEN,
                )
        ax.set_ylim(-5, 110)
        _steps_axis(ax, x)
        ax.legend(loc="lower right", fontsize=8)
    ax.set_ylabel("share (%)")
    ax.set_title("Validated rate and inner-job success rate per outer step")
    fig.savefig(path, dpi=_DPI)


def scores(d: ReportData, path: Path) -> None:
    fig, (left, right) = _figure(11.0, 4.8, cols=2)
    models = sorted({r.base_model or "(unknown)" for r in d.scored})
    if not d.scored:
        _no_data(left, "scored jobs")
        _no_data(right, "scored jobs")
    else:
        colours = [_CYCLE[i % len(_CYCLE)] for i in range(len(models))]
        post = [[r.post or 0.0 for r in d.scored if (r.base_model or "(unknown)") == m] for m in models]
        left.hist(post, bins=[i / 20 for i in range(21)], stacked=True, color=colours, label=models, edgecolor="white")
        left.set_xlim(0, 1)
        up = [[r.uplift or 0.0 for r in d.scored if (r.base_model or "(unknown)") == m] for m in models]
        span = max(0.05, max(abs(u) for group in up for u in group))
        edges = [-span + i * (2 * span / 20) for i in range(21)]
        right.hist(up, bins=edges, stacked=True, color=colours, label=models, edgecolor="white")
        right.axvline(0.0, color="black", linewidth=1, linestyle="--", label="best_pre (right: better)")
        left.legend(title="base model", fontsize=8)
        right.legend(fontsize=8)
        for ax in (left, right):
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylim(0, ax.get_ylim()[1] * 1.3)  # headroom for the legend
    left.set_xlabel("post-training score on the hidden eval (fraction correct)")
    left.set_ylabel("scored jobs")
    left.set_title("Post-training score")
    right.set_xlabel("uplift = post − best_pre (score points)")
    right.set_ylabel("scored jobs")
    right.set_title("Uplift over the best untrained model")
    fig.suptitle(f"Post-score and uplift distributions (training jobs scored: {len(d.scored)})")
    fig.savefig(path, dpi=_DPI)


def model_share(d: ReportData, path: Path) -> None:
    fig, (ax,) = _figure()
    steps = [s for s in d.steps if s.jobs]
    if not steps:
        _no_data(ax, "jobs")
    else:
        models = sorted({m for s in steps for m in s.models})
        x = [s.step for s in steps]
        bottom = [0.0] * len(x)
        for i, m in enumerate(models):
            share = [100.0 * s.models.get(m, 0) / s.jobs for s in steps]
            ax.bar(x, share, bottom=bottom, color=_CYCLE[i % len(_CYCLE)], width=0.6, label=m)
            bottom = [b + v for b, v in zip(bottom, share, strict=True)]
        for s in steps:
            ax.annotate(
                f"n={s.jobs}", (s.step, 100), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8
            )
        ax.set_ylim(0, 112)
        _steps_axis(ax, x)
        ax.legend(title="base model", loc="lower right", fontsize=8)
    ax.set_ylabel("share of the step's jobs (%)")
    ax.set_title("Model selection: which base model the agent chose to train")
    fig.savefig(path, dpi=_DPI)


def adoption(d: ReportData, path: Path) -> None:
    fig, (left, right) = _figure(11.0, 4.8, cols=2)
    steps = [s for s in d.steps if s.configs_read]
    if not steps:
        _no_data(left, "readable job configs")
        _no_data(right, "readable job configs")
    else:
        x = [s.step for s in steps]
        share = [100.0 * s.adopters / s.configs_read for s in steps]
        left.plot(x, share, marker="o", color=_PURPLE, linewidth=2)
        for s, v in zip(steps, share, strict=True):
            left.annotate(
                f"{s.adopters}/{s.configs_read}",
                (s.step, v),
                textcoords="offset points",
                xytext=(0, 8),
                ha="center",
                fontsize=8,
            )
        left.set_ylim(-5, 110)
        _steps_axis(left, x)
        totals: dict[str, int] = {}
        for s in steps:
            for k, n in s.keys.items():
                totals[k] = totals.get(k, 0) + n
        if totals:
            keys = sorted(totals, key=lambda k: (totals[k], k))
            right.barh(keys, [totals[k] for k in keys], color=_SKY)
            right.set_xlabel("jobs that changed the key (all steps)")
        else:
            _no_data(right, "adopted keys")
    left.set_ylabel("jobs changing ≥1 optional [prime_rl] key (%)")
    left.set_title("Adoption per outer step")
    right.set_title("Key mix")
    right.set_ylabel("[prime_rl] key")
    fig.suptitle("[prime_rl] key adoption (a key set to a non-default value)")
    fig.savefig(path, dpi=_DPI)


def costs(d: ReportData, path: Path) -> None:
    fig, (left, right) = _figure(11.0, 4.8, cols=2)
    if not d.steps:
        _no_data(left, "collected outer steps")
    else:
        x = [s.step for s in d.steps]
        bottom = [0.0] * len(x)
        for label, values, colour in (
            ("agent tokens", [s.agent_usd for s in d.steps], _BLUE),
            ("GPU time of the step's jobs", [s.gpu_usd for s in d.steps], _ORANGE),
            ("optimizer step (training)", [s.training_usd for s in d.steps], _GREEN),
        ):
            left.bar(x, values, bottom=bottom, color=colour, width=0.6, label=label)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        for xi, total in zip(x, bottom, strict=True):
            left.annotate(
                f"${total:.2f}", (xi, total), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8
            )
        _steps_axis(left, x)
        left.legend(fontsize=8, loc="upper left")
        left.margins(y=0.15)
    left.set_ylabel("USD per outer step")
    left.set_title("Cost per outer step")
    ran = [j for j in d.jobs if j.gpu_seconds > 0]
    if not ran:
        _no_data(right, "jobs on pods")
    else:
        gpus = sorted({j.gpus[-1] if j.gpus else "(unknown)" for j in ran})
        groups = [[j.gpu_usd for j in ran if (j.gpus[-1] if j.gpus else "(unknown)") == g] for g in gpus]
        right.hist(
            groups,
            bins=12,
            stacked=True,
            color=[_CYCLE[i % len(_CYCLE)] for i in range(len(gpus))],
            label=[gpu_label(g) for g in gpus],
            edgecolor="white",
        )
        mean = sum(j.gpu_usd for j in ran) / len(ran)
        right.axvline(mean, color="black", linestyle="--", linewidth=1, label=f"mean ${mean:.3f}")
        right.legend(title="GPU (last attempt)", fontsize=8)
        right.yaxis.set_major_locator(MaxNLocator(integer=True))
        right.set_ylim(0, right.get_ylim()[1] * 1.3)
    right.set_xlabel("GPU cost of one job (USD, all attempts)")
    right.set_ylabel("jobs")
    right.set_title(f"Cost per job (n={len(ran)})")
    fig.suptitle("Costs")
    fig.savefig(path, dpi=_DPI)


def job_curves(d: ReportData, path: Path) -> None:
    """Each episode job's training curve (mean reward per step) with its pre- and post-score."""
    fig, (ax,) = _figure()
    drawn = 0
    for i, ep in enumerate(d.episodes):
        curve = ep.curve
        if curve is None or not curve.points:
            continue
        colour = _CYCLE[i % len(_CYCLE)]
        xs = [p.step for p in curve.points if p.reward is not None]
        ys = [p.reward for p in curve.points if p.reward is not None]
        ax.plot(xs, ys, marker="o", color=colour, label=f"{ep.job_id}: train mean reward")
        n = f" (n={curve.eval_n})" if curve.eval_n else ""
        if curve.pre is not None:
            ax.axhline(curve.pre, color=colour, linestyle=":", label=f"{ep.job_id}: pre {curve.pre:.3f}{n}")
        if curve.post is not None:
            ax.axhline(curve.post, color=colour, linestyle="--", label=f"{ep.job_id}: post {curve.post:.3f}{n}")
        if curve.total_steps:
            ax.set_xlim(0.5, max(curve.total_steps, max(xs, default=1)) + 0.5)
        drawn += 1
    ax.set_xlabel("inner training step")
    ax.set_ylabel("reward (fraction correct)")
    ax.set_ylim(0, 1)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle("Inner job: training reward per step; pre- and post-score on the hidden eval")
    fig.savefig(path, dpi=_DPI)


def choice_share(d: ReportData, path: Path) -> None:
    """The CPU replica: each step's share of each choice (stacked), and the share of the grid's best choices."""
    fig, (ax,) = _figure()
    r = d.replica
    steps = [s for s in r.steps if s.episodes] if r is not None else []
    if r is None or not steps:
        _no_data(ax, "replica choices")
    else:
        x = [s.step for s in steps]
        bottom = [0.0] * len(x)
        made = [c for c in [*r.labels, NO_JOB] if any(s.counts.get(c) for s in steps)]
        best_set = set(r.grid.best) if r.grid is not None else set()
        for label in made:
            share = [100.0 * s.counts.get(label, 0) / s.episodes for s in steps]
            # One colour and hatch per choice whatever the run made (the choice module's order; past the 8
            # colours the hatch tells two choices apart), grey for no job.
            color, hatch = "#DDDDDD", None
            if label != NO_JOB:
                index = r.labels.index(label)
                color, hatch = _CYCLE[index % len(_CYCLE)], ("//" if (index // len(_CYCLE)) % 2 else None)
            # The grid's best choices are starred in the legend rather than listed in the line's label: a list
            # of six choices made the legend wider than the axes it explains.
            shown = f"{label} *" if label in best_set else label
            ax.bar(x, share, bottom=bottom, color=color, hatch=hatch, edgecolor="white", width=0.6, label=shown)
            bottom = [b + v for b, v in zip(bottom, share, strict=True)]
        if r.grid is not None:
            best = [100.0 * s.best / s.episodes for s in steps]
            ax.plot(x, best, color="black", marker="o", lw=2, label="share of the grid's best (*)")
        ax.set_ylim(0, 112)
        _steps_axis(ax, x)
        ax.legend(title="choice", loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, fontsize=8)
    ax.set_ylabel("share of the step's episodes (%)")
    ax.set_title("Replica: the agent's choice (base model / rubric / learning rate) per outer step")
    fig.savefig(path, dpi=_DPI, bbox_inches="tight")


PLOTS: Final[dict[str, Callable[[ReportData, Path], None]]] = {
    "reward_per_step.png": reward_per_step,
    "rates.png": rates,
    "scores.png": scores,
    "model_share.png": model_share,
    "prime_rl_adoption.png": adoption,
    "costs.png": costs,
}
# A run of single episodes (``ait episode``: episodes, no outer steps) draws its jobs' curves instead of the
# per-step plots above, which would be blank axes or one lonely point.
EPISODE_PLOTS: Final[dict[str, Callable[[ReportData, Path], None]]] = {"job_curves.png": job_curves}
# A CPU replica run (views/report/replica.py) adds its choices.
REPLICA_PLOTS: Final[dict[str, Callable[[ReportData, Path], None]]] = {"choice_share.png": choice_share}


def plots_for(d: ReportData) -> list[str]:
    """The plots worth drawing for this run, by name."""
    if d.steps or not d.episodes:
        return list(PLOTS) + (list(REPLICA_PLOTS) if d.replica is not None else [])
    return [name for name in EPISODE_PLOTS if any(ep.curve is not None and ep.curve.points for ep in d.episodes)]


def write_plots(d: ReportData, out: Path, on_done: Callable[[str], None] = lambda name: None) -> list[Path]:
    """Draw the plots of :func:`plots_for` into ``out``; returns their paths in order."""
    paths = []
    for name in plots_for(d):
        (PLOTS | EPISODE_PLOTS | REPLICA_PLOTS)[name](d, out / name)
        paths.append(out / name)
        on_done(name)
    return paths
