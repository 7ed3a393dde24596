"""The warm training zygote: runs INSIDE bubblewrap, imports the training stack once, forks one confined child per job.

Started by :mod:`._warm` with the cold child's bubblewrap confinement (:func:`._confine.prepare_launch`'s
binds: no network, read-only system/Python/venv and project code packages, no project tree, no ``$HOME``, no
key, a scrubbed environment with ``AIT_EVAL_KEY_SEALED=1``) plus one read-write bind, the trainer's job
directory (the *spool*) at ``/sandbox/spool``, where each job's directory (its env and checkpoint copies, its
request, its output directory) appears as ``/sandbox/spool/<job>``. It imports torch, transformers, verifiers
and the trainer's own loop once; it never runs agent code itself.

The fork machinery is the validation probe's (``adapters/probe/zygote.py``, a self-contained script loaded
here by path): the same control protocol on fd 0 (``ready``, ``spawn`` with four fds, ``kill``), the same
self-test fork, the same three-process child (C1 builds new mount, pid, network, ipc, uts and cgroup
namespaces; C2 is pid 1 of the new pid namespace and kills everything in it when the trainer child exits;
C3 runs the child). Two pieces are this trainer's own:

- the child's mounts (:func:`_confine`): the job's ``base`` and ``env`` copies and ``request.json`` bound
  read-only at ``/sandbox/base``, ``/sandbox/env`` and ``/sandbox/request.json``, its ``out`` bound
  read-write at ``/sandbox/out`` (the cold child's paths, so the request is the same), the spool covered by an
  empty tmpfs (no other job is visible), a fresh ``/tmp``, ``/sandbox/home`` and devpts, a loopback of its own;
- the code C3 runs: :func:`adapters.cpu_trainer._child.main`, which applies the rlimits, ``PR_SET_NO_NEW_PRIVS``
  and the job's fresh uid before any agent code runs, exactly as in the cold child.

The four fds of a child: 0 ``/dev/null``, 1 and 2 the job's ``child.log``, 3 the status pipe (C2 writes the
child's wait status and CPU time there).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

__all__ = ["PRELOAD", "main"]

_SPOOL = "/sandbox/spool"
_INSIDE = "/sandbox"
# Library code every job needs, imported once here instead of once per job (agent code never is).
PRELOAD = (
    "torch",
    "transformers",
    "safetensors.torch",
    "verifiers",
    "verifiers.v1",
    "adapters.inproc",
    "adapters.tiny.model",
    "adapters.probe.sandbox_driver",
    "adapters.cpu_trainer._loop",
)
_RO = 1 | 2 | 4  # MS_RDONLY | MS_NOSUID | MS_NODEV
_BIND, _REMOUNT = 4096, 32


def _probe_zygote() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "probe" / "zygote.py"
    spec = importlib.util.spec_from_file_location("ait_probe_zygote", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _confine_with(z: ModuleType) -> object:
    def bind(src: str, dest: str, flags: int) -> None:
        z._mount(src, dest, None, _BIND)
        z._mount("none", dest, None, _REMOUNT | _BIND | flags)

    def confine(job: str, tmpfs_bytes: int) -> None:
        """C1, root in the zygote's namespaces: the job's own namespaces and mounts (see the docstring)."""
        z._call("prctl", 1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
        z._call("unshare", z._NEWNS | z._NEWPID | z._NEWNET | z._NEWIPC | z._NEWUTS | z._NEWCGROUP)
        z._mount("none", "/", None, z._MS_REC | z._MS_PRIVATE)  # nothing propagates to the zygote or a sibling
        if job:
            if os.path.dirname(job) != _SPOOL or os.path.islink(job):
                raise ValueError(f"job directory {job!r} is not a directory of the spool")
            for name in ("base", "env", "request.json"):
                bind(f"{job}/{name}", f"{_INSIDE}/{name}", _RO)
            bind(f"{job}/out", f"{_INSIDE}/out", 2 | 4)  # read-write, nosuid, nodev: bubblewrap's --bind
        z._tmpfs(_SPOOL, 4096, "0000")  # every other job's directory disappears
        held = [(path, os.open(path, os.O_PATH | os.O_DIRECTORY)) for path in z._trees_under_tmp()]
        z._tmpfs("/tmp", tmpfs_bytes, "1777")
        for path, fd in held:  # Python or the venv under /tmp: bound back, as the probe's zygote does
            os.makedirs(path, exist_ok=True)
            z._mount(f"/proc/self/fd/{fd}", path, None, _BIND | z._MS_REC)
            z._mount("none", path, None, _REMOUNT | _BIND | _RO)
            os.close(fd)
        z._tmpfs(f"{_INSIDE}/home", tmpfs_bytes, "0777")
        z._mount("devpts", "/dev/pts", "devpts", 2 | 8, "newinstance,ptmxmode=0666,mode=0620")
        z._loopback_up()

    return confine


def _run_child() -> None:
    """C3, in its namespaces: the cold child's own entry point (limits and uid first), then exit with its code."""
    from adapters.cpu_trainer._child import main as child_main

    sys.argv = ["-c", f"{_INSIDE}/request.json"]  # what the cold child's interpreter has
    try:
        code = child_main(sys.argv[1:])
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def main() -> None:
    z = _probe_zygote()
    # The probe's machinery with this trainer's mounts, child and imports (module globals, looked up per call).
    setattr(z, "_confine", _confine_with(z))  # noqa: B010
    setattr(z, "_load_driver", lambda: SimpleNamespace(main=_run_child))  # noqa: B010
    setattr(z, "_PRELOAD", PRELOAD)  # noqa: B010
    z.main()
