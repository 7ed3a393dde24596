"""The price table: USD per million tokens per model and USD per GPU-hour, loaded from a versioned TOML file.

The packaged table is ``handlers/budget/prices.toml`` (illustrative numbers with the date they were taken); a
run config may point at another file. Loading validates every key and value, and every error names the file
and the key. Prices turn usage into USD; budgets (:mod:`handlers.budget.rules`) reserve with :meth:`llm_max_usd`
and :meth:`gpu_usd` before spending and settle with the real usage after.
"""

from __future__ import annotations

import datetime as dt
import math
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec

__all__ = ["GpuPrice", "ModelPrice", "PriceTable", "PriceTableError", "UnknownPrice", "load_prices"]

_MILLION = 1_000_000
_TOP_KEYS = {"version", "taken", "currency", "models", "gpus"}
_MODEL_NUMBERS = ("input_per_mtok", "cached_input_per_mtok", "output_per_mtok", "train_per_mtok")
_MODEL_KEYS = {"provider", "aliases", *_MODEL_NUMBERS}
_GPU_KEYS = {"usd_per_hour", "aliases"}


class PriceTableError(ValueError):
    """The price file is missing, not TOML, or has a bad key or value (the message names file and key)."""


class UnknownPrice(KeyError):
    """A model or GPU type that the price table does not list."""

    def __str__(self) -> str:
        return str(self.args[0])


class ModelPrice(msgspec.Struct, frozen=True, kw_only=True):
    provider: str
    input_per_mtok: float
    cached_input_per_mtok: float
    output_per_mtok: float
    train_per_mtok: float = 0.0
    aliases: tuple[str, ...] = ()


class GpuPrice(msgspec.Struct, frozen=True, kw_only=True):
    usd_per_hour: float
    aliases: tuple[str, ...] = ()


class PriceTable:
    """A loaded, validated price table. Names resolve through ids and aliases, case-sensitively."""

    def __init__(
        self,
        *,
        version: int,
        taken: dt.date,
        models: Mapping[str, ModelPrice],
        gpus: Mapping[str, GpuPrice],
        source: str = "<memory>",
    ) -> None:
        self.version = version
        self.taken = taken
        self.models = dict(models)
        self.gpus = dict(gpus)
        self.source = source
        self._model_index = _index("models", self.models, source)
        self._gpu_index = _index("gpus", self.gpus, source)

    @property
    def label(self) -> str:
        """``v<version> (<date>)``: recorded on every settlement so a cost can be traced to its prices."""
        return f"v{self.version} ({self.taken.isoformat()})"

    def model(self, name: str) -> ModelPrice:
        key = self._model_index.get(name)
        if key is None:
            raise UnknownPrice(f"{self.source}: no price for model {name!r}; known: {sorted(self._model_index)}")
        return self.models[key]

    def gpu(self, name: str) -> GpuPrice:
        key = self._gpu_index.get(name)
        if key is None:
            raise UnknownPrice(f"{self.source}: no price for GPU type {name!r}; known: {sorted(self._gpu_index)}")
        return self.gpus[key]

    def llm_usd(
        self,
        model: str,
        *,
        input_tokens: int,
        cached_input_tokens: int = 0,
        output_tokens: int = 0,
        train_tokens: int = 0,
    ) -> float:
        """USD for one call. ``input_tokens`` counts all prompt tokens, ``cached_input_tokens`` of them hits."""
        for name, n in (
            ("input_tokens", input_tokens),
            ("cached_input_tokens", cached_input_tokens),
            ("output_tokens", output_tokens),
            ("train_tokens", train_tokens),
        ):
            if n < 0:
                raise ValueError(f"{name} must be >= 0, got {n}")
        if cached_input_tokens > input_tokens:
            raise ValueError(
                f"cached_input_tokens ({cached_input_tokens}) > input_tokens ({input_tokens}): "
                "input_tokens must count every prompt token, cached ones included"
            )
        p = self.model(model)
        micro_usd = (
            (input_tokens - cached_input_tokens) * p.input_per_mtok
            + cached_input_tokens * p.cached_input_per_mtok
            + output_tokens * p.output_per_mtok
            + train_tokens * p.train_per_mtok
        )
        return micro_usd / _MILLION

    def llm_max_usd(self, model: str, *, max_input_tokens: int, max_output_tokens: int) -> float:
        """An upper bound for a call: every prompt token uncached, every allowed output token sampled."""
        return self.llm_usd(model, input_tokens=max_input_tokens, output_tokens=max_output_tokens)

    def gpu_usd(self, gpu_type: str, *, seconds: float, count: int = 1) -> float:
        """USD for ``count`` GPUs of ``gpu_type`` held for ``seconds``."""
        if not (math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"seconds must be a finite number >= 0, got {seconds!r}")
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        return self.gpu(gpu_type).usd_per_hour * count * seconds / 3600.0


