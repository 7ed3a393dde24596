"""What the agent chose in a job: the base model and which ``[prime_rl]`` keys it moved off their defaults.

A key counts as *adopted* when the job's ``[prime_rl]`` table sets one of the optional keys (those with a
default in :class:`handlers.episode.job_config.PrimeRLTable`: temperature, optimizer, algorithm, scheduler, loss,
warmup_steps, lora_rank, ...) to a value other than that default. Writing the default (the template does) is
not adoption; the required keys (model, learning rate, steps, batch and group size) never count. This is the
seed's "[prime_rl] key adoption" (21% -> ~78% of episodes).

The job.toml is read from the job bundle (a tar in the blob store): what really ran.
"""

from __future__ import annotations

import io
import tarfile
import tomllib
from typing import Any

import msgspec

from handlers.episode.job_config import PrimeRLTable

__all__ = ["JobChoice", "choice_of_bundle", "choice_of_toml", "optional_defaults", "toml_of_bundle"]


class JobChoice(msgspec.Struct, frozen=True, kw_only=True):
    model: str
    adopted: dict[str, Any]  # optional [prime_rl] key -> the non-default value chosen


def optional_defaults() -> dict[str, Any]:
    """The optional ``[prime_rl]`` keys and their defaults."""
    return {f.name: f.default for f in msgspec.structs.fields(PrimeRLTable) if f.default is not msgspec.NODEFAULT}


def choice_of_toml(text: str, source: str = "job.toml") -> JobChoice:
    """Raises ``ValueError`` naming ``source`` when the text is not TOML or has no ``[prime_rl]`` table."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{source}: not valid TOML: {exc}") from None
    table = data.get("prime_rl")
    if not isinstance(table, dict):
        raise ValueError(f"{source}: no [prime_rl] table")
    defaults = optional_defaults()
    adopted = {k: v for k, v in sorted(table.items()) if k in defaults and v != defaults[k]}
    return JobChoice(model=str(table.get("model", "")), adopted=adopted)


def choice_of_bundle(bundle: bytes, source: str = "bundle") -> JobChoice:
    """The choice in a job bundle's ``job.toml`` (see :mod:`handlers.episode.bundle`)."""
    return choice_of_toml(toml_of_bundle(bundle, source), f"{source}:job.toml")


def toml_of_bundle(bundle: bytes, source: str = "bundle") -> str:
    """The text of a job bundle's ``job.toml``; ``ValueError`` naming ``source`` when it has none."""
    try:
        with tarfile.open(fileobj=io.BytesIO(bundle), mode="r") as tar:
            member = tar.extractfile("job.toml")
            if member is None:
                raise ValueError(f"{source}: job.toml is not a regular file")
            text = member.read().decode("utf-8")
    except KeyError:
        raise ValueError(f"{source}: no job.toml in the bundle") from None
    except tarfile.TarError as exc:
        raise ValueError(f"{source}: not a tar archive: {exc}") from None
    return text
