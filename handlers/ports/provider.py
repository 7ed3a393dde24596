"""The compute-provider port: what the fleet needs from anything that rents GPU pods.

A provider creates, reads, lists and terminates pods. Everything provider-specific (HTTP, a local
subprocess, a simulation) lives behind :class:`Provider`; the dispatcher only sees :class:`PodSpec`,
:class:`PodInfo` and the :class:`ProvisionError` hierarchy, whose ``kind`` matches the ``kind`` field
of the ``pod.provision_failed`` event.

Pod names carry the run: ``ait-<run_id>-<pod_id>``. The name doubles as the idempotency key of a
create (a provider returns the existing pod when one already has that name), and it is how a resumed
run finds pods it started but no longer tracks (:func:`find_orphans`).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection
from typing import Any, ClassVar, Protocol, runtime_checkable

import msgspec

__all__ = [
    "InvalidPodRequest",
    "PodInfo",
    "PodSpec",
    "PodState",
    "Provider",
    "ProviderAuthError",
    "ProviderUnavailable",
    "ProvisionError",
    "QuotaExceeded",
    "StockOut",
    "find_orphans",
    "parse_pod_name",
    "pod_name",
    "run_prefix",
]

NAME_PREFIX = "ait-"
# A run id may contain '-' (dates, slugs); a pod id may not, so the *last* '-' always splits a name
# into run and pod unambiguously, and run "r1" never claims the pods of run "r1-x".
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_POD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_]*$")


class PodState(enum.Enum):
    """A provider-neutral pod lifecycle state (each provider maps its own statuses onto these)."""

    PENDING = "pending"  # allocated or booting; not yet running its container
    RUNNING = "running"  # container up (not necessarily *ready*: readiness is the pod agent's health check)
    STOPPED = "stopped"  # container exited / pod stopped; may still bill for storage
    FAILED = "failed"  # unrecoverable error, or the machine was lost
    GONE = "gone"  # terminated; no longer billed
    UNKNOWN = "unknown"  # the provider reported a status this code does not know


class PodSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What to launch. Provider-neutral; a provider ignores fields it has no use for."""

    gpu_type: str  # the provider's GPU type id, e.g. "NVIDIA A40"
    image: str
    gpu_count: int = 1
    agent_port: int = 8000  # the pod agent's HTTP port (exposed through the provider's proxy)
    env: dict[str, str] = {}
    args: str = ""  # container start command/arguments
    disk_gb: int = 50
    volume_gb: int = 0  # 0: no persistent volume (throw-away workers are terminated, never stopped)
    cloud: str = "SECURE"
    allowed_cuda_versions: tuple[str, ...] = ()
    data_center_ids: tuple[str, ...] = ()

    # env carries the pod agent's bearer token: every rendering shows its keys, never its values.
    # (msgspec gives Structs a __rich_repr__, which Rich tracebacks with locals would use instead.)
    def __rich_repr__(self) -> list[tuple[str, Any]]:
        return [
            ("gpu_type", self.gpu_type),
            ("gpu_count", self.gpu_count),
            ("image", self.image),
            ("agent_port", self.agent_port),
            ("env", {k: "***" for k in sorted(self.env)}),
            ("cloud", self.cloud),
        ]

    def __repr__(self) -> str:
        return f"PodSpec({', '.join(f'{k}={v!r}' for k, v in self.__rich_repr__())})"

    __str__ = __repr__


class PodInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What a provider knows about one pod."""

    provider_id: str  # the provider's own id
    name: str
    state: PodState
    gpu_type: str = ""
    gpu_count: int = 0
    usd_per_hour: float = 0.0  # the billed rate, for cost accounting
    url: str = ""  # base URL of the pod agent, once known
    raw_status: str = ""  # the provider's own status word, for logs and debugging
    created_at: str = ""


class ProvisionError(Exception):
    """A provider refused or failed a request. ``kind`` names the class of failure for events."""

    kind: ClassVar[str] = "error"
    #: whether retrying the *same* request later may succeed (the dispatcher decides when)
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class StockOut(ProvisionError):
    """No capacity for this GPU type right now: walk the ladder to the next rung."""

    kind = "stock_out"
    retryable = True

    def __init__(self, message: str, *, gpu_type: str = "", status: int | None = None) -> None:
        super().__init__(message, status=status)
        self.gpu_type = gpu_type


class QuotaExceeded(ProvisionError):
    """Spend limit reached or balance too low: no candidate will succeed, stop launching."""

    kind = "quota"


class ProviderAuthError(ProvisionError):
    """The credentials are missing, wrong, or lack access: fatal until a person fixes them."""

    kind = "auth"


class ProviderUnavailable(ProvisionError):
    """Transient trouble (rate limit, 5xx, network) that outlasted the retry policy."""

    kind = "unavailable"
    retryable = True

    def __init__(self, message: str, *, status: int | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(message, status=status)
        self.retry_after_s = retry_after_s


class InvalidPodRequest(ProvisionError):
    """The provider rejected the request itself (a bug or a bad config): never retry it unchanged."""

    kind = "invalid"


@runtime_checkable
class Provider(Protocol):
    """The port every compute provider implements (local subprocesses, Runpod, the simulation)."""

    @property
    def name(self) -> str:
        """The provider's short name as recorded in events ("local", "runpod", "sim")."""
        ...

    async def create_pod(self, spec: PodSpec, idempotency_name: str) -> PodInfo:
        """Launch a pod named ``idempotency_name``, or return the live pod that already has that name.

        Raises a :class:`ProvisionError` subclass on failure.
        """
        ...

    async def get_pod(self, provider_id: str) -> PodInfo | None:
        """The pod's current info, or None when the provider does not know it (any more)."""
        ...

    async def list_pods(self, prefix: str) -> list[PodInfo]:
        """Every pod of this account whose name starts with ``prefix``."""
        ...

    async def terminate_pod(self, provider_id: str) -> None:
        """Terminate the pod and stop its billing. Terminating an unknown or gone pod is not an error."""
        ...


def run_prefix(run_id: str) -> str:
    """The name prefix shared by every pod of one run."""
    if not _RUN_ID.match(run_id):
        raise ValueError(f"run_id {run_id!r}: use letters, digits, '_', '.', '-' (starting with a letter or digit)")
    return f"{NAME_PREFIX}{run_id}-"


def pod_name(run_id: str, pod_id: str) -> str:
    """The provider-side name of a pod: ``ait-<run_id>-<pod_id>``."""
    if not _POD_ID.match(pod_id):
        raise ValueError(f"pod_id {pod_id!r}: use letters, digits and '_' only (no '-')")
    return f"{run_prefix(run_id)}{pod_id}"


def parse_pod_name(name: str) -> tuple[str, str] | None:
    """``(run_id, pod_id)`` of a name made by :func:`pod_name`, or None for any other name."""
    if not name.startswith(NAME_PREFIX):
        return None
    run_id, sep, pod_id = name[len(NAME_PREFIX) :].rpartition("-")
    if not sep or not _RUN_ID.match(run_id) or not _POD_ID.match(pod_id):
        return None
    return run_id, pod_id


async def find_orphans(provider: Provider, run_id: str, keep: Collection[str] = ()) -> list[PodInfo]:
    """Pods of this run that are still alive at the provider but not in ``keep`` (provider ids).

    ``keep`` is what the fleet projection still tracks as live. The name is parsed exactly, so the
    pods of a run whose id merely starts with ``run_id`` are never touched.
    """
    pods = await provider.list_pods(run_prefix(run_id))
    return [
        p
        for p in pods
        if p.provider_id not in keep
        and p.state is not PodState.GONE
        and (parsed := parse_pod_name(p.name)) is not None
        and parsed[0] == run_id
    ]
