"""``ait doctor [--config FILE]``: check every service a run needs before spending anything on it.

With a run config, only the services that config uses are required (Tinker for ``[backend] kind = "tinker"``,
Runpod for a Runpod fleet, W&B for a ``[wandb]`` table); the others are listed as optional. Without one, every
service is checked whose key is present. Each row says what was checked, what a failure blocks and what the
check cost (metadata calls only: no pod, no sampled token). Exit 0 when every required service is ok, 1 if not,
2 for a bad config.

The endpoints follow each service's own variable where it has one (``OPENAI_BASE_URL``, ``WANDB_BASE_URL``,
``HF_ENDPOINT``, ``AIT_RUNPOD_BASE_URL``), which is also how the tests stand local fakes in for them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DoctorPorts", "register"]

TinkerModels = Callable[[], Awaitable[list[tuple[str, bool, bool]]]]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("doctor", help="check keys, quotas and stock of every service a run needs")
    p.add_argument("--config", default=None, help="a run config: check what it needs (default: every service)")
    p.add_argument("--agent-model", default="", help="the agent model to look for on the OpenAI-compatible endpoint")
    p.set_defaults(func=run)


@dataclass
class DoctorPorts:
    """How the checks reach each service (tests replace the Tinker factory; HTTP services follow the env)."""

    environ: Mapping[str, str]
    tinker_models: Callable[[str], TinkerModels] | None = None  # base_url -> the capability call
    transport: Any = None  # an httpx transport for every HTTP check (tests: a MockTransport); None = the network


def _real_tinker(base_url: str) -> TinkerModels:
    from adapters.tinker.service import TinkerService

    return TinkerService(base_url=base_url or None, create_timeout_s=60.0).supported_models


async def _doctor(cfg: Any, ports: DoctorPorts, agent_model: str) -> list[tuple[bool, Any]]:
    import httpx

    from adapters import doctor
    from adapters.runpod import API_KEY_ENV, DEFAULT_BASE_URL, RunpodProvider
    from handlers.fleet.policy import SEED_LADDER

    env = ports.environ
    backend = cfg.backend.kind if cfg is not None else ""
    provider = cfg.provider if cfg is not None else ""
    rows: list[tuple[bool, Any]] = []  # (required, check)

    need = cfg is None or backend == "tinker"
    blocks = "[backend] kind = 'tinker' (ait train, ait holdout)"
    if not env.get("TINKER_API_KEY"):
        rows.append((need, doctor.missing("tinker", "TINKER_API_KEY", blocks)))
    else:
        model = cfg.outer.base_model if cfg is not None else "Qwen/Qwen3-30B-A3B"
        factory = ports.tinker_models or _real_tinker
        base = cfg.backend.base_url if cfg is not None else ""
        rows.append((need, await doctor.check_tinker(factory(base), model, blocks=blocks)))

    need = cfg is None or provider == "runpod"
    blocks = "[fleet] provider = 'runpod' (GPU jobs)"
    if not env.get(API_KEY_ENV):
        rows.append((need, doctor.missing("runpod", API_KEY_ENV, blocks)))
    else:
        ladder = tuple(cfg.fleet.ladder) if cfg is not None and provider == "runpod" else SEED_LADDER
        base = env.get("AIT_RUNPOD_BASE_URL", DEFAULT_BASE_URL)
        async with RunpodProvider.from_env(env, base_url=base, transport=ports.transport) as runpod:
            rows += [(need, c) for c in await doctor.check_runpod(runpod, [(g, 1) for g in ladder], blocks=blocks)]

    need = bool(agent_model)
    blocks = "ait episode --agent openai:MODEL"
    if not env.get("OPENAI_API_KEY"):
        rows.append((need, doctor.missing("agent endpoint", "OPENAI_API_KEY", blocks)))
    else:
        base = env.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
        headers = {"Authorization": f"Bearer {env['OPENAI_API_KEY']}"}
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=20.0, transport=ports.transport) as client:
            rows.append((need, await doctor.check_openai(client, agent_model, blocks=blocks)))

    need = cfg is not None and cfg.wandb is not None
    blocks = "the live W&B sink ([wandb] table, ait report --wandb)"
    if not env.get("WANDB_API_KEY"):
        rows.append((need, doctor.missing("wandb", "WANDB_API_KEY", blocks)))
    else:
        base = env.get("WANDB_BASE_URL", "https://api.wandb.ai")
        async with httpx.AsyncClient(
            base_url=base, auth=("api", env["WANDB_API_KEY"]), timeout=20.0, transport=ports.transport
        ) as client:
            rows.append((need, await doctor.check_wandb(client, blocks=blocks)))

    blocks = "ait publish (pushing the trained LoRA to the Hub)"
    if not env.get("HF_TOKEN"):
        rows.append((False, doctor.missing("hf hub", "HF_TOKEN", blocks)))
    else:
        base = env.get("HF_ENDPOINT", "https://huggingface.co")
        headers = {"Authorization": f"Bearer {env['HF_TOKEN']}"}
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=20.0, transport=ports.transport) as client:
            rows.append((False, await doctor.check_hf(client, blocks=blocks)))
    return rows


def print_table(rows: list[tuple[bool, Any]]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    colour = {"ok": "green", "missing": "yellow", "failed": "red", "warning": "yellow"}
    table = Table(title="ait doctor", show_lines=False)
    for col in ("service", "needed", "status", "detail", "blocks while not ok", "cost of the check"):
        table.add_column(col)
    for required, c in rows:
        table.add_row(
            escape(c.service),
            "yes" if required else "optional",
            f"[{colour[c.status]}]{c.status}[/]",
            escape(c.detail),
            escape(c.blocks) if c.status != "ok" else "",
            escape(c.cost),
        )
    Console(highlight=False).print(table)


def run(args: argparse.Namespace, ports: DoctorPorts | None = None) -> int:
    import anyio

    from engine.logs import configure_logging
    from handlers.training import ConfigError

    configure_logging(level="warning", console=sys.stderr)
    cfg = None
    if args.config:
        from cli.train_config import load_run_config

        try:
            cfg = load_run_config(args.config)
        except ConfigError as exc:
            sys.stderr.write(f"ait doctor: {exc}\n")
            return 2
    rows = anyio.run(_doctor, cfg, ports or DoctorPorts(environ=dict(os.environ)), args.agent_model)
    print_table(rows)
    bad = [c for required, c in rows if required and c.status in ("missing", "failed")]
    if bad:
        sys.stdout.write(f"not ready: {', '.join(sorted({c.service for c in bad}))}\n")
        return 1
    sys.stdout.write("ready: every required service answered\n")
    return 0
