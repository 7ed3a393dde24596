"""``ait publish RUN --repo USER/NAME [--checkpoint DIR]``: push the trained trainer agent to the Hugging Face Hub.

The repository gets the LoRA checkpoint's files and a model card generated from the run's log (reward per outer
step with its decomposition, the holdout table, the costs, seed and config), in one commit. The checkpoint is
``--checkpoint DIR`` or, by default, the run's newest published sampler when that is a local directory. A
``tinker://`` checkpoint lives on Tinker's servers: the run's newest state checkpoint (or ``--checkpoint
tinker://.../weights/NAME``) is exported there in Hugging Face format and downloaded first
(``adapters.tinker.export``; needs ``TINKER_API_KEY``). Needs ``HF_TOKEN``; ``HF_ENDPOINT`` points at another
Hub. Exit 2 on a user error, 1 if Tinker or the Hub refuses.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("publish", help="push the run's trainer LoRA and a model card to the Hugging Face Hub")
    p.add_argument("run", help="run id, run directory or events.jsonl")
    p.add_argument("--repo", required=True, help="the Hub repository, USER/NAME")
    p.add_argument(
        "--checkpoint",
        default=None,
        help="a local checkpoint directory or a tinker:// state checkpoint (default: the run's newest)",
    )
    p.add_argument("--public", action="store_true", help="make the repository public (default private)")
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    sys.stderr.write(f"ait publish: {message}\n")
    return 2


def _newest_checkpoint(events: Path) -> str:
    """The newest sampler; when that is on Tinker, the newest state checkpoint (the one Tinker can export)."""
    from engine.log import read_log
    from events import LoRAStepApplied, SamplerPublished

    records = read_log(events).records
    paths = [r.event.path for r in records if isinstance(r.event, SamplerPublished)]
    newest = paths[-1] if paths else ""
    if newest.startswith("tinker://"):
        states = [r.event.state_path for r in records if isinstance(r.event, LoRAStepApplied) and r.event.state_path]
        return states[-1] if states else newest
    return newest


def _download_tinker(checkpoint: str, dest: Path) -> tuple[list[Path], str, int]:
    """The exported files of a tinker:// checkpoint in ``dest``, or ``([], one-line error, exit code)``."""
    import httpx

    from adapters.tinker.export import ExportError, download_checkpoint, state_path_for_export
    from adapters.tinker.service import real_service_client

    try:
        state_path_for_export(checkpoint)
    except ExportError as exc:
        return [], str(exc), 2
    if not os.environ.get("TINKER_API_KEY"):
        return [], f"{checkpoint} is on Tinker: TINKER_API_KEY is not set, so it cannot be exported and downloaded", 2
    try:
        with httpx.Client(timeout=httpx.Timeout(60.0, read=600.0), follow_redirects=True) as http:
            return download_checkpoint(checkpoint, dest, service=real_service_client(), http=http), "", 0
    except ExportError as exc:
        return [], str(exc), 1


def run(args: argparse.Namespace) -> int:
    from engine.rundir import resolve_run

    try:
        run_dir = resolve_run(args.run, args.runs_root)
    except FileNotFoundError as exc:
        return _fail(str(exc))
    token = os.environ.get("HF_TOKEN", "")
    if not token:
        return _fail("HF_TOKEN is not set: create a write token on the Hub and export it")
    if args.repo.count("/") != 1 or not all(args.repo.split("/")):
        return _fail(f"--repo {args.repo!r}: expected USER/NAME")
    checkpoint = args.checkpoint or _newest_checkpoint(run_dir.events)
    if not checkpoint:
        return _fail(f"run {run_dir.run_id} published no sampler checkpoint; pass --checkpoint DIR")
    if checkpoint.startswith("offline:"):
        return _fail(f"{checkpoint} is the offline backend's: it trained no weights, there is nothing to publish")
    if checkpoint.startswith("tinker://"):
        with tempfile.TemporaryDirectory(prefix="ait-publish-") as tmp:
            files, error, code = _download_tinker(checkpoint, Path(tmp))
            if error:
                sys.stderr.write(f"ait publish: {error}\n")
                return code
            return _publish(args, run_dir.root, checkpoint, Path(tmp), files, token)
    folder = Path(checkpoint)
    files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
    if not files:
        return _fail(f"--checkpoint {checkpoint}: not a directory with checkpoint files")
    return _publish(args, run_dir.root, checkpoint, folder, files, token)


def _publish(args: argparse.Namespace, root: Path, checkpoint: str, folder: Path, files: list[Path], token: str) -> int:
    from adapters.hub import publish_files
    from views.model_card import model_card

    card = model_card(root, repo_id=args.repo, checkpoint=checkpoint)
    payload: dict[str, Path | bytes] = {str(p.relative_to(folder)): p for p in files}
    payload["README.md"] = card.encode()
    try:
        url = publish_files(
            payload, repo_id=args.repo, token=token, endpoint=os.environ.get("HF_ENDPOINT"), private=not args.public
        )
    except Exception as exc:  # huggingface_hub raises HfHubHTTPError and friends; the message names the cause
        sys.stderr.write(f"ait publish: the Hub refused: {type(exc).__name__}: {str(exc).splitlines()[0]}\n")
        return 1
    sys.stdout.write(f"published {len(files)} checkpoint file(s) and the model card to {url}\n")
    return 0
