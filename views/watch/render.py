"""Draw a :class:`~.view.DashboardView` with rich: panels for the outer loop, episodes, rewards, budget, fleet,
queue and recent errors. Numbers go through :mod:`engine.fmt`, like ``ait tail``, ``ait costs`` and the report."""

from __future__ import annotations

from typing import Final

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from engine.fmt import (
    format_bar,
    format_count,
    format_duration,
    format_pct,
    format_score,
    format_ts,
    format_usd,
    sparkline,
)
from views.watch.view import DashboardView, StepRow

__all__ = ["WIDE", "gpu_label", "render", "step_of"]

# Every string that comes from the log is wrapped in Text(...): rich would read "[prime_rl]" in a check's detail
# as markup and drop it.

_STATE_STYLE = {"running": "yellow", "open": "dim", "collected": "cyan", "trained": "green"}


def gpu_label(gpu: str) -> str:
    """``NVIDIA GeForce RTX 4090`` -> ``RTX 4090``: the vendor words carry no information on a dashboard."""
    return gpu.removeprefix("NVIDIA ").removeprefix("GeForce ")


def _header(v: DashboardView) -> RenderableType:
    status_style = "green" if v.status == "finished:ok" else "yellow" if v.status == "running" else "red"
    t = Text()
    t.append(v.run_id or "(no run.started yet)", style="bold")
    t.append("  ")
    t.append(v.status, style=status_style)
    t.append(f"  ·  {format_count(v.events)} events")
    if v.first_ts is not None and v.last_ts is not None:
        t.append(f"  ·  {format_ts(v.first_ts)[:19]} → {format_ts(v.last_ts)[:19]} UTC")
        t.append(f" ({format_duration(v.last_ts - v.first_ts)})")
    if v.age_s is not None:
        t.append(f"  ·  last event {format_duration(v.age_s)} ago", style="dim")
    if v.unsafe_sandbox:
        t.append(f"\nUNSAFE: agent code without bubblewrap ({v.unsafe_sandbox})", style="bold red")
    return t


def step_of(step: int, total: int, sep: str = " of ") -> str:
    """ "3 of 10"; never "3 of 2": a run resumed with a larger --max-steps went past the plan it started with."""
    if not total:
        return str(step)
    if step > total:
        return f"{step} (past the {total} planned at start)"
    return f"{step}{sep}{total}"


def _outer(v: DashboardView) -> RenderableType:
    lines: list[RenderableType] = []
    of = step_of(v.step, v.planned_steps)[len(str(v.step)) :]
    sampler = f"v{v.sampler_version}" if v.sampler_version >= 0 else "-"
    lines.append(Text(f"step {v.step}{of}  ·  sampler {sampler}  ·  LoRA steps {v.lora_steps}"))
    b = v.batch
    if b is not None:
        frac = b.rewarded / b.expected if b.expected else 0.0
        line = Text(f"batch {b.step}  ")
        line.append(format_bar(frac, 16), style=_STATE_STYLE.get(b.state, ""))
        line.append(f"  {b.rewarded}/{b.expected} rewarded ({b.started} started)  ")
        line.append(b.state, style=_STATE_STYLE.get(b.state, ""))
        lines.append(line)
    else:
        lines.append(Text("no batch yet", style="dim"))
    if v.stale_discarded:
        lines.append(Text(f"stale episodes discarded: {v.stale_discarded}", style="yellow"))
    return Panel(Group(*lines), title="outer loop", title_align="left")