def _index(section: str, entries: Mapping[str, ModelPrice | GpuPrice], source: str) -> dict[str, str]:
    index: dict[str, str] = {}
    for key, entry in entries.items():
        for name in (key, *entry.aliases):
            if name in index and index[name] != key:
                raise PriceTableError(f"{source}: {section}: name {name!r} used by both {index[name]!r} and {key!r}")
            index[name] = key
    return index


def _number(source: str, where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise PriceTableError(f"{source}: {where}: expected a finite number >= 0, got {value!r}")
    return float(value)


def _aliases(source: str, where: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(a, str) and a for a in value):
        raise PriceTableError(f"{source}: {where}.aliases: expected a list of non-empty strings, got {value!r}")
    return tuple(value)


def _table(source: str, where: str, value: Any, allowed: set[str], required: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PriceTableError(f"{source}: {where}: expected a table, got {value!r}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise PriceTableError(f"{source}: {where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
    missing = sorted(required - set(value))
    if missing:
        raise PriceTableError(f"{source}: {where}: missing key(s) {missing}")
    return value


def _model(source: str, name: str, raw: Any) -> ModelPrice:
    where = f'models."{name}"'
    t = _table(source, where, raw, _MODEL_KEYS, {"provider", *_MODEL_NUMBERS[:3]})
    if not isinstance(t["provider"], str) or not t["provider"]:
        raise PriceTableError(f"{source}: {where}.provider: expected a non-empty string, got {t['provider']!r}")
    n = {k: _number(source, f"{where}.{k}", t[k]) for k in _MODEL_NUMBERS if k in t}
    if n["cached_input_per_mtok"] > n["input_per_mtok"]:
        raise PriceTableError(
            f"{source}: {where}.cached_input_per_mtok: {n['cached_input_per_mtok']} is above "
            f"input_per_mtok {n['input_per_mtok']} (columns swapped?)"
        )
    return ModelPrice(provider=t["provider"], aliases=_aliases(source, where, t.get("aliases", [])), **n)


def _gpu(source: str, name: str, raw: Any) -> GpuPrice:
    where = f'gpus."{name}"'
    t = _table(source, where, raw, _GPU_KEYS, {"usd_per_hour"})
    return GpuPrice(
        usd_per_hour=_number(source, f"{where}.usd_per_hour", t["usd_per_hour"]),
        aliases=_aliases(source, where, t.get("aliases", [])),
    )


def parse_prices(data: Mapping[str, Any], *, source: str) -> PriceTable:
    """Validate a parsed TOML document into a :class:`PriceTable`."""
    top = _table(source, "top level", dict(data), _TOP_KEYS, {"version", "taken", "models", "gpus"})
    version = top["version"]
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise PriceTableError(f"{source}: version: expected an integer >= 1, got {version!r}")
    taken = top["taken"]
    if not isinstance(taken, dt.date) or isinstance(taken, dt.datetime):
        raise PriceTableError(f"{source}: taken: expected a TOML date like 2026-11-30, got {taken!r}")
    if top.get("currency", "USD") != "USD":
        raise PriceTableError(f"{source}: currency: only USD is supported, got {top['currency']!r}")
    models, gpus = top["models"], top["gpus"]
    for section, value in (("models", models), ("gpus", gpus)):
        if not isinstance(value, dict):
            raise PriceTableError(f'{source}: {section}: expected a table of [{section}."<name>"] entries')
    return PriceTable(
        version=version,
        taken=taken,
        models={name: _model(source, name, raw) for name, raw in models.items()},
        gpus={name: _gpu(source, name, raw) for name, raw in gpus.items()},
        source=source,
    )


def load_prices(path: str | Path | None = None) -> PriceTable:
    """Load and validate a price file; ``None`` loads the packaged ``handlers/budget/prices.toml``."""
    if path is None:
        ref = resources.files(__package__ or __name__).joinpath("prices.toml")
        source, text = "handlers/budget/prices.toml", ref.read_text(encoding="utf-8")
    else:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise PriceTableError(f"{source}: cannot read the price table: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PriceTableError(f"{source}: not valid TOML: {exc}") from None
    return parse_prices(data, source=source)
