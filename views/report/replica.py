"""The CPU replica's part of ``ait report`` (issue 19, docs/replica.md): what the trainer agent chose, step by
step, next to what the grid measured best; whether reward rose; the held-out arm before and after.

- *Choice of a job*: :func:`handlers.episode.choice.choice_of` on the job.toml in its bundle (what really ran),
  shown by its label (``1.7B/correct/1e-05``). A run none of whose jobs is a replica choice has no replica section.
- *Share of a choice in a step*: the step's episodes whose job made that choice, over all the step's episodes
  (an episode that queued no job counts under "no job": the agent must submit to choose anything).
- *The grid's best choices*: ``best`` of the grid JSON ``benchmarks/replica_grid.py`` writes (the top choice and
  every choice whose 95% interval reaches the top one's lower bound), default ``examples/replica/grid.json``.
  The grid was measured on the hidden tasks of one eval key (``eval_key_fingerprint``); a run whose baselines
  were frozen under another key was scored on other tasks, and the report says so next to the grid.
- *First vs last steps*: the rewards of the episodes of the first ``k`` and of the last ``k`` outer steps
  (``k = min(5, steps // 2)``); the interval of the difference of the means is a percentile bootstrap
  resampling each side's episodes.
- *Holdout arm*: the held-out episodes (views.watch.view.is_holdout) of each family, before (the lowest sampler
  version, 0 = the base model) and after (the highest): n, mean reward and its bootstrap 95% interval, and the
  difference's.

Bootstraps are seeded (:data:`BOOTSTRAP_SEED`): the same log gives the same report.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

from handlers.episode.choice import all_choices, choice_of
from handlers.episode.job_config import JobConfigError, parse_job_config

__all__ = [
    "BOOTSTRAP_SEED",
    "DEFAULT_GRID",
    "Arm",
    "ChoiceStep",
    "Grid",
    "GridError",
    "Interval",
    "ReplicaData",
    "bootstrap_did",
    "bootstrap_diff",
    "bootstrap_mean",
    "key_mismatch",
    "label_of_toml",
    "load_grid",
    "replica_data",
]

DEFAULT_GRID = Path(__file__).resolve().parents[2] / "examples" / "replica" / "grid.json"
BOOTSTRAP_SEED = 0
_RESAMPLES = 2000
NO_JOB = "no job"


class Interval(msgspec.Struct, frozen=True, kw_only=True):
    """A mean (or a difference of means) with its percentile-bootstrap 95% interval; ``n`` values behind it."""

    n: int
    mean: float
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _percentiles(values: list[float]) -> tuple[float, float]:
    values.sort()
    last = len(values) - 1
    return values[round(0.025 * last)], values[round(0.975 * last)]


def bootstrap_mean(xs: Sequence[float], *, seed: int = BOOTSTRAP_SEED) -> Interval:
    """The mean of ``xs`` (at least one value) and its 95% bootstrap interval."""
    rng = random.Random(seed)
    n = len(xs)
    means = [_mean([xs[rng.randrange(n)] for _ in range(n)]) for _ in range(_RESAMPLES)]
    low, high = _percentiles(means)
    return Interval(n=n, mean=_mean(xs), low=low, high=high)


def bootstrap_diff(before: Sequence[float], after: Sequence[float], *, seed: int = BOOTSTRAP_SEED) -> Interval:
    """``mean(after) - mean(before)`` and its 95% interval, each side resampled on its own; n = both sides."""
    rng = random.Random(seed)
    a, b = len(before), len(after)
    diffs = [
        _mean([after[rng.randrange(b)] for _ in range(b)]) - _mean([before[rng.randrange(a)] for _ in range(a)])
        for _ in range(_RESAMPLES)
    ]
    low, high = _percentiles(diffs)
    return Interval(n=a + b, mean=_mean(after) - _mean(before), low=low, high=high)


def bootstrap_did(
    base_before: Sequence[float],
    base_after: Sequence[float],
    before: Sequence[float],
    after: Sequence[float],
    *,
    seed: int = BOOTSTRAP_SEED,
) -> Interval:
    """The difference in differences ``(mean(after) - mean(before)) - (mean(base_after) - mean(base_before))``
    (a learning arm's rise beyond a control's) and its 95% interval, each of the four sides resampled on its own."""
    rng = random.Random(seed)
    sides = (base_before, base_after, before, after)

    def resampled(xs: Sequence[float]) -> float:
        return _mean([xs[rng.randrange(len(xs))] for _ in range(len(xs))])

    def did(m: Sequence[float]) -> float:
        return (m[3] - m[2]) - (m[1] - m[0])

    diffs = [did([resampled(xs) for xs in sides]) for _ in range(_RESAMPLES)]
    low, high = _percentiles(diffs)
    return Interval(n=sum(map(len, sides)), mean=did([_mean(xs) for xs in sides]), low=low, high=high)


class GridError(ValueError):
    """A grid file that cannot be read or does not fit; the message names the file and the field."""


class Grid(msgspec.Struct, frozen=True, kw_only=True):
    source: str  # the file it was read from
    best: list[str]  # labels of the best choices, the top one first
    means: dict[str, float]  # label -> the grid's mean reward
    key_fingerprint: str = ""  # the eval key whose hidden tasks it was measured on ("": not recorded)


def load_grid(path: Path) -> Grid:
    """The grid JSON of ``benchmarks/replica_grid.py``; :class:`GridError` naming the file and field if it does
    not fit."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GridError(f"{path}: cannot read the grid: {exc}") from None
    best = doc.get("best") if isinstance(doc, dict) else None
    if not isinstance(best, list) or not all(isinstance(b, str) for b in best):
        raise GridError(f"{path}: field 'best' must be a list of choice labels")
    known = {c.label for c in all_choices()}
    unknown = [b for b in best if b not in known]
    if unknown:
        raise GridError(f"{path}: field 'best' names {unknown}, not replica choices ({', '.join(sorted(known))})")
    key = doc.get("eval_key_fingerprint", "")
    if not isinstance(key, str):
        raise GridError(f"{path}: field 'eval_key_fingerprint' must be a string (the eval key's fingerprint)")
    means: dict[str, float] = {}
    for label, row in (doc.get("choices") or {}).items():
        if isinstance(row, dict) and isinstance(row.get("mean"), int | float):
            means[str(label)] = float(row["mean"])
    return Grid(source=str(path), best=best, means=means, key_fingerprint=key)


