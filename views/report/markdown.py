"""The report's Markdown text and its CSV companions (steps.csv, jobs.csv), from :class:`~.data.ReportData`.

Numbers are formatted with :mod:`engine.fmt` like every other view of a run. In jobs.csv a missing post score
is the sentinel -1.0 (:func:`handlers.reward.formula.post_for_csv`), never a reward.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from engine.fmt import format_count, format_duration, format_hours, format_pct, format_score, format_ts, format_usd
from handlers.reward.formula import explain, post_for_csv
from views.report.data import EpisodeDetail, ReportData, StepStats
from views.report.replica_md import holdout_arm_lines, replica_lines
from views.watch.render import gpu_label

__all__ = ["jobs_csv", "markdown", "steps_csv"]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> list[str]:
    """A GitHub Markdown table; ``align`` has one letter per column (l or r, default r after the first)."""
    marks = [
        ("---:" if (align[i] if i < len(align) else ("l" if i == 0 else "r")) == "r" else "---")
        for i in range(len(header))
    ]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(marks) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _frac(part: int, whole: int) -> str:
    return f"{part}/{whole} ({format_pct(part, whole)})" if whole else "-"


def _overview(d: ReportData) -> list[str]:
    span = "-"
    if d.first_ts is not None and d.last_ts is not None:
        span = f"{format_ts(d.first_ts)[:19]} → {format_ts(d.last_ts)[:19]} ({format_duration(d.last_ts - d.first_ts)})"
    eps = sum(d.episodes_by_status.values())
    statuses = ", ".join(f"{k} {v}" for k, v in d.episodes_by_status.items())
    ended = [j for j in d.jobs if j.status in ("succeeded", "failed")]
    ok = sum(1 for j in ended if j.status == "succeeded")
    held_jobs = sum(1 for j in d.jobs if j.holdout)
    kinds = ", ".join(f"{k} {format_usd(v, places=2)}" for k, v in d.spend_by_kind.items())
    trend = f"{d.steps[0].reward:+.3f} → {d.steps[-1].reward:+.3f}" if d.steps else "-"
    unknown = "(not recorded)"
    rows = [
        ["inner trainer", (d.inner_trainer or unknown) + (" (STAND-IN: made-up scores)" if d.standin else "")],
        [
            "learner backend",
            (d.learner_backend or unknown)
            + (" (learns nothing)" if d.learner_backend == "offline" else "")
            + (" (`learn = false`: the no-learning control, no update applied)" if d.control else ""),
        ],
        ["provider", d.provider or unknown],
        ["status", d.status],
        ["events", format_count(d.events)],
        ["span (UTC)", span],
        ["seed", str(d.seed)],
        ["episodes finished", (f"{eps} ({statuses})" if eps else "0") + _of_them_holdout(d) + _unfinished(d)],
        ["capped episodes", f"{d.capped} (ended by the run or global budget cap; left out of the batches)"],
        ["outer steps collected", str(len(d.steps))],
        [
            "inner jobs",
            f"{len(d.jobs)} queued; {ok} succeeded, {len(ended) - ok} failed; {d.requeues} requeued"
            + (f"; {held_jobs} of them holdout" if held_jobs else ""),
        ],
        ["spend", f"{format_usd(d.spend_usd, places=2)} ({kinds})" if kinds else format_usd(d.spend_usd, places=2)],
        ["mean reward, first → last step", trend],
    ]
    if d.unsafe_sandbox:
        rows.insert(1, ["sandbox", f"**UNSAFE: agent code ran without bubblewrap**, {d.unsafe_sandbox}"])
    return _table(["", ""], rows, "ll")


def _unfinished(d: ReportData) -> str:
    """Episodes the log started and never finished: still in flight, or open when the run stopped (a finished
    `ait train` leaves its in-flight episodes to a later `ait resume`)."""
    return f"; {d.unfinished} more started, not finished when the log ends" if d.unfinished else ""


def _of_them_holdout(d: ReportData) -> str:
    """The holdout arms' share of the run's totals: their episodes belong to no outer step."""
    n = sum(h.episodes for h in d.holdout)
    return f"; {n} of them holdout (in no outer step)" if n else ""


def _reward_rows(steps: Sequence[StepStats]) -> list[list[str]]:
    return [
        [
            str(s.step),
            str(s.episodes),
            format_score(s.reward, signed=True),
            format_score(s.validation),
            format_score(s.quality, signed=True),
            format_score(s.speed),
            format_score(s.penalty, signed=True),
            _frac(s.validated, s.episodes),
            _frac(s.jobs_succeeded, s.jobs_ended),
        ]
        for s in steps
    ]


def _scores(d: ReportData) -> list[str]:
    models = sorted({r.base_model or "(unknown)" for r in d.scored})
    rows = []
    for m in models:
        rs = [r for r in d.scored if (r.base_model or "(unknown)") == m]
        posts = [r.post or 0.0 for r in rs]
        ups = [r.uplift or 0.0 for r in rs]
        rows.append(
            [
                m,
                str(len(rs)),
                format_score(sum(posts) / len(posts)),
                format_score(sum(ups) / len(ups), signed=True),
                _frac(sum(1 for u in ups if u > 0), len(ups)),
            ]
        )
    if not rows:
        return ["No training job was scored yet."]
    return _table(["base model", "scored jobs", "mean post", "mean uplift", "uplift > 0"], rows)


def _models(d: ReportData) -> list[str]:
    models = sorted({m for s in d.steps for m in s.models})
    if not models:
        return ["No job was queued yet."]
    rows = [[str(s.step), str(s.jobs), *(_frac(s.models.get(m, 0), s.jobs) for m in models)] for s in d.steps]
    return _table(["step", "jobs", *models], rows)


def _adoption(d: ReportData) -> list[str]:
    rows = [
        [
            str(s.step),
            str(s.configs_read),
            _frac(s.adopters, s.configs_read),
            ", ".join(f"{k} {n}" for k, n in s.keys.items()) or "-",
        ]
        for s in d.steps
    ]
    return _table(["step", "job configs read", "changed ≥1 key", "keys changed (jobs)"], rows, "lrrl")


def _costs(d: ReportData) -> list[str]:
    out = _table(
        ["step", "agent tokens", "GPU (its jobs)", "training", "total"],
        [
            [
                str(s.step),
                format_usd(s.agent_usd, places=3),
                format_usd(s.gpu_usd, places=3),
                format_usd(s.training_usd, places=3),
                format_usd(s.total_usd, places=3),
            ]
            for s in d.steps
        ],
    )
    out += ["", "Settled spend by kind (the whole run, holdout and idle pods included):", ""]
    out += _table(
        ["kind", "USD"],
        [[k, format_usd(v, places=3)] for k, v in d.spend_by_kind.items()]
        + [["total", format_usd(d.spend_usd, places=3)]],
    )
    out += ["", "Pod time by GPU type (busy: a job held the pod; idle: ready with no job):", ""]
    out += _table(
        ["GPU", "busy h", "idle h", "utilisation", "charged"],
        [
            [
                gpu_label(g),
                format_hours(busy),
                format_hours(idle),
                format_pct(busy, busy + idle),
                format_usd(usd, places=2),
            ]
            for g, (busy, idle, usd) in d.gpu_hours.items()
        ],
    )
    ran = sorted((j for j in d.jobs if j.gpu_seconds > 0), key=lambda j: (-j.gpu_usd, j.job_id))
    if ran:
        mean = sum(j.gpu_usd for j in ran) / len(ran)
        out += [
            "",
            f"Per job (GPU time of all its attempts): {len(ran)} jobs, mean {format_usd(mean, places=3)}, "
            f"max {format_usd(ran[0].gpu_usd, places=3)}. The most expensive (all jobs in jobs.csv):",
            "",
        ]
        out += _table(
            ["job", "family", "model", "GPU", "attempts", "GPU time", "USD", "status"],
            [
                [
                    j.job_id,
                    j.family,
                    j.model,
                    ", ".join(gpu_label(g) for g in j.gpus),
                    str(j.attempts),
                    format_duration(j.gpu_seconds),
                    format_usd(j.gpu_usd, places=3),
                    j.status + (f" ({j.reason})" if j.reason and j.status == "failed" else ""),
                ]
                for j in ran[:5]
            ],
            "lllllrrl",
        )
    return out


def _holdout(d: ReportData) -> list[str]:
    if not d.holdout:
        return ["No holdout arm in this run."]
    rows = [
        [
            "base model" if h.outer_steps == 0 else f"`{h.checkpoint}`",
            "-" if h.outer_steps is None else str(h.outer_steps),
            format_score(h.reward, signed=True),
            f"{h.validated}/{h.episodes}",
            f"{h.jobs_succeeded}/{h.jobs}",
            format_score(h.worst, signed=True),
        ]
        for h in d.holdout
    ]
    return _table(
        ["checkpoint", "outer steps", "mean reward", "validated", "inner jobs succeeded", "worst episode"],
        rows,
        "lrrrrr",
    )


def _errors(d: ReportData) -> list[str]:
    out = []
    if d.failed_checks:
        out += ["Validation checks that rejected a submission:", ""]
        out += _table(["check", "rejections"], [[k, str(v)] for k, v in d.failed_checks.items()])
        out.append("")
    if d.job_failures:
        out += ["Inner jobs that failed, by classified reason:", ""]
        out += _table(["reason", "jobs"], [[k, str(v)] for k, v in d.job_failures.items()])
        out.append("")
    out.append(f"Pods lost: {d.pods_lost}; job attempts requeued: {d.requeues}.")
    return out


def _episode(ep: EpisodeDetail) -> list[str]:
    """One episode of a run without outer steps: its reward, term by term, and its job's scores and curve."""
    lines = [f"### {ep.episode_id}", ""]
    rc = ep.reward
    if rc is None:
        lines += ["Not rewarded (yet): the episode or its job has not ended.", ""]
    else:
        lines += [
            *_table(
                ["term", "value", "weight", "weighted"],
                [
                    [
                        "validation",
                        format_score(rc.validation),
                        f"{rc.w_validation:g}",
                        format_score(rc.w_validation * rc.validation),
                    ],
                    [
                        "quality",
                        format_score(rc.quality, signed=True),
                        f"{rc.w_quality:g}",
                        format_score(rc.w_quality * rc.quality, signed=True),
                    ],
                    ["speed", format_score(rc.speed), f"{rc.w_speed:g}", format_score(rc.w_speed * rc.speed)],
                    ["**reward**", "", "", f"**{format_score(rc.reward, signed=True)}**"],
                ],
                "lrrr",
            ),
            "",
            explain(rc),
            "",
        ]
    curve = ep.curve
    if ep.job_id and curve is not None:
        n = f"{curve.eval_n} hidden tasks" if curve.eval_n else "hidden tasks (n not recorded)"
        best = f"; best_pre {format_score(rc.best_pre)}" if rc is not None and rc.best_pre is not None else ""
        uplift = f"; uplift {format_score(rc.uplift, signed=True)}" if rc is not None and rc.uplift is not None else ""
        lines += [
            f"Job {ep.job_id}: pre {format_score(curve.pre)}, post {format_score(curve.post)}{best}{uplift}, "
            f"each on {n}.",
            "",
        ]
        if curve.stopped:
            lines += [f"**Training was cut short: {curve.stopped}.**", ""]
        if curve.points:
            of = f" of {curve.total_steps}" if curve.total_steps else ""
            lines += [
                f"Training curve ({len(curve.points)} step(s){of}):",
                "",
                *_table(
                    ["step", "mean reward", "loss"],
                    [
                        [str(p.step), format_score(p.reward), "-" if p.loss is None else f"{p.loss:.4f}"]
                        for p in curve.points
                    ],
                    "rrr",
                ),
                "",
            ]
    elif ep.job_id:
        lines += [f"Job {ep.job_id} has not started.", ""]
    return lines


