"""adapters.prime_rl.start: the pod start script installs or verifies this project, runs the pinned bootstrap
unchanged, then execs the agent; run here with stand-ins for uv and the bootstrap's work."""

from __future__ import annotations

import base64
import os
import shlex
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from adapters.prime_rl import pins
from adapters.prime_rl.bootstrap import BootstrapPaths, bootstrap_script
from adapters.prime_rl.start import StartPlan, image_tag, runpod_args, start_script
from tests.fakes.gpu_stack import make_stack, write_exe

VERSION = version("ai-trains-ai")
ECHO_ARGS = ("/bin/echo", "agent")  # stands in for the pod agent: prints the arguments it was started with


def run_script(script: str, tmp_path: Path, *args: str, path: str = "") -> subprocess.CompletedProcess[str]:
    file = tmp_path / "start.sh"
    file.write_text(script)
    env = {"PATH": path or os.environ["PATH"], "HOME": str(tmp_path)}
    return subprocess.run(["bash", str(file), *args], capture_output=True, text=True, env=env, timeout=30)


def test_the_script_embeds_the_pinned_bootstrap_between_the_install_and_the_agent() -> None:
    plan = StartPlan(ait_version="1.2.3", ait_source="git+https://example.org/ait@abc", root="/opt/x y")
    text = start_script(plan)
    assert bootstrap_script(BootstrapPaths("/opt/x y")).rstrip() in text  # reused, not rewritten
    assert pins.pins_summary() in text.splitlines()[1]
    install = text.index("uv pip install --python '/opt/x y/ait-venv/bin/python' git+https://example.org/ait@abc")
    assert text.index('version("ai-trains-ai") != sys.argv[1]') < install < text.index("bash '/opt/x y/bootstrap.sh'")
    assert text.rstrip().endswith("exec '/opt/x y/ait-venv/bin/ait' pod-agent \"$@\"")
    assert "export AIT_ROOT='/opt/x y' AIT_VERSION=1.2.3" in text
    assert "ai-trains-ai==1.2.3" in start_script(StartPlan(ait_version="1.2.3"))  # the default source
    assert "bootstrap.sh" not in start_script(StartPlan(ait_version="1.2.3", bootstrap=False))
    proc = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True)
    assert proc.returncode == 0, proc.stderr


def test_runpod_args_carry_the_script_intact_and_refuse_arguments_that_need_quoting() -> None:
    script = start_script(StartPlan(ait_version=VERSION))
    args = runpod_args(script, ["--port", "8000", "--trainer", "prime_rl"])
    argv = shlex.split(args)
    assert argv[:2] == ["bash", "-c"] and len(argv) == 3
    encoded = argv[2].split()[1]
    assert base64.b64decode(encoded).decode() == script
    assert argv[2].endswith("exec bash /tmp/ait-start.sh --port 8000 --trainer prime_rl")
    with pytest.raises(ValueError, match="only letters"):
        runpod_args(script, ["--trainer", "x'; rm -rf /"])
    assert image_tag("0.1.0").startswith("ait-pod:0.1.0-")


def test_on_a_prepared_machine_nothing_is_installed_and_the_agent_gets_the_arguments(tmp_path: Path) -> None:
    root = tmp_path / "ait"
    path = make_stack(root)  # the bootstrap's marker is there: it is a no-op
    plan = StartPlan(ait_version=VERSION, root=str(root), ait_python=sys.executable, agent=ECHO_ARGS)
    proc = run_script(start_script(plan), tmp_path, "--port", "0", path=path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"start: ai-trains-ai {VERSION} present",
        "start: bootstrap exit 0",
        "agent --port 0",
    ]
    assert (root / "bootstrap.status").read_text() == "0\n"
    assert "bootstrap: already done" in (root / "bootstrap.log").read_text()


def test_a_missing_project_is_installed_from_the_source_and_checked_again(tmp_path: Path) -> None:
    root = tmp_path / "ait"
    path = make_stack(root)
    calls = tmp_path / "uv-calls"
    venv_python = root / "ait-venv" / "bin" / "python"
    # uv's stand-in: `uv venv` makes a python that is this interpreter (which has the project), `uv pip` logs.
    write_exe(
        Path(path.split(os.pathsep)[0]) / "uv",
        f'echo "$@" >> {calls}\n'
        f'if [ "$1" = venv ]; then mkdir -p {venv_python.parent}; '
        f"printf '#!/bin/sh\\nexec {sys.executable} \"$@\"\\n' > {venv_python}; chmod +x {venv_python}; fi",
    )
    plan = StartPlan(
        ait_version=VERSION, ait_source="git+https://example.org/ait@c0ffee", root=str(root), agent=ECHO_ARGS
    )
    proc = run_script(start_script(plan), tmp_path, path=path)
    assert proc.returncode == 0, proc.stderr
    assert calls.read_text().splitlines() == [
        f"venv --python {pins.PYTHON_VERSION} {root}/ait-venv",
        f"pip install --python {venv_python} git+https://example.org/ait@c0ffee",
    ]
    assert proc.stdout.splitlines()[0] == "start: installing git+https://example.org/ait@c0ffee"

    wrong = StartPlan(ait_version="9.9.9", root=str(root), agent=ECHO_ARGS)  # the install does not give 9.9.9
    proc = run_script(start_script(wrong), tmp_path, path=path)
    assert proc.returncode == 1 and "agent" not in proc.stdout  # no agent starts on the wrong version
    assert proc.stderr.strip().endswith(f"did not install ai-trains-ai 9.9.9 into {venv_python}")


def test_a_failed_bootstrap_still_starts_the_agent_and_leaves_its_status(tmp_path: Path) -> None:
    root = tmp_path / "ait"
    path = make_stack(root, marker=False)  # no marker: the bootstrap really runs
    bin_dir = Path(path.split(os.pathsep)[0])
    write_exe(bin_dir / "uv", "exit 0")  # present, so nothing is downloaded
    write_exe(bin_dir / "git", "echo 'fatal: unable to access https://github.com/' >&2; exit 128")  # no network
    plan = StartPlan(ait_version=VERSION, root=str(root), ait_python=sys.executable, agent=ECHO_ARGS)
    proc = run_script(start_script(plan), tmp_path, path=path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "agent"
    assert (root / "bootstrap.status").read_text().strip() == "128"
    assert "fatal: unable to access" in (root / "bootstrap.log").read_text()


def test_the_image_recipe_copies_every_package_and_runs_the_same_bootstrap() -> None:
    import tomllib

    root = Path(__file__).resolve().parents[3]
    dockerfile = (root / "docker" / "Dockerfile").read_text()
    lines = [line.strip() for line in dockerfile.splitlines() if line.strip() and not line.startswith("#")]
    packages = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    copied = {line.split()[1] for line in lines if line.startswith("COPY ")}
    assert set(packages["packages"]) <= copied, "docker/Dockerfile must COPY every package of the wheel"
    assert any("-m adapters.prime_rl.bootstrap /opt/ait" in line for line in lines)  # the pinned script, verbatim
    assert "/opt/ait/ait-venv" in dockerfile and StartPlan(ait_version="x").python() == "/opt/ait/ait-venv/bin/python"
    assert not any(line.startswith("ENTRYPOINT") for line in lines)  # Runpod's args is the container's command
