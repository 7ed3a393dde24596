"""The validation probe: the ``Validator`` port (``handlers.ports.validator``) with a sandboxed child.

``ProbeValidator().validate(workspace, spec, attempt) -> ProbeReport`` runs the agent's env package only in
a sandboxed child process (bubblewrap; see :mod:`adapters.sandbox`), one per submission, and reports every
check with what to fix. By default the child is a confined fork of a zygote that imported verifiers once
(``_warm``, ``zygote``: the *warm* path); where that cannot be set up, a bubblewrap sandbox and interpreter of
its own (the *cold* path). ``ProbeReport.isolation`` says exactly which isolation and which path applied.
Without bubblewrap it refuses (``WeakIsolation``) unless constructed with ``unsafe_no_sandbox=True``.

Modules: ``_validator`` (the checks, in order), ``_warm`` and ``zygote`` (the warm path: the zygote and its
confined forks), ``_sandbox`` (the cold child, its directory, its bubblewrap command and channel; the
confinement itself is :mod:`adapters.sandbox`), ``_limits`` (rlimits and stage timeouts), ``sandbox_driver``
(the trusted code that runs inside the sandbox, on both paths), ``_static`` (source scan), ``_tasks``
(task checks and the hidden-eval comparison), ``_tools`` (tool interface comparison), ``_rubric`` (gold vs
wrong policies), ``_prime_map`` (the minimal prime-rl config mapping).
"""

from __future__ import annotations

from adapters.sandbox import IsolationPlan, WeakIsolation, detect_isolation

from ._contamination import near_duplicates
from ._limits import ProbeLimits
from ._prime_map import config_problems, prime_rl_config
from ._static import FORBIDDEN_PACKAGES, scan_env
from ._tasks import hidden_matches, hidden_shingles
from ._validator import CHECK_NAMES, VERIFIERS_VERSION, ProbeValidator, describe_isolation

__all__ = [
    "CHECK_NAMES",
    "FORBIDDEN_PACKAGES",
    "VERIFIERS_VERSION",
    "IsolationPlan",
    "ProbeLimits",
    "ProbeValidator",
    "WeakIsolation",
    "config_problems",
    "describe_isolation",
    "detect_isolation",
    "hidden_matches",
    "hidden_shingles",
    "near_duplicates",
    "prime_rl_config",
    "scan_env",
]