def _episodes_markdown(d: ReportData, plots: Sequence[str]) -> str:
    """The report of a run of single episodes (``ait episode``): no outer steps, so no per-step plots."""
    lines = [f"# Run report: {d.run_id}", "", *_overview(d), ""]
    lines += ["## Episodes", ""]
    if "job_curves.png" in plots:
        lines += ["![inner job training curves](job_curves.png)", ""]
    for ep in d.episodes:
        lines += _episode(ep)
    costs = _costs(d)
    # No outer steps, so the per-step table above "Settled spend" would be a header alone: start after it.
    lines += [
        "## Costs",
        "",
        *costs[costs.index("Settled spend by kind (the whole run, holdout and idle pods included):") :],
        "",
    ]
    lines += _job_trees(d)
    lines += ["## Errors", "", *_errors(d), ""]
    return "\n".join(lines)


def _job_trees(d: ReportData) -> list[str]:
    if not d.job_trees:
        return []
    intro = "Each episode's jobs (a job under the one it revised) and what changed."
    return ["## Multi-job episodes", "", intro, "", *d.job_trees]


def markdown(d: ReportData, plots: Sequence[str]) -> str:
    """The report; ``plots`` are the PNG file names written beside it."""
    if d.episodes and not d.steps:
        return _episodes_markdown(d, plots)
    wv, wq, ws = d.weights

    def img(name: str, alt: str) -> list[str]:
        return [f"![{alt}]({name})", ""] if name in plots else []

    lines = [f"# Run report: {d.run_id}", "", *_overview(d), ""]
    lines += ["## Reward per outer step", "", *img("reward_per_step.png", "reward per outer step")]
    lines += [
        f"Reward = {wv:g}·validation + {wq:g}·quality + {ws:g}·speed; an episode with no parseable submission "
        "scores the penalty instead. The validation, quality, speed and penalty columns are the weighted parts "
        "averaged over the step's episodes (they add up to the mean reward). An episode's step is the batch that "
        "collected it; holdout episodes are reported separately.",
        "",
        *_table(
            [
                "step",
                "episodes",
                "mean reward",
                "validation",
                "quality",
                "speed",
                "penalty",
                "validated",
                "jobs succeeded",
            ],
            _reward_rows(d.steps),
        ),
        "",
    ]
    lines += ["## Validated rate and inner-job success", "", *img("rates.png", "validated and job success rates")]
    lines += ["Validated: episodes whose submission passed the probe. Job success: of the jobs that ended.", ""]
    lines += ["## Post-score and uplift", "", *img("scores.png", "post-score and uplift distributions")]
    lines += ["Training episodes whose job was scored; uplift = post − best_pre (frozen best untrained model).", ""]
    lines += [*_scores(d), ""]
    lines += ["## Model selection", "", *img("model_share.png", "model selection share"), *_models(d), ""]
    if d.replica is not None:
        lines += ["## Replica: the agent's choices", "", *img("choice_share.png", "choice share per step")]
        lines += replica_lines(d.replica)
    lines += ["## [prime_rl] key adoption", "", *img("prime_rl_adoption.png", "prime_rl key adoption")]
    lines += [
        "A job adopts a key when its job.toml (read from the job bundle) sets an optional `[prime_rl]` key to a "
        "value other than its default; writing the default, as the template does, does not count.",
        "",
    ]
    if d.replica is not None:
        # The replica's INSTRUCTIONS.md dictates every [prime_rl] line but the model and learning rate (short
        # max_tokens and seq_len so a CPU job fits an outer step): every job "adopts" those two keys, which says
        # nothing about the agent.
        lines += [
            "A CPU replica run: its template dictates the `[prime_rl]` lines (`max_tokens` and `seq_len` off their "
            "defaults, so a job fits on a CPU), so every job counts as adopting them; the agent's choices are the "
            "base model, the learning rate and the rubric package above.",
            "",
        ]
    lines += [
        *_adoption(d),
        "",
    ]
    lines += ["## Costs", "", *img("costs.png", "costs per step and per job")]
    lines += [
        "A step's cost is its episodes' agent calls, the GPU time its jobs held pods (at each pod's hourly rate) "
        "and its optimizer step. Pod time no job used (boot, idle) is in the totals below but in no step.",
        "",
        *_costs(d),
        "",
    ]
    families = ", ".join(sorted({f for h in d.holdout for f in h.families})) or "the held-out family"
    lines += ["## Holdout", "", f"Episodes on {families} (never trained on), by the sampler version they ran.", ""]
    lines += [*_holdout(d), ""]
    if d.replica is not None:
        lines += holdout_arm_lines(d.replica)
    lines += _job_trees(d)
    lines += ["## Errors", "", *_errors(d), ""]
    return "\n".join(lines)


