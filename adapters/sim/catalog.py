"""Simulated GPU market: per-type price, speed, and stock that comes and goes (SIMULATED).

Stock per GPU type is an on/off process: a type is out of stock for outages of mean
``mean_outage_s``, for a long-run fraction ``stockout_fraction`` of the time, so a type that is out
tends to stay out for a while (as on Runpod) instead of flickering per request. With
``mean_outage_s == 0`` every provision attempt is an independent draw instead.
"""

from __future__ import annotations

import random

import msgspec

__all__ = ["DEFAULT_LADDER", "SimGpu", "StockProcess"]


class SimGpu(msgspec.Struct, frozen=True, kw_only=True):
    """One rung of the GPU preference ladder."""

    gpu_type: str
    usd_per_hour: float
    stockout_fraction: float = 0.0  # long-run share of time this type is out of stock
    mean_outage_s: float = 1800.0  # mean length of an out-of-stock spell (0: independent per attempt)
    speed: float = 1.0  # job work done per wall second, relative to the reference GPU
    capacity: int | None = None  # most pods of this type the market will ever rent us at once

    def __post_init__(self) -> None:
        if self.usd_per_hour < 0 or self.speed <= 0:
            raise ValueError(f"SimGpu {self.gpu_type}: usd_per_hour >= 0 and speed > 0")
        if not 0 <= self.stockout_fraction <= 1:
            raise ValueError(f"SimGpu {self.gpu_type}: stockout_fraction must be in [0, 1]")
        if self.mean_outage_s < 0 or (self.capacity is not None and self.capacity < 0):
            raise ValueError(f"SimGpu {self.gpu_type}: mean_outage_s and capacity must be >= 0")


#: The seed's ladder: the benchmark's cost winner (RTX A5000) first but rarely in stock, then A40 (64%
#: of the arc's GPU-hours), RTX 4090 (32%), RTX A6000 (3%). Prices: Runpod secure on-demand USD/h per
#: GPU from the shared notes (section 6); stock fractions chosen so the simulated mix resembles the arc's.
DEFAULT_LADDER: tuple[SimGpu, ...] = (
    SimGpu(gpu_type="NVIDIA RTX A5000", usd_per_hour=0.27, stockout_fraction=0.95),
    SimGpu(gpu_type="NVIDIA A40", usd_per_hour=0.49, stockout_fraction=0.35),
    SimGpu(gpu_type="NVIDIA GeForce RTX 4090", usd_per_hour=0.69, stockout_fraction=0.10),
    SimGpu(gpu_type="NVIDIA RTX A6000", usd_per_hour=0.53, stockout_fraction=0.30),
)


class StockProcess:
    """Whether one GPU type is in stock at simulated time ``t`` (queried with non-decreasing ``t``)."""

    def __init__(self, gpu: SimGpu, rng: random.Random) -> None:
        self._gpu = gpu
        self._rng = rng
        f = gpu.stockout_fraction
        self._independent = gpu.mean_outage_s == 0 or f in (0.0, 1.0)
        if not self._independent:
            self._mean_out = gpu.mean_outage_s
            self._mean_in = gpu.mean_outage_s * (1 - f) / f
            # Start in the stationary distribution so t=0 is not special.
            self._out = rng.random() < f
            self._until = rng.expovariate(1 / (self._mean_out if self._out else self._mean_in))

    def out_of_stock(self, t: float) -> bool:
        f = self._gpu.stockout_fraction
        if self._independent:
            return f >= 1.0 or (f > 0.0 and self._rng.random() < f)
        while t >= self._until:
            self._out = not self._out
            self._until += self._rng.expovariate(1 / (self._mean_out if self._out else self._mean_in))
        return self._out
