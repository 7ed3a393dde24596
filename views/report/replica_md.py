"""The Markdown of the CPU replica's report sections (:mod:`.replica` has the numbers and their definitions)."""

from __future__ import annotations

from collections.abc import Sequence

from engine.fmt import format_pct, format_score
from views.report.replica import NO_JOB, Interval, ReplicaData

__all__ = ["choice_share_csv", "holdout_arm_lines", "replica_lines"]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    marks = ["---" if i == 0 else "---:" for i in range(len(header))]
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(marks) + " |",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _interval(i: Interval) -> str:
    return (
        f"{format_score(i.mean, signed=True)} [{format_score(i.low, signed=True)}, {format_score(i.high, signed=True)}]"
    )


def _share(part: int, whole: int) -> str:
    return f"{part} ({format_pct(part, whole)})" if whole else "-"


def replica_lines(r: ReplicaData) -> list[str]:
    """The section "Replica: the agent's choices" (without its title)."""
    used = [label for label in r.labels if any(s.counts.get(label) for s in r.steps)]
    columns = used + ([NO_JOB] if any(s.counts.get(NO_JOB) for s in r.steps) else [])
    if r.grid is not None:
        best = ", ".join(f"`{b}`" + (f" ({r.grid.means[b]:+.3f})" if b in r.grid.means else "") for b in r.grid.best)
        intro = f"The grid's best choices (mean reward of each in `{r.grid.source}`): {best}."
        if r.grid_mismatch:
            intro += f" **Careful:** {r.grid_mismatch}."
    else:
        intro = f"No grid to compare with: {r.grid_note}."
    lines = [
        "Each episode's choice is read from the job.toml its job ran (base model / rubric package / learning "
        "rate); a share is of the step's episodes, and an episode that queued no job counts under "
        f'"{NO_JOB}". Choices no episode made are left out.',
        "",
        intro,
        "",
    ]
    rows = [
        [
            str(s.step),
            str(s.episodes),
            _share(s.best, s.episodes) if r.grid is not None else "-",
            *(_share(s.counts.get(c, 0), s.episodes) for c in columns),
        ]
        for s in r.steps
    ]
    lines += _table(["step", "episodes", "grid's best", *columns], rows)
    lines.append("")
    if r.rise is not None and r.first is not None and r.last is not None:
        verdict = "excludes zero" if r.rise.excludes_zero else "does not exclude zero"
        lines += [
            f"Mean reward of the first {r.k} and the last {r.k} outer steps (episodes as the unit; 95% percentile "
            "bootstrap intervals):",
            "",
            *_table(
                ["steps", "episodes", "mean reward [95% CI]"],
                [
                    [f"first {r.k}", str(r.first.n), _interval(r.first)],
                    [f"last {r.k}", str(r.last.n), _interval(r.last)],
                    ["last − first", "", _interval(r.rise)],
                ],
            ),
            "",
            f"The interval of the rise {verdict}.",
            "",
        ]
    return lines


def holdout_arm_lines(r: ReplicaData) -> list[str]:
    """The held-out arms before (lowest sampler version) and after (highest), with n and intervals."""
    if not r.holdout:
        return []
    rows = []
    for a in r.holdout:
        rows.append([f"{a.family} before", f"v{a.before_version}", str(a.before.n), _interval(a.before)])
        if a.after is not None and a.diff is not None:
            rows.append([f"{a.family} after", f"v{a.after_version}", str(a.after.n), _interval(a.after)])
            rows.append([f"{a.family} after − before", "", "", _interval(a.diff)])
    return [
        "Before and after (mean reward [95% percentile-bootstrap interval], n episodes):",
        "",
        *_table(["arm", "sampler", "n", "mean reward [95% CI]"], rows),
        "",
    ]


def choice_share_csv(r: ReplicaData) -> str:
    """choices.csv: one row per step and choice (episodes, share of the step's episodes, grid best or not)."""
    best = set(r.grid.best) if r.grid is not None else set()
    out = ["step,choice,episodes,share,grid_best"]
    for s in r.steps:
        for label in [*r.labels, NO_JOB]:
            n = s.counts.get(label, 0)
            share = n / s.episodes if s.episodes else 0.0
            out.append(f"{s.step},{label},{n},{share:.6f},{int(label in best)}")
    return "\n".join(out) + "\n"
