"""Simulated GPU market: per-type price, speed, and stock that comes and goes (SIMULATED).

Stock per GPU type is an on/off process: a type is out of stock for outages of mean
``mean_outage_s``, for a long-run fraction ``stockout_fraction`` of the time, so a type that is out
tends to stay out for a while (as on Runpod) instead of flickering per request. With
``mean_outage_s == 0`` every provision attempt is an independent draw instead.
"""

from __future__ import annotations

import random

import msgspec

from handlers.fleet.policy import parse_rung

__all__ = ["DEFAULT_LADDER", "SEED_MODELS", "SEED_SPEEDS", "SimGpu", "StockProcess", "right_sized_ladders"]


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


#: The seed's two base models and their share of the arc's jobs (the 1.7B share grew from 42% to 95% over
#: the arc; 75% is its rough mean).
SEED_MODELS: tuple[tuple[str, float], ...] = (("Qwen/Qwen3-1.7B", 0.75), ("Qwen/Qwen3-0.6B", 0.25))

#: ASSUMED speeds (job work per second; reference = one A40), rung label -> model -> speed. The rule: an RL
#: job of a small model is mostly rollout decoding, so speed follows memory bandwidth (A40 696 GB/s = 1.0;
#: A5000 and A6000 768 GB/s = 1.1; RTX 4090 1008 GB/s = 1.45). The 1.7B model on one 24 GB card must share
#: it between vLLM and the trainer (smaller batches, offloading): x0.7. A 2-GPU pod puts vLLM and the trainer
#: on a GPU each: x1.8 of one GPU. These make the seed's two cost figures agree: its arc's mix (A40 and 4090)
#: at ~$0.17/job and 2x A5000 at ~$0.13/job (the seed's benchmark winner). Not measured here: replace with
#: `benchmarks/gpu_matrix.py` rows when they exist.
SEED_SPEEDS: dict[str, dict[str, float]] = {
    "NVIDIA A40": {"": 1.0},
    "NVIDIA RTX A6000": {"": 1.1},
    "NVIDIA RTX A5000": {"": 1.1, "Qwen/Qwen3-1.7B": 0.77},
    "NVIDIA GeForce RTX 4090": {"": 1.45, "Qwen/Qwen3-1.7B": 1.0},
    "2x NVIDIA RTX A5000": {"": 1.98},
}


def right_sized_ladders(
    market: tuple[SimGpu, ...],
    speeds: dict[str, dict[str, float]],
    models: tuple[tuple[str, float], ...],
    rungs: tuple[str, ...],
) -> dict[str, tuple[str, ...]]:
    """Per model, the ``rungs`` it can run on, cheapest per unit of work first (what ``[fleet] ladders`` takes).

    A rung "<n>x <type>" costs n GPUs; a rung missing from ``speeds`` runs at the GPU's own speed. The real
    ladder comes from measured rows (benchmarks/gpu_matrix.py writes them in this order); this is the same
    ordering over the simulation's assumed speeds.
    """
    prices = {g.gpu_type: g.usd_per_hour for g in market}

    def usd_per_work_hour(rung: str, model: str) -> float:
        gpu, count = parse_rung(rung)
        table = speeds.get(rung, {})
        speed = table.get(model, table.get("", next(g.speed for g in market if g.gpu_type == gpu)))
        return prices[gpu] * count / speed

    return {m: tuple(sorted(rungs, key=lambda r: usd_per_work_hour(r, m))) for m, _ in models}
