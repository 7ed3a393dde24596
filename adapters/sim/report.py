"""Rendering simulated results so that no reader can mistake them for measurements.

Every dict carries ``"simulated": True`` and every text line starts with ``[SIMULATED]``.
"""

from __future__ import annotations

from .results import SimResult

__all__ = ["BANNER", "PREFIX", "summary", "summary_lines"]

PREFIX = "[SIMULATED]"
BANNER = f"{PREFIX} ===== SIMULATION: no pod was launched, no GPU ran, no money was spent ====="


def summary(result: SimResult, label: str = "") -> dict[str, object]:
    """The headline numbers of one run as a flat dict (without the per-job outcomes and trace)."""
    return {
        "simulated": True,
        "label": label,
        "seed": result.seed,
        "policy": result.policy,
        "max_pods": result.max_pods,
        "jobs": result.jobs,
        "succeeded": result.succeeded,
        "failed": result.failed,
        "unfinished": result.unfinished,
        "makespan_h": round(result.makespan_s / 3600, 3),
        "lower_bound_h": round(result.lower_bound_s / 3600, 3),
        "makespan_ratio": round(result.makespan_ratio, 4),
        "idle_fraction": round(result.idle_fraction, 4),
        "cost_usd": round(result.cost_usd, 2),
        "cost_per_job_usd": round(result.cost_per_job_usd, 4),
        "pods_launched": result.pods_launched,
        "stockouts": result.stockouts,
        "pod_deaths": result.pod_deaths,
        "job_retries": result.job_retries,
        "bootstrap_failures": result.bootstrap_failures,
        "budget_refusals": result.budget_refusals,
    }


def summary_lines(result: SimResult, label: str = "") -> list[str]:
    """Human-readable lines, each prefixed with ``[SIMULATED]``."""
    head = f"{PREFIX} {label}: " if label else f"{PREFIX} "
    out = [
        f"{head}{result.jobs} jobs on <= {result.max_pods} pods, policy {result.policy}, seed {result.seed}: "
        f"{result.succeeded} succeeded, {result.failed} failed, {result.unfinished} unfinished",
        f"{PREFIX}   makespan {result.makespan_s / 3600:.2f} h = {result.makespan_ratio:.4f} x lower bound "
        f"{result.lower_bound_s / 3600:.2f} h (longest job {result.longest_job_s / 3600:.2f} h, "
        f"work / pods {result.total_work_s / result.max_pods / 3600:.2f} h)",
        f"{PREFIX}   GPU idle fraction {result.idle_fraction:.2%} of {result.billed_pod_s / 3600:.1f} billed pod-h; "
        f"cost ${result.cost_usd:.2f} = ${result.cost_per_job_usd:.4f}/job",
        f"{PREFIX}   pods launched {result.pods_launched}, stock-outs {result.stockouts}, deaths {result.pod_deaths}, "
        f"retries {result.job_retries}, bootstrap failures {result.bootstrap_failures}, "
        f"budget refusals {result.budget_refusals}",
    ]
    for gpu, usage in result.by_gpu.items():
        if usage.pods or usage.stockouts:
            out.append(
                f"{PREFIX}   {gpu}: {usage.pods} pods, {usage.pod_hours:.1f} pod-h, ${usage.cost_usd:.2f}, "
                f"{usage.stockouts} stock-outs"
            )
    return out
