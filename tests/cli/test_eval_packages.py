"""The controller builds each family's hidden eval package once, however many pods ask for it at once."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import families.eval_env
from cli.worker_wiring import eval_packages


def test_pods_asking_at_once_share_one_build_and_a_failure_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    builds: list[str] = []
    lock = threading.Lock()
    fail = {"ledger"}

    def pack(family: str) -> bytes:
        with lock:
            builds.append(family)
        time.sleep(0.05)  # long enough for every caller to arrive while the first build runs
        if family in fail:
            fail.discard(family)
            raise RuntimeError("disk full")
        return family.encode()

    monkeypatch.setattr(families.eval_env, "pack_eval_package", pack)
    package = eval_packages()

    async def main() -> None:
        got = await asyncio.gather(*(package("calc_chain") for _ in range(5)))
        assert got == [b"calc_chain"] * 5
        failed = await asyncio.gather(*(package("ledger") for _ in range(3)), return_exceptions=True)
        assert all(isinstance(f, RuntimeError) for f in failed)
        assert await package("ledger") == b"ledger"  # built again after the failure
        assert await package("calc_chain") == b"calc_chain"  # cached

    asyncio.run(main())
    assert sorted(builds) == ["calc_chain", "ledger", "ledger"]
