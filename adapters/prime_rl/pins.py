"""The pinned revisions of everything a GPU pod runs, in one place.

The generated ``rl`` configs (:mod:`.config`), the pod bootstrap (:mod:`.bootstrap`) and the docs
(``docs/gpu-runner-spec.md``) all read these. Changing a pin changes the golden configs' header, so
the golden tests force a reviewed regeneration (``AIT_REGEN_GOLDEN=1``).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "PRIME_RL_COMMIT",
    "PRIME_RL_DESCRIBE",
    "PRIME_RL_REPO",
    "PRIME_RL_SUBMODULES",
    "PYTHON_VERSION",
    "SCORING_VERIFIERS",
    "TORCH_VERSION",
    "VERIFIERS_COMMIT",
    "VLLM_VERSION",
    "pins_dict",
    "pins_summary",
]

PRIME_RL_REPO: Final = "https://github.com/PrimeIntellect-ai/prime-rl"
# 2026-08-21, "chore: bump verifiers to latest main (#3337)"; trains verifiers v1 envs only.
PRIME_RL_COMMIT: Final = "559b44772e471d1538537b8805cc77f3824a5e64"
PRIME_RL_DESCRIBE: Final = "v0.8.1.dev67"
# The submodules `rl` needs (deps/prime-kernels is not needed for dense Qwen3). Three of them are declared
# with git@github.com: URLs upstream, so a pod without SSH keys rewrites them to https first.
PRIME_RL_SUBMODULES: Final = ("deps/verifiers", "deps/renderers", "deps/prime-envs", "deps/pydantic-config")
# prime-rl's deps/verifiers at that commit: the verifiers the trainer side (env servers) runs.
VERIFIERS_COMMIT: Final = "a60a606ecc4d309247edf9ff92c3eabca362781f"
# The scoring side runs `vf-eval` from its own venv with the published release (the v1 CLI there),
# never from prime-rl's venv, so the agent's env package is not importable while scoring.
SCORING_VERIFIERS: Final = "verifiers==0.4.0"
# From prime-rl's uv.lock at PRIME_RL_COMMIT (informational: `uv sync` installs exactly these).
VLLM_VERSION: Final = "0.26.0+cu129"
TORCH_VERSION: Final = "2.11.0+cu128"
PYTHON_VERSION: Final = "3.12"


def pins_summary() -> str:
    """One line naming every pin, for config headers and logs."""
    return (
        f"prime-rl {PRIME_RL_COMMIT} ({PRIME_RL_DESCRIBE}), verifiers {VERIFIERS_COMMIT} (trainer) / "
        f"{SCORING_VERIFIERS} (scoring), vllm {VLLM_VERSION}, torch {TORCH_VERSION}"
    )


def pins_dict() -> dict[str, str]:
    """The pins as ``[fleet] pins`` / ``pod.requested`` record them (name -> exact revision)."""
    return {
        "prime_rl": PRIME_RL_COMMIT,
        "verifiers_trainer": VERIFIERS_COMMIT,
        "verifiers_scoring": SCORING_VERIFIERS,
        "vllm": VLLM_VERSION,
        "torch": TORCH_VERSION,
        "python": PYTHON_VERSION,
    }