def _episodes(v: DashboardView) -> RenderableType:
    e = v.episodes
    t = Table.grid(padding=(0, 2))
    t.add_column()
    t.add_column(justify="right")
    t.add_column()
    t.add_column(justify="right")
    # Episodes a finished run left unfinished are not running: they wait for a later `ait resume` (or never end).
    now = "open" if v.status.startswith("finished:") else "running"
    t.add_row("started", str(e.started), now, Text(str(e.running), style="yellow" if e.running else ""))
    t.add_row("validated", Text(str(e.validated), style="green"), "rejected", Text(str(e.rejected), style="red"))
    t.add_row("no submission", str(e.no_submission), "budget refused", str(e.budget_refused))
    t.add_row("error", str(e.error), "holdout", f"{e.holdout} ({e.holdout_running} {now})")
    return Panel(t, title="episodes", title_align="left")


def _reward_cells(r: StepRow) -> list[str]:
    return [
        format_score(r.reward, signed=True),
        format_score(r.validation),
        format_score(r.quality, signed=True),
        format_score(r.speed),
        format_score(r.penalty, signed=True) if r.penalty else "-",
    ]


def _rewards(v: DashboardView) -> RenderableType:
    t = Table(box=None, padding=(0, 1), header_style="bold")
    t.add_column("step", justify="right")
    t.add_column("eps", justify="right")
    for name in ("reward", "valid.", "qual.", "speed", "pen."):
        t.add_column(name, justify="right")
    t.add_column("state")
    for r in v.steps:
        t.add_row(
            str(r.step),
            f"{r.rewarded}/{r.expected}",
            *_reward_cells(r),
            Text(r.state, style=_STATE_STYLE.get(r.state, "")),
        )
    parts: list[RenderableType] = [t]
    if v.reward_trend:
        trend = Text("trend ")
        trend.append(sparkline(v.reward_trend), style="cyan")
        trend.append(f"  {v.reward_trend[0]:+.3f} → {v.reward_trend[-1]:+.3f}")
        parts.append(trend)
    parts.append(Text("valid. + qual. + speed + pen. = reward (weighted means)", style="dim"))
    return Panel(Group(*parts), title="reward per outer step", title_align="left")


def _budget(v: DashboardView) -> RenderableType:
    t = Table(box=None, padding=(0, 1), header_style="bold")
    t.add_column("budget", no_wrap=True)
    t.add_column("burn", no_wrap=True)
    t.add_column("spent", justify="right")
    t.add_column("cap", justify="right")
    t.add_column("used", justify="right")
    t.add_column("held", justify="right")
    for b in v.budget:
        # The bar shows what is committed (spent + held by open reservations): what the next reservation faces.
        frac = (b.spent_usd + b.reserved_usd) / b.cap_usd if b.cap_usd else 0.0
        style = "red" if frac > 0.9 else "yellow" if frac > 0.7 else "green"
        t.add_row(
            b.name,
            Text(format_bar(frac, 10) if b.cap_usd else "no cap", style=style),
            format_usd(b.spent_usd, places=2),
            format_usd(b.cap_usd, places=2) if b.cap_usd is not None else "-",
            format_pct(b.spent_usd, b.cap_usd or 0.0),
            format_usd(b.reserved_usd, places=2),
        )
    kinds = "  ".join(f"{k} {format_usd(u, places=2)}" for k, u in v.spend_by_kind.items())
    parts: list[RenderableType] = [t, Text(f"spent by kind: {kinds or '-'}")]
    if v.refusals:
        parts.append(Text(f"refused reservations: {v.refusals}", style="red"))
    return Panel(Group(*parts), title="budget", title_align="left")