def key_mismatch(grid: Grid | None, run_keys: Sequence[str]) -> str:
    """Why the grid may not rate this run's choices: it was measured under another eval key than the one the
    run's baselines were frozen under (so on other hidden tasks). "" when the keys agree, or when either side
    does not record its key (baselines given in a config, a grid of before the field)."""
    known = [k for k in run_keys if k]
    if grid is None or not grid.key_fingerprint or not known or grid.key_fingerprint in known:
        return ""
    return (
        f"the grid was measured under eval key {grid.key_fingerprint}, this run under {', '.join(known)}: other "
        "hidden tasks, so the grid's best choices may not be this run's (run benchmarks/replica_grid.py with "
        "this run's AIT_EVAL_KEY_FILE to compare)"
    )


def label_of_toml(text: str) -> str | None:
    """The replica choice label of a job.toml, or None when it is not one (another template's job)."""
    try:
        return choice_of(parse_job_config(text)).label
    except (JobConfigError, ValueError):
        return None


class ChoiceStep(msgspec.Struct, frozen=True, kw_only=True):
    step: int
    episodes: int
    counts: dict[str, int]  # label (or "no job") -> episodes
    best: int  # episodes whose job made one of the grid's best choices


class Arm(msgspec.Struct, frozen=True, kw_only=True):
    family: str
    before_version: int
    after_version: int
    before: Interval
    after: Interval | None  # None: one arm only
    diff: Interval | None


class ReplicaData(msgspec.Struct, frozen=True, kw_only=True):
    labels: list[str]  # every replica choice, in the choice module's order
    grid: Grid | None
    grid_note: str  # why there is no grid ("" when there is one)
    steps: list[ChoiceStep]
    k: int  # steps on each side of the first-vs-last comparison (0: too few steps)
    first: Interval | None
    last: Interval | None
    rise: Interval | None  # last - first
    holdout: list[Arm]
    first_rewards: list[float] = []  # the episode rewards behind ``first`` and ``last`` (pooled over runs by
    last_rewards: list[float] = []  # benchmarks/replica_compare.py)
    grid_mismatch: str = ""  # :func:`key_mismatch`: why the grid may not apply to this run ("" when it does)


def replica_data(
    step_episodes: Sequence[tuple[int, Sequence[str]]],
    rewards: Mapping[str, float],
    labels: Mapping[str, str | None],
    holdout: Sequence[tuple[str, str, int]],
    *,
    grid: Grid | None,
    grid_note: str = "",
    run_keys: Sequence[str] = (),
) -> ReplicaData | None:
    """From plain data: each outer step's episode ids, each episode's reward, each episode's job label (missing:
    no job; None: a job.toml that is not a replica choice) and the holdout episodes ``(id, family, version)``;
    ``run_keys``: the fingerprints of the eval keys the run's baselines were frozen under. None when no job is a
    replica choice."""
    if not any(v is not None for v in labels.values()):
        return None
    best = set(grid.best) if grid is not None else set()
    steps = []
    for step, ids in step_episodes:
        ids = [e for e in ids if e in rewards]
        counts: dict[str, int] = {}
        for e in ids:
            key = labels.get(e) or NO_JOB
            counts[key] = counts.get(key, 0) + 1
        steps.append(
            ChoiceStep(step=step, episodes=len(ids), counts=counts, best=sum(1 for e in ids if labels.get(e) in best))
        )
    k = min(5, len(step_episodes) // 2)
    first = last = rise = None
    head: list[float] = []
    tail: list[float] = []
    if k:
        head = [rewards[e] for _, ids in step_episodes[:k] for e in ids if e in rewards]
        tail = [rewards[e] for _, ids in step_episodes[-k:] for e in ids if e in rewards]
        if head and tail:
            first, last, rise = bootstrap_mean(head), bootstrap_mean(tail), bootstrap_diff(head, tail)
    arms = []
    for family in sorted({f for _, f, _ in holdout}):
        by_version: dict[int, list[float]] = {}
        for e, f, v in holdout:
            if f == family and e in rewards:
                by_version.setdefault(v, []).append(rewards[e])
        if not by_version:
            continue
        lo, hi = min(by_version), max(by_version)
        arms.append(
            Arm(
                family=family,
                before_version=lo,
                after_version=hi,
                before=bootstrap_mean(by_version[lo]),
                after=bootstrap_mean(by_version[hi]) if hi != lo else None,
                diff=bootstrap_diff(by_version[lo], by_version[hi]) if hi != lo else None,
            )
        )
    return ReplicaData(
        labels=[c.label for c in all_choices()],
        grid=grid,
        grid_note=grid_note,
        steps=steps,
        k=k,
        first=first,
        last=last,
        rise=rise,
        holdout=arms,
        first_rewards=head if k else [],
        last_rewards=tail if k else [],
        grid_mismatch=key_mismatch(grid, run_keys),
    )
