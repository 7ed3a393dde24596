"""A discrete-event simulation of a GPU provider and pod fleet, for planning at scale. SIMULATED.

Nothing in this package launches a pod or spends money; every result, trace event and dict it
produces carries ``simulated=True`` and every rendered line starts with ``[SIMULATED]``.

- :mod:`.durations`: the reusable heavy-tailed job-duration model and workload generator
- :mod:`.catalog`: simulated GPU types (price, speed, stock process) and the seed's ladder
- :mod:`.policy`: the dispatcher's pure decisions (LPT/FIFO, pod choice, how many pods to request)
- :mod:`.fleet`: the event-driven fleet simulation (:func:`simulate`)
- :mod:`.results`: what a run reports (trace, outcomes, usage, headline numbers)
- :mod:`.metrics`: the makespan lower bound
- :mod:`.report`: labelled rendering
- :mod:`.provider`: :class:`SimProvider`, the simulated market behind the real provider port
"""

from __future__ import annotations

from .catalog import DEFAULT_LADDER, SimGpu, StockProcess
from .durations import DurationModel, SimJob, batched_arrivals, make_jobs
from .fleet import FleetConfig, simulate
from .metrics import lower_bound_s
from .policy import Policy
from .provider import SimProvider
from .report import BANNER, PREFIX, summary, summary_lines
from .results import GpuUsage, JobOutcome, SimEvent, SimResult

__all__ = [
    "BANNER",
    "DEFAULT_LADDER",
    "PREFIX",
    "DurationModel",
    "FleetConfig",
    "GpuUsage",
    "JobOutcome",
    "Policy",
    "SimEvent",
    "SimGpu",
    "SimJob",
    "SimProvider",
    "SimResult",
    "StockProcess",
    "batched_arrivals",
    "lower_bound_s",
    "make_jobs",
    "simulate",
    "summary",
    "summary_lines",
]
