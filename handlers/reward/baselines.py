"""Frozen baselines: each base model's score on each family's hidden eval, measured once and then fixed.

The reward's uplift is ``post - best_pre`` where ``best_pre`` is the best *frozen* base score of the
family: a job's own pre score (noisy, and measured on the job's pod) never enters the reward. ``ait
baselines`` measures the scores (:func:`freeze_baselines`), records each as a ``baseline.frozen`` event
in the baselines run log and writes a versioned file, ``<baselines dir>/<inner>.json`` by default
(:func:`default_baselines_path`: ``$AIT_BASELINES_DIR``, else ``~/.config/ait/baselines/``, beside the
installation key they belong to: the hidden sets, so the scores, are per key, so they are per machine)::

    {"format": 1, "version": 3, "inner": "cpu", "created": "2026-11-30", "key_fingerprint": "",
     "scores": {"calc_chain": {"Qwen/Qwen3-0.6B": {"score": 0.12, "n": 200, "sampling": "T=1, ...",
                                                    "seconds": 3.1, "fingerprint": ""}}}}

``version`` goes up by one every time the file's scores change. ``key_fingerprint`` is reserved for the
eval-integrity installation key: baselines frozen under another key are refused loudly. A run copies the
values it uses into its own log as events (:func:`baseline_events`), so its rewards replay without the file.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import msgspec

from engine.atomic import write_atomic
from events import BaselineFrozen

__all__ = [
    "FORMAT",
    "BaselineEntry",
    "BaselinesError",
    "BaselinesFile",
    "ScoreFn",
    "baseline_events",
    "default_baselines_path",
    "freeze_baselines",
    "frozen_events",
    "given_events",
    "load_baselines",
    "load_baselines_file",
    "merge_events",
    "missing_pairs",
    "scores_of",
    "write_baselines",
]

FORMAT = 1
DIR_ENV = "AIT_BASELINES_DIR"


def default_baselines_path(inner: str) -> Path:
    """Where ``ait baselines --inner INNER`` freezes and ``ait episode`` reads: ``$AIT_BASELINES_DIR/<inner>.json``,
    else ``~/.config/ait/baselines/<inner>.json``."""
    configured = os.environ.get(DIR_ENV)
    base = Path(configured) if configured else Path.home() / ".config" / "ait" / "baselines"
    return base / f"{inner}.json"


class BaselinesError(ValueError):
    """A baselines file that cannot be used; the message names the file and what is wrong."""


class BaselineEntry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    score: float  # mean reward over the hidden eval, in [0, 1]
    n: int  # episodes scored
    sampling: str  # how: temperature, max tokens, turns, n (scores compare only at equal sampling)
    seconds: float = 0.0
    fingerprint: str = ""  # of the hidden eval package scored against (GPU), if any


class BaselinesFile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    format: int = FORMAT
    version: int
    inner: str  # "cpu" (tiny models, in process) | "gpu" (vLLM + vf-eval)
    created: str  # ISO date of the last change
    key_fingerprint: str = ""
    scores: dict[str, dict[str, BaselineEntry]] = {}


ScoreFn = Callable[[str, str], Awaitable[BaselineEntry]]  # (family, model) -> its hidden-eval score


def load_baselines_file(path: Path | str) -> BaselinesFile:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise BaselinesError(f"{p}: cannot read: {exc.strerror}") from None
    try:
        out = msgspec.json.decode(data, type=BaselinesFile)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise BaselinesError(f"{p}: {exc}") from None
    if out.format != FORMAT:
        raise BaselinesError(f"{p}: format {out.format} is not {FORMAT}")
    for family, models in out.scores.items():
        for model, entry in models.items():
            if not 0.0 <= entry.score <= 1.0 or entry.n < 1:
                raise BaselinesError(f"{p}: scores.{family}.{model}: score {entry.score} / n {entry.n} out of range")
    return out


def _load_checked(path: Path | str, key_fingerprint: str | None) -> BaselinesFile:
    f = load_baselines_file(path)
    if key_fingerprint is not None and f.key_fingerprint != key_fingerprint:
        raise BaselinesError(
            f"{path}: frozen under key {f.key_fingerprint or '(none)'!r}, not the current {key_fingerprint!r}: "
            "the hidden eval sets differ, so these baselines are invalid; re-freeze with `ait baselines --force`"
        )
    return f


def load_baselines(path: Path | str, *, key_fingerprint: str | None = None) -> dict[str, dict[str, float]]:
    """``{family: {model: score}}`` from a baselines file; with ``key_fingerprint``, refuse another key's."""
    f = _load_checked(path, key_fingerprint)
    return {family: {m: e.score for m, e in models.items()} for family, models in f.scores.items()}


