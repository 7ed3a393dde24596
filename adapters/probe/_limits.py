"""The validation probe's resource limits and stage timeouts (one frozen struct, overridable per validator).

The defaults fit a 2-core machine: importing ``verifiers.v1`` alone takes 5-9 CPU-seconds (up to ~20 s
of wall time when the machine is busy), so the start-up stage gets a generous wall timeout while each
stage that runs the agent's code gets a short one of its own.
"""

from __future__ import annotations

import msgspec

__all__ = ["ProbeLimits"]

_MiB = 1 << 20


class ProbeLimits(msgspec.Struct, frozen=True, kw_only=True):
    # rlimits applied inside the sandbox before any agent code runs
    cpu_s: int = 120  # RLIMIT_CPU: CPU-seconds for the whole child (SIGXCPU past it)
    memory_bytes: int = 3072 * _MiB  # RLIMIT_AS: address space per process
    nproc: int = 64  # RLIMIT_NPROC: processes + threads of the sandbox uid
    fsize_bytes: int = 32 * _MiB  # RLIMIT_FSIZE: largest file the child may write
    nofile: int = 256  # RLIMIT_NOFILE
    tmpfs_bytes: int = 128 * _MiB  # size of the sandbox's writable HOME and /tmp (bubblewrap only)
    # wall-clock timeouts, per stage (the child is killed, whole namespace included, when one passes)
    startup_s: float = 120.0  # interpreter start + verifiers import (no agent code yet)
    import_s: float = 30.0  # importing the agent's env package
    load_s: float = 60.0  # building and iterating the taskset
    tools_s: float = 30.0
    rubric_s: float = 60.0
    wall_s: float = 300.0  # the whole probe, all stages together

    def rlimits(self) -> dict[str, int]:
        """What the sandbox driver passes to ``resource.setrlimit`` (names of the ``resource`` module)."""
        return {
            "RLIMIT_CPU": self.cpu_s,
            "RLIMIT_AS": self.memory_bytes,
            "RLIMIT_NPROC": self.nproc,
            "RLIMIT_FSIZE": self.fsize_bytes,
            "RLIMIT_NOFILE": self.nofile,
        }

    def summary(self, nproc: int | None = None) -> str:
        return (
            f"cpu={self.cpu_s}s as={self.memory_bytes // _MiB}MiB nproc={nproc or self.nproc} "
            f"fsize={self.fsize_bytes // _MiB}MiB nofile={self.nofile}"
        )
