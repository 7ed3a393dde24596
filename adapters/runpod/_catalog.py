"""The Runpod GPU catalog (``GET /v2/catalog/gpus``): list prices and, on request, current pod stock.

Stock is advisory: the spec warns that a create can still fail for capacity on a GPU the catalog just
reported as available, so it is used to *order* (skip) ladder rungs, never as a reservation.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

import msgspec

__all__ = ["Availability", "GpuOffer", "WireGpuList", "WireGpuType", "in_stock", "offer"]


class Availability(enum.Enum):
    """``AvailabilityLevel`` in the spec."""

    NONE = "NONE"
    LOW = "LOW"
    MEDIUM = "MEDIUM"
    HIGH = "HIGH"


class GpuOffer(msgspec.Struct, frozen=True, kw_only=True):
    """One GPU type as the catalog lists it (prices are USD/h for one GPU)."""

    gpu_type: str  # the id to put in PodSpec.gpu_type
    name: str
    memory_gb: int
    usd_per_hour_secure: float
    usd_per_hour_community: float
    availability: Availability | None = None  # None when availability was not requested
    data_centers: tuple[tuple[str, Availability], ...] = ()
    cuda_versions: tuple[str, ...] = ()  # versions with free capacity now (only with availability)


# ---- wire ------------------------------------------------------------------------------------------


class _Price(msgspec.Struct):
    secure: float
    community: float


class _DcAvailability(msgspec.Struct):
    id: str
    availability: str


class _CudaAvailability(msgspec.Struct):
    version: str
    available: bool


class WireGpuType(msgspec.Struct, rename="camel"):
    id: str
    name: str
    memory: int
    price: _Price
    availability: str | None = None
    data_centers: list[_DcAvailability] = []
    cuda_versions: list[_CudaAvailability] = []


class WireGpuList(msgspec.Struct):
    gpus: list[WireGpuType]


def _level(value: str) -> Availability:
    try:
        return Availability(value)
    except ValueError:
        # A level this code does not know yet: treat as unknown stock rather than refusing the catalog.
        return Availability.LOW


def offer(gpu: WireGpuType) -> GpuOffer:
    return GpuOffer(
        gpu_type=gpu.id,
        name=gpu.name,
        memory_gb=gpu.memory,
        usd_per_hour_secure=gpu.price.secure,
        usd_per_hour_community=gpu.price.community,
        availability=_level(gpu.availability) if gpu.availability is not None else None,
        data_centers=tuple((dc.id, _level(dc.availability)) for dc in gpu.data_centers),
        cuda_versions=tuple(c.version for c in gpu.cuda_versions if c.available),
    )


def in_stock(ladder: Sequence[str], offers: Iterable[GpuOffer]) -> list[str]:
    """The ladder, in its own order, without rungs the catalog reports as NONE (unknown rungs stay)."""
    known = {o.gpu_type: o.availability for o in offers}
    return [gpu for gpu in ladder if known.get(gpu) is not Availability.NONE]
