"""Keep freed tensor memory in the process: the allocation settings of every process that runs torch on a CPU.

glibc hands a large freed block back to the kernel (above its mmap threshold, or at the top of its heap above
its trim threshold), so the next forward pass of a tiny model faults the same activations in again, one
zero-filled 4 KiB page at a time. Scoring 128 hidden tasks on tiny-1.7b took 2.3M page faults and 5.4 of its
22.7 CPU-s in the kernel; the CPU replica's processes took 100M faults and 248 CPU-s of system time in one run
(``benchmarks/freed_memory.py`` measures it on the product's scoring code). Two settings keep that memory:

- torch's ``THP_MEM_ALLOC_ENABLE=1``: tensors of 2 MiB or more are 2 MiB-aligned and advised for transparent huge
  pages, one fault per 2 MiB instead of 512 (where the kernel's THP mode is ``madvise`` or ``always``);
- glibc's trim and mmap thresholds, fixed high: a freed block of up to 32 MiB (glibc's ceiling for the mmap
  threshold) stays in the heap for the next allocation instead of going back to the kernel.

Neither changes a computed value: the same kernels run on the same data, at addresses still 64-byte aligned
(tests/adapters/test_freed_memory.py compares sampled tokens and log-probs with and without). The cost is
resident memory held at the process's high-water mark instead of shrinking between passes.

torch reads its variable once, at its first allocation: every ``ait`` process (the engine, and the local pod agent,
which is ``ait pod-agent``) calls :func:`keep_freed_memory` before it imports torch. A setting the user made wins
(``THP_MEM_ALLOC_ENABLE=0`` turns the huge pages off; glibc's own ``GLIBC_TUNABLES`` keep its thresholds), and the
pod agent's scrubbed environment passes both variables on (:data:`SETTING_VARS`). The sandboxed training child does
not get them: forked from its zygote, it ran a replica-sized job's training 45% slower with them (7.4-7.5 against
10.9-11.7 CPU-s, ``benchmarks/cpu_job.py``, alternated on and off), while the same training in a plain process ran
19% faster; its environment stays the bare one of :func:`adapters.sandbox.child_env`.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["SETTING_VARS", "keep_freed_memory"]

_TRIM_THRESHOLD = 1 << 30  # keep up to 1 GiB of freed heap top: more than any CPU model here allocates in a pass
_MMAP_THRESHOLD = 32 << 20  # glibc's ceiling (HEAP_MAX_SIZE / 2 on 64-bit): a larger value is refused
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (<malloc.h>)

#: The environment variables through which a user overrides these settings.
SETTING_VARS = ("THP_MEM_ALLOC_ENABLE", "GLIBC_TUNABLES")


def keep_freed_memory() -> bool:
    """Apply the settings to this process; True when glibc took its thresholds (False off glibc: nothing to do).

    Call it before torch is imported: torch reads ``THP_MEM_ALLOC_ENABLE`` once. Idempotent.
    """
    if "torch" not in sys.modules:
        os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    if not sys.platform.startswith("linux") or "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        return False  # macOS has no mallopt thresholds; the user's own malloc tunables were applied at exec
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018  (only glibc has it: musl's mallopt is a no-op)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)) and bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD))
