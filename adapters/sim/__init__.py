"""A discrete-event simulation of a GPU provider and pod fleet, for planning at scale. SIMULATED.

Nothing in this package launches a pod or spends money; every result, trace event and dict it
produces carries ``simulated=True`` and every rendered line starts with ``[SIMULATED]``.

- :mod:`.durations`: the reusable heavy-tailed job-duration model and workload generator
- :mod:`.catalog`: simulated GPU types (price, speed, stock process) and the seed's ladder
- :mod:`.fleet`: :func:`simulate` runs the REAL dispatcher (handlers/fleet) on virtual time against
  :mod:`.provider` and :mod:`.agent`; there is no second scheduler model
- :mod:`.vclock`: the virtual-time event loop
- :mod:`.agent`: simulated pod agents (a job takes its work / the pod's speed)
- :mod:`.results`: what a run reports (trace, outcomes, usage, headline numbers)
- :mod:`.metrics`: the makespan lower bound
- :mod:`.report`: labelled rendering
- :mod:`.provider`: :class:`SimProvider`, the simulated market behind the real provider port
"""

from __future__ import annotations

from .agent import SimPodAgents
from .catalog import DEFAULT_LADDER, SimGpu, StockProcess
from .durations import DurationModel, SimJob, batched_arrivals, make_jobs
from .fleet import SIM_FLEET, SimConfig, simulate
from .metrics import lower_bound_s
from .provider import SimProvider
from .report import BANNER, PREFIX, summary, summary_lines
from .results import GpuUsage, JobOutcome, SimEvent, SimResult

__all__ = [
    "BANNER",
    "DEFAULT_LADDER",
    "PREFIX",
    "SIM_FLEET",
    "DurationModel",
    "GpuUsage",
    "JobOutcome",
    "SimConfig",
    "SimEvent",
    "SimGpu",
    "SimJob",
    "SimPodAgents",
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
