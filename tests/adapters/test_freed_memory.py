"""Freed tensor memory kept in the process: the settings reach every torch process, and change no value."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from adapters.freed_memory import SETTING_VARS
from adapters.sandbox import child_env, scrubbed_environ

ROOT = Path(__file__).resolve().parents[2]

# Sampled tokens, their log-probs, a GRPO update's loss and the updated weights of the tiny model: a digest,
# and the page faults the work took.
_WORK = textwrap.dedent(
    """
    import hashlib, json, os, resource, sys
    if sys.argv[1] == "on":
        from adapters.freed_memory import keep_freed_memory
        applied = keep_freed_memory()
    else:
        applied = None
    import torch
    from adapters.cpu_trainer._grpo import EpisodeSample, grpo_update
    from adapters.tiny.episodes import run_episodes
    from adapters.tiny.generate import SamplingParams
    from adapters.tiny.model import load_checkpoint
    from families import SYSTEM_PROMPT, get_family, hidden_tasks

    torch.set_num_threads(1)
    ckpt = load_checkpoint("tiny-0.6b")
    fam = get_family("calc_chain")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    episodes = run_episodes(ckpt, fam, list(hidden_tasks(fam))[:32], SamplingParams(temperature=1.0,
        max_tokens=48, seed=3), max_turns=2, system_prompt=SYSTEM_PROMPT, tools=fam.tool_schemas())
    samples = [EpisodeSample(group=i // 4, reward=float(i % 3), turns=e.turns) for i, e in enumerate(episodes)]
    ckpt.model.train()
    stats = grpo_update(ckpt.model, torch.optim.AdamW(ckpt.model.parameters(), lr=1e-3), samples, temperature=1.0)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    digest = hashlib.sha256(json.dumps([[(t.token_ids, t.logprobs) for t in e.turns] for e in episodes]).encode())
    digest.update(repr(stats.loss).encode())
    for p in ckpt.model.parameters():
        digest.update(p.detach().numpy().tobytes())
    print(json.dumps({"digest": digest.hexdigest(), "faults": faults, "applied": applied,
                      "thp": os.environ.get("THP_MEM_ALLOC_ENABLE")}))
    """
)


def _run(side: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k not in SETTING_VARS}
    env |= {"OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    if side == "off":  # "on" is what `ait` does: keep_freed_memory() before torch is imported
        env["THP_MEM_ALLOC_ENABLE"] = "0"
    out = subprocess.run([sys.executable, "-c", _WORK, side], env=env, capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's thresholds and torch's THP are Linux's")
def test_kept_memory_changes_no_sampled_token_loss_or_weight() -> None:
    off, on = _run("off"), _run("on")
    # The settings took effect (else the comparison proves nothing): glibc took the thresholds and the same
    # work faulted far fewer pages in.
    assert on["applied"] is True and on["thp"] == "1" and off["thp"] == "0"
    assert int(on["faults"]) < 0.8 * int(off["faults"]), (on, off)  # type: ignore[call-overload]
    assert on["digest"] == off["digest"]


def test_keep_freed_memory_sets_the_defaults_and_leaves_a_users_choice() -> None:
    code = "import os; from adapters.freed_memory import keep_freed_memory as k; ok = k()\n"
    code += "print(ok, os.environ['THP_MEM_ALLOC_ENABLE'])"
    env = {k: v for k, v in os.environ.items() if k not in SETTING_VARS} | {"PYTHONPATH": str(ROOT)}
    default = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert default.stdout.split() == ["True" if sys.platform.startswith("linux") else "False", "1"]
    mine = env | {"THP_MEM_ALLOC_ENABLE": "0", "GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}
    user = subprocess.run([sys.executable, "-c", code], env=mine, capture_output=True, text=True, check=True)
    assert user.stdout.split() == ["False", "0"]  # the user's tunables were applied at exec: not overridden


def test_the_local_pod_agent_gets_the_settings_and_the_sandboxed_child_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The forked training child ran 45% slower with them (docs/performance.md): its environment stays bare.
    assert not set(SETTING_VARS) & set(child_env("/sandbox/home", "/tmp", Path(sys.executable)))
    mine = {"THP_MEM_ALLOC_ENABLE": "1", "GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1073741824"}
    for name, value in mine.items():
        monkeypatch.setenv(name, value)
    assert all(scrubbed_environ()[name] == value for name, value in mine.items())