def frozen_events(path: Path | str, *, key_fingerprint: str) -> list[BaselineFrozen]:
    """The file's scores as the events a run copies into its log: each with the ``n`` it was measured on and the
    key it was frozen under. Refuses a file frozen under another key (:func:`load_baselines`)."""
    return baseline_events(_load_checked(path, key_fingerprint))


def given_events(scores: Mapping[str, Mapping[str, float]]) -> list[BaselineFrozen]:
    """Scores given by hand (a run config's ``[baselines.<family>]``): ``n = 0`` and no key say "not measured"."""
    return [
        BaselineFrozen(family=family, model=model, score=float(score), n=0)
        for family in sorted(scores)
        for model, score in sorted(scores[family].items())
    ]


def scores_of(events: Sequence[BaselineFrozen]) -> dict[str, dict[str, float]]:
    """``{family: {model: score}}``; a later event for the same pair replaces an earlier one."""
    out: dict[str, dict[str, float]] = {}
    for e in events:
        out.setdefault(e.family, {})[e.model] = e.score
    return out


def merge_events(*sources: Sequence[BaselineFrozen]) -> list[BaselineFrozen]:
    """One event per (family, model), later sources taking precedence, in a fixed order."""
    merged: dict[tuple[str, str], BaselineFrozen] = {}
    for source in sources:
        for e in source:
            merged[(e.family, e.model)] = e
    return [merged[k] for k in sorted(merged)]


def baseline_events(f: BaselinesFile) -> list[BaselineFrozen]:
    """The file's scores as events, in a fixed order, for a run to copy into its own log at start."""
    return [
        BaselineFrozen(family=family, model=model, score=e.score, n=e.n, key_fingerprint=f.key_fingerprint)
        for family in sorted(f.scores)
        for model, e in sorted(f.scores[family].items())
    ]


def write_baselines(path: Path | str, f: BaselinesFile) -> None:
    """Write atomically (temp file, fsync, rename): a reader sees the old file or the new one."""
    p = Path(path)
    data = msgspec.json.format(msgspec.json.encode(f), indent=2) + b"\n"
    write_atomic(p, data)


def missing_pairs(
    existing: BaselinesFile | None, families: Sequence[str], models: Sequence[str]
) -> list[tuple[str, str]]:
    have = existing.scores if existing is not None else {}
    return [(f, m) for f in families for m in models if m not in have.get(f, {})]


def _existing(path: Path) -> BaselinesFile | None:
    return load_baselines_file(path) if path.exists() else None


Emit = Callable[[BaselineFrozen], Awaitable[object]]
OnScored = Callable[[str, str, BaselineEntry], None]


async def freeze_baselines(
    score: ScoreFn,
    *,
    families: Sequence[str],
    models: Sequence[str],
    inner: str,
    out_path: Path,
    created: str,
    key_fingerprint: str = "",
    force: bool = False,
    emit: Emit | None = None,
    on_scored: OnScored | None = None,
) -> tuple[BaselinesFile, list[tuple[str, str]]]:
    """Score every (family, model) pair not frozen yet, once; returns the file and the pairs scored now.

    Pairs already in the file are kept (frozen means frozen) unless ``force``. The file is rewritten after
    each pair, so an interrupted freeze resumes where it stopped. A file frozen under another key, or for
    another inner model, is refused unless ``force`` (then it is replaced).
    """
    existing = _existing(out_path)
    if existing is not None and not force:
        if existing.key_fingerprint != key_fingerprint:
            raise BaselinesError(
                f"{out_path}: frozen under key {existing.key_fingerprint or '(none)'!r}, now {key_fingerprint!r}; "
                "the hidden eval sets changed: re-freeze everything with --force"
            )
        if existing.inner != inner:
            raise BaselinesError(f"{out_path}: holds {existing.inner!r} baselines, not {inner!r}")
    base = None if force else existing
    todo = missing_pairs(base, families, models)
    scores = {f: dict(m) for f, m in (base.scores if base is not None else {}).items()}
    # One freeze that changes scores is one new version, however many pairs it adds.
    version = (existing.version if existing is not None else 0) + (1 if todo else 0)
    current = base
    for family, model in todo:
        entry = await score(family, model)
        scores.setdefault(family, {})[model] = entry
        current = BaselinesFile(
            version=version, inner=inner, created=created, key_fingerprint=key_fingerprint, scores=scores
        )
        write_baselines(out_path, current)
        if emit is not None:
            event = BaselineFrozen(
                family=family, model=model, score=entry.score, n=entry.n, key_fingerprint=key_fingerprint
            )
            await emit(event)
        if on_scored is not None:
            on_scored(family, model, entry)
    if current is None:  # nothing to do and no file yet (no families or models asked for)
        current = BaselinesFile(version=version, inner=inner, created=created, key_fingerprint=key_fingerprint)
    return current, todo
