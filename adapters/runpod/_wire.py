"""Runpod REST v2 wire shapes and their mapping to the provider port's data.

The request body is built here and checked locally first, so that a spec the API would reject with a
422 fails before any request with a message naming the field. Response structs decode only the fields
the fleet uses and ignore the rest, so additive API changes do not break decoding.
"""

from __future__ import annotations

import re

import msgspec

from handlers.ports.provider import InvalidPodRequest, PodInfo, PodSpec, PodState

__all__ = [
    "PROXY_URL",
    "CreatePodBody",
    "JsonBody",
    "WirePod",
    "WirePodList",
    "build_create_body",
    "pod_info",
    "status_to_state",
]

#: the Runpod HTTPS proxy in front of an ``<port>/http`` port (100 s per-request limit, see the notes)
PROXY_URL = "https://{pod_id}-{port}.proxy.runpod.net"

_CLOUDS = ("SECURE", "COMMUNITY")
_CUDA = re.compile(r"^[0-9]+\.[0-9]+$")
_MIN_VOLUME_GB = 10  # PersistentMount.size minimum in the spec ("upstream enforces a 10 GB floor")
_VOLUME_PATH = "/workspace"

_STATES: dict[str, PodState] = {
    "PROVISIONING": PodState.PENDING,
    "STARTING": PodState.PENDING,
    "RUNNING": PodState.RUNNING,
    "EXITED": PodState.STOPPED,
    "ERROR": PodState.FAILED,
    "TERMINATED": PodState.GONE,
}


# ---- request ---------------------------------------------------------------------------------------


class JsonBody:
    """Encoded request JSON with an opaque repr: the body carries pod env values (the pod agent's
    token), and tracebacks rendered with locals must not print it."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __repr__(self) -> str:
        return f"JsonBody(<{len(self.data)} bytes>)"


class _CreateGpu(msgspec.Struct, rename="camel", omit_defaults=True):
    id: str
    count: int
    allowed_cuda_versions: list[str] = []


class _PersistentMount(msgspec.Struct):
    size: int
    path: str


class _Mounts(msgspec.Struct):
    persistent: _PersistentMount


class CreatePodBody(msgspec.Struct, rename="camel", omit_defaults=True):
    """``CreatePodRequest``: a GPU pod from an image (no template), one HTTP port for the pod agent."""

    name: str
    image: str
    gpu: _CreateGpu
    cloud: str
    disk: int
    ports: list[str]
    env: dict[str, str] = {}
    args: str = ""
    data_center_ids: list[str] = []
    mounts: _Mounts | None = None


def _check(spec: PodSpec, name: str) -> None:
    def bad(field: str, why: str) -> InvalidPodRequest:
        return InvalidPodRequest(f"PodSpec.{field}: {why} (Runpod createPod would reject it)")

    if not name:
        raise bad("name", "must not be empty")
    if not spec.image:
        raise bad("image", "must not be empty")
    if not spec.gpu_type:
        raise bad("gpu_type", "must not be empty")
    if spec.gpu_count < 1:
        raise bad("gpu_count", f"must be >= 1, got {spec.gpu_count}")
    if spec.disk_gb < 1:
        raise bad("disk_gb", f"must be >= 1, got {spec.disk_gb}")
    if spec.volume_gb != 0 and spec.volume_gb < _MIN_VOLUME_GB:
        raise bad("volume_gb", f"must be 0 (none) or >= {_MIN_VOLUME_GB}, got {spec.volume_gb}")
    if spec.cloud not in _CLOUDS:
        raise bad("cloud", f"must be one of {', '.join(_CLOUDS)}, got {spec.cloud!r}")
    if not 1 <= spec.agent_port <= 65535:
        raise bad("agent_port", f"must be a TCP port, got {spec.agent_port}")
    for version in spec.allowed_cuda_versions:
        if not _CUDA.match(version):
            raise bad("allowed_cuda_versions", f"{version!r} is not major.minor")


def build_create_body(spec: PodSpec, name: str) -> JsonBody:
    """The JSON body of ``POST /v2/pods`` for ``spec`` under ``name``; raises InvalidPodRequest first."""
    _check(spec, name)
    body = CreatePodBody(
        name=name,
        image=spec.image,
        gpu=_CreateGpu(id=spec.gpu_type, count=spec.gpu_count, allowed_cuda_versions=list(spec.allowed_cuda_versions)),
        cloud=spec.cloud,
        disk=spec.disk_gb,
        ports=[f"{spec.agent_port}/http"],
        env=dict(spec.env),
        args=spec.args,
        data_center_ids=list(spec.data_center_ids),
        mounts=_Mounts(_PersistentMount(spec.volume_gb, _VOLUME_PATH)) if spec.volume_gb else None,
    )
    return JsonBody(msgspec.json.encode(body))


# ---- responses -------------------------------------------------------------------------------------


class _WireGpu(msgspec.Struct):
    id: str = ""
    count: int = 0


class WirePod(msgspec.Struct, rename="camel"):
    """The subset of the ``Pod`` schema the fleet reads."""

    id: str
    name: str
    status: str
    gpu: _WireGpu | None = None
    cost: float = 0.0
    ports: list[str] = []
    created_at: str | None = None


class WirePodList(msgspec.Struct):
    pods: list[WirePod]


def status_to_state(status: str) -> PodState:
    return _STATES.get(status, PodState.UNKNOWN)


def _agent_url(pod: WirePod) -> str:
    # The pod agent listens on the pod's first HTTP port; Runpod reaches it through its HTTPS proxy.
    for port in pod.ports:
        number, _, proto = port.partition("/")
        if proto == "http" and number.isascii() and number.isdigit():
            return PROXY_URL.format(pod_id=pod.id, port=number)
    return ""


def pod_info(pod: WirePod) -> PodInfo:
    return PodInfo(
        provider_id=pod.id,
        name=pod.name,
        state=status_to_state(pod.status),
        gpu_type=pod.gpu.id if pod.gpu else "",
        gpu_count=pod.gpu.count if pod.gpu else 0,
        usd_per_hour=pod.cost,
        url=_agent_url(pod),
        raw_status=pod.status,
        created_at=pod.created_at or "",
    )