def steps_csv(d: ReportData) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(
        [
            "step",
            "episodes",
            "reward",
            "validation",
            "quality",
            "speed",
            "penalty",
            "validated",
            "jobs",
            "jobs_ended",
            "jobs_succeeded",
            "configs_read",
            "adopters",
            "agent_usd",
            "gpu_usd",
            "training_usd",
        ]
    )
    for s in d.steps:
        w.writerow(
            [
                s.step,
                s.episodes,
                f"{s.reward:.6f}",
                f"{s.validation:.6f}",
                f"{s.quality:.6f}",
                f"{s.speed:.6f}",
                f"{s.penalty:.6f}",
                s.validated,
                s.jobs,
                s.jobs_ended,
                s.jobs_succeeded,
                s.configs_read,
                s.adopters,
                f"{s.agent_usd:.6f}",
                f"{s.gpu_usd:.6f}",
                f"{s.training_usd:.6f}",
            ]
        )
    return out.getvalue()


def jobs_csv(d: ReportData) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(
        [
            "job_id",
            "episode_id",
            "step",
            "holdout",
            "family",
            "model",
            "status",
            "reason",
            "attempts",
            "post",
            "uplift",
            "gpus",
            "gpu_seconds",
            "gpu_usd",
            "adopted_keys",
        ]
    )
    for j in d.jobs:
        w.writerow(
            [
                j.job_id,
                j.episode_id,
                j.step,
                int(j.holdout),
                j.family,
                j.model,
                j.status,
                j.reason,
                j.attempts,
                post_for_csv(j.post),
                "" if j.uplift is None else f"{j.uplift:.6f}",
                ";".join(j.gpus),
                f"{j.gpu_seconds:.3f}",
                f"{j.gpu_usd:.6f}",
                "" if j.adopted is None else ";".join(j.adopted),
            ]
        )
    return out.getvalue()