def _fleet(v: DashboardView) -> RenderableType:
    t = Table(box=None, padding=(0, 1), header_style="bold")
    t.add_column("GPU", no_wrap=True)
    for name in ("boot", "ready", "busy", "lost", "ended"):  # pods in each state now
        t.add_column(name, justify="right")
    t.add_column("idle t", justify="right")  # pod time idle / busy so far, and busy / (idle + busy)
    t.add_column("busy t", justify="right")
    t.add_column("util", justify="right")
    t.add_column("$/h", justify="right")  # what the live pods cost per hour together
    t.add_column("charged", justify="right")
    for f in v.fleet:
        t.add_row(
            Text(gpu_label(f.gpu)),
            str(f.booting),
            str(f.available),
            str(f.busy),
            Text(str(f.lost), style="red" if f.lost else ""),
            str(f.ended),
            format_duration(f.idle_s),
            format_duration(f.busy_s),
            format_pct(f.busy_s, f.busy_s + f.idle_s),
            format_usd(f.usd_per_hour, places=2),
            format_usd(f.charged_usd, places=2),
        )
    parts: list[RenderableType] = [t] if v.fleet else [Text("no pods yet", style="dim")]
    if v.stockouts:
        parts.append(Text("out of stock: " + ", ".join(gpu_label(g) for g in v.stockouts), style="yellow"))
    if v.provision_failures:
        fails = ", ".join(f"{kind} x{n}" for kind, n in v.provision_failures.items())
        parts.append(Text(f"provision failures: {fails}", style="yellow"))
    if v.gpu_refusals:
        parts.append(Text(f"budget refused GPU time {v.gpu_refusals}x: {v.last_gpu_refusal}", style="red"))
    return Panel(Group(*parts), title="fleet (pods by GPU type and state)", title_align="left")


def _queue(v: DashboardView) -> RenderableType:
    order = ("queued", "requeued", "assigned", "running", "succeeded", "failed")
    counts = "  ".join(f"{k} {v.jobs.get(k, 0)}" for k in order)
    parts: list[RenderableType] = [Text(f"jobs: {counts}")]
    if v.active_jobs:
        t = Table(box=None, padding=(0, 1), header_style="bold")
        for name in ("job", "family", "model", "pod", "phase", "step", "elapsed", "reward"):
            t.add_column(name, justify="right" if name in ("step", "elapsed", "reward") else "left")
        for j in v.active_jobs:
            step = step_of(j.step, j.total_steps, "/") if j.step <= j.total_steps else str(j.step)
            t.add_row(
                *(Text(x) for x in (j.job_id, j.family, j.model, j.pod, j.phase)),
                step,
                format_duration(j.elapsed_s),
                format_score(j.reward),
            )
        parts.append(t)
    return Panel(Group(*parts), title="job queue", title_align="left")


def _errors(v: DashboardView) -> RenderableType:
    counts = "  ".join(f"{k} {n}" for k, n in v.error_counts.items())
    parts: list[RenderableType] = [Text(f"totals: {counts}" if counts else "no errors", style="dim")]
    if v.errors:
        t = Table(box=None, padding=(0, 1), header_style="bold", expand=True)
        t.add_column("seq", justify="right", no_wrap=True)
        t.add_column("time (UTC)", no_wrap=True)
        t.add_column("what", no_wrap=True)
        t.add_column("where", no_wrap=True)
        t.add_column("detail", overflow="ellipsis", no_wrap=True, ratio=1)  # takes what the others leave
        for e in reversed(v.errors):  # newest first
            t.add_row(str(e.seq), format_ts(e.ts)[11:19], Text(e.kind, style="red"), Text(e.subject), Text(e.message))
        parts.append(t)
    return Panel(Group(*parts), title="recent errors (newest first)", title_align="left")


WIDE: Final = 140  # from this many columns on, the small panels go side by side


def render(v: DashboardView, width: int = WIDE) -> RenderableType:
    """The whole dashboard as one renderable (for ``Live.update`` or ``Console.print``) at ``width`` columns."""
    if width < WIDE:
        return Group(_header(v), _outer(v), _episodes(v), _rewards(v), _budget(v), _fleet(v), _queue(v), _errors(v))
    top = Table.grid(expand=True, padding=(0, 1))
    top.add_column(ratio=1)
    top.add_column(ratio=1)
    top.add_row(_outer(v), _episodes(v))
    top.add_row(_rewards(v), _budget(v))
    return Group(_header(v), top, _fleet(v), _queue(v), _errors(v))
