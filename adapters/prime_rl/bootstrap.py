"""The pod bootstrap for the pinned revisions: a bash script that prepares a fresh GPU pod for jobs.

It installs prime-rl at :data:`.pins.PRIME_RL_COMMIT` with the submodules ``rl`` needs (rewriting their
``git@github.com:`` URLs to https, since a pod has no SSH key), syncs its locked environment, and creates
the separate scoring venv with :data:`.pins.SCORING_VERIFIERS` (``vf-eval`` runs there, where the agent's
env package is never installed). The script is idempotent (a marker file per pin set) and prints what it
did. The pod start command (:mod:`.start`) runs it before it starts ``ait pod-agent``, whose self-check
(:mod:`.selfcheck`) then verifies the result; ``docker/Dockerfile`` runs it at image build time, so that on
such an image it is a no-op. ``python -m adapters.prime_rl.bootstrap`` prints it.
"""

from __future__ import annotations

import hashlib
import shlex
import sys

from . import pins

__all__ = ["BootstrapPaths", "bootstrap_script", "pins_fingerprint"]


class BootstrapPaths:
    """Where a pod keeps the installs (overridable for images that bake them in elsewhere)."""

    def __init__(self, root: str = "/opt/ait") -> None:
        self.root = root
        self.prime_rl = f"{root}/prime-rl"
        self.scoring_venv = f"{root}/score-venv"
        self.uv_cache = f"{root}/uv-cache"
        self.hf_home = f"{root}/hf"
        self.ait_venv = f"{root}/ait-venv"  # this project, for the pod agent (installed by the start command)


def pins_fingerprint() -> str:
    """A short hash of every pin: the bootstrap marker, so a changed pin re-runs the bootstrap."""
    text = "\n".join([pins.PRIME_RL_COMMIT, pins.VERIFIERS_COMMIT, pins.SCORING_VERIFIERS, *pins.PRIME_RL_SUBMODULES])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def bootstrap_script(paths: BootstrapPaths | None = None) -> str:
    p = paths or BootstrapPaths()
    q = shlex.quote
    marker = f"{p.root}/.bootstrapped-{pins_fingerprint()}"
    submodules = " ".join(q(s) for s in pins.PRIME_RL_SUBMODULES)
    return f"""#!/usr/bin/env bash
# ait pod bootstrap: {pins.pins_summary()}
set -euo pipefail
export UV_CACHE_DIR={q(p.uv_cache)} HF_HOME={q(p.hf_home)}
mkdir -p {q(p.root)} "$UV_CACHE_DIR" "$HF_HOME"
if [ -f {q(marker)} ]; then echo "bootstrap: already done ({pins_fingerprint()})"; exit 0; fi
command -v uv >/dev/null || {{ curl -LsSf https://astral.sh/uv/install.sh | sh; export PATH="$HOME/.local/bin:$PATH"; }}
# prime-rl at the pinned commit; its submodules are declared with SSH URLs upstream.
git config --global url."https://github.com/".insteadOf "git@github.com:"
if [ ! -d {q(p.prime_rl)}/.git ]; then git clone --filter=blob:none {q(pins.PRIME_RL_REPO)} {q(p.prime_rl)}; fi
git -C {q(p.prime_rl)} fetch --quiet origin {q(pins.PRIME_RL_COMMIT)} || true
git -C {q(p.prime_rl)} checkout --quiet {q(pins.PRIME_RL_COMMIT)}
git -C {q(p.prime_rl)} submodule update --init -- {submodules}
test "$(git -C {q(p.prime_rl)}/deps/verifiers rev-parse HEAD)" = {q(pins.VERIFIERS_COMMIT)}
(cd {q(p.prime_rl)} && uv sync --all-extras)
{q(p.prime_rl)}/.venv/bin/python -c "import prime_rl, verifiers, vllm; print('prime-rl ok, vllm', vllm.__version__)"
# The scoring venv: verifiers for vf-eval only; the agent's env package is never installed here.
rm -rf {q(p.scoring_venv)} && uv venv --python {pins.PYTHON_VERSION} {q(p.scoring_venv)}
uv pip install --python {q(p.scoring_venv)}/bin/python {q(pins.SCORING_VERIFIERS)} msgspec
{q(p.scoring_venv)}/bin/vf-eval --help >/dev/null
touch {q(marker)}
echo "bootstrap: done ({pins_fingerprint()})"
"""


if __name__ == "__main__":
    sys.stdout.write(bootstrap_script(BootstrapPaths(sys.argv[1]) if len(sys.argv) > 1 else None))
