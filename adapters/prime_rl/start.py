"""The pod start command: install (or, on a prepared image, verify) this project, prime-rl and vLLM, then
start the pod agent.

:func:`start_script` is the bash script a pod's container runs first:

1. **this project at the controller's version**: if ``<root>/ait-venv`` already has ``ai-trains-ai`` at the
   version the controller runs (a prepared image, ``docker/Dockerfile``), nothing is installed; otherwise
   ``uv`` installs the source the controller names there (a pip requirement: ``ai-trains-ai==<version>`` from
   an index, or a git URL at the controller's commit) and the version is checked again. Failing that the
   script exits: no agent could answer, and the controller gives up after ``ready_timeout_s``.
2. **the pinned bootstrap** (:func:`.bootstrap.bootstrap_script`, unchanged): a no-op on a prepared image
   (its marker file), else prime-rl at the pinned commit, its venv with vLLM, and the scoring venv. Its output
   goes to ``<root>/bootstrap.log`` and its exit status to ``<root>/bootstrap.status``. A failed bootstrap
   still starts the agent: its self-check (:mod:`.selfcheck`) fails and names what is missing, so the
   controller records why (``pod.self_checked``) instead of waiting for a timeout.
3. ``exec`` the pod agent with the script's own arguments (``"$@"``), ``AIT_ROOT`` and ``AIT_VERSION`` exported
   for its self-check.

:func:`runpod_args` carries the script in Runpod's ``args`` (the container command) base64-encoded, as
SkyPilot does for its setup script, so that no character of the script needs quoting. The local provider runs
the same script with ``bash`` (its tests use stand-ins for the GPU stack). ``python -m adapters.prime_rl.start``
prints the script for the defaults; ``--image-tag`` the tag for an image built from ``docker/Dockerfile``.
"""

from __future__ import annotations

import base64
import re
import shlex
import sys
from collections.abc import Sequence

import msgspec

from . import pins
from .bootstrap import BootstrapPaths, bootstrap_script, pins_fingerprint
from .selfcheck import BOOTSTRAP_LOG, BOOTSTRAP_STATUS

__all__ = ["DISTRIBUTION", "StartPlan", "image_tag", "runpod_args", "start_script"]

DISTRIBUTION = "ai-trains-ai"  # this project's distribution name (pyproject.toml)
_SCRIPT = "/tmp/ait-start.sh"
_EOF = "AIT_BOOTSTRAP_EOF"
_PLAIN = re.compile(r"^[A-Za-z0-9_.,:=/@+-]+$")  # an argument that needs no quoting inside the '...' of bash -c


class StartPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What the start script installs or verifies, and what it starts."""

    ait_version: str  # the controller's version of this project: the pod must run the same
    ait_source: str = ""  # a pip requirement installing it ("": ai-trains-ai==<version> from an index)
    root: str = "/opt/ait"  # the bootstrap root (prime-rl, the venvs, caches)
    bootstrap: bool = True  # run the pinned bootstrap (the prime_rl trainer); False: a trainer without a GPU stack
    #: the interpreter that has (or gets) this project; default ``<root>/ait-venv/bin/python``
    ait_python: str = ""
    #: the pod agent's command, before the script's own arguments; default ``<root>/ait-venv/bin/ait pod-agent``
    agent: tuple[str, ...] = ()

    def source(self) -> str:
        return self.ait_source or f"{DISTRIBUTION}=={self.ait_version}"

    def python(self) -> str:
        return self.ait_python or f"{BootstrapPaths(self.root).ait_venv}/bin/python"

    def agent_argv(self) -> tuple[str, ...]:
        return self.agent or (f"{BootstrapPaths(self.root).ait_venv}/bin/ait", "pod-agent")


def image_tag(ait_version: str) -> str:
    """The tag an image built from ``docker/Dockerfile`` should carry: this project's version and the pins."""
    return f"ait-pod:{ait_version}-{pins_fingerprint()}"


def _version_check(python: str, version: str) -> str:
    code = f'import sys; from importlib.metadata import version; sys.exit(version("{DISTRIBUTION}") != sys.argv[1])'
    return f"{shlex.quote(python)} -c {shlex.quote(code)} {shlex.quote(version)} 2>/dev/null"


def start_script(plan: StartPlan) -> str:
    """The pod's start script for ``plan`` (valid bash; the agent's arguments are the script's own)."""
    q = shlex.quote
    paths = BootstrapPaths(plan.root)
    root, py, want = q(plan.root), plan.python(), plan.ait_version
    check = _version_check(py, want)
    venv = q(paths.ait_venv)
    get_uv = 'curl -LsSf https://astral.sh/uv/install.sh | sh; export PATH="$HOME/.local/bin:$PATH"'
    install = f"""  command -v uv >/dev/null || {{ {get_uv}; }}
  [ -x {q(py)} ] || uv venv --python {pins.PYTHON_VERSION} {venv}
  uv pip install --python {q(py)} {q(plan.source())}
  {check} || {{ echo start: {q(plan.source())} did not install {DISTRIBUTION} {q(want)} into {q(py)} >&2; exit 1; }}"""
    if plan.bootstrap:
        log, status = q(f"{plan.root}/{BOOTSTRAP_LOG}"), q(f"{plan.root}/{BOOTSTRAP_STATUS}")
        boot_file = q(f"{plan.root}/bootstrap.sh")
        bootstrap = f"""# 2. prime-rl at the pinned commit, vLLM, the scoring venv (a no-op on a prepared image)
cat > {boot_file} <<'{_EOF}'
{bootstrap_script(paths).rstrip()}
{_EOF}
set +e
bash {boot_file} > {log} 2>&1
echo $? > {status}
set -e
echo "start: bootstrap exit $(cat {status})"
"""
    else:
        bootstrap = "# 2. no GPU stack for this trainer: no bootstrap\n"
    agent = " ".join(q(a) for a in plan.agent_argv())
    return f"""#!/usr/bin/env bash
# ait pod start: {DISTRIBUTION} {want}; {pins.pins_summary()}
set -euo pipefail
mkdir -p {root}
# 1. this project at the controller's version: verified, installed only when missing or another version
if {check}; then
  echo start: {DISTRIBUTION} {q(want)} present
else
  echo start: installing {q(plan.source())}
{install}
fi
{bootstrap}# 3. the agent: its self-check runs first, and it takes no job until the check has passed
export AIT_ROOT={root} AIT_VERSION={q(want)}
exec {agent} "$@"
"""


def runpod_args(script: str, agent_args: Sequence[str]) -> str:
    """Runpod's ``args`` (the container command): decode the script to a file and run it with ``agent_args``."""
    for arg in agent_args:
        if not _PLAIN.match(arg):
            raise ValueError(f"pod agent argument {arg!r}: only letters, digits and _.,:=/@+- fit in Runpod's args")
    encoded = base64.b64encode(script.encode()).decode()
    tail = " ".join(agent_args)
    return f"bash -c 'echo {encoded} | base64 -d > {_SCRIPT} && exec bash {_SCRIPT} {tail}'"


if __name__ == "__main__":
    from importlib.metadata import version

    current = version(DISTRIBUTION)
    if sys.argv[1:] == ["--image-tag"]:  # docker/Dockerfile's tag: this project's version and the pins
        sys.stdout.write(image_tag(current) + "\n")
    else:
        sys.stdout.write(start_script(StartPlan(ait_version=current)))
