"""The in-process pod agents (the simulated worker's): a work directory they made is theirs to remove."""

from __future__ import annotations

from pathlib import Path

from adapters.pod.inproc import InProcessAgents
from adapters.pod.standin import StandinTrainer


async def test_close_removes_the_work_directory_it_made_and_keeps_one_it_was_given(tmp_path: Path) -> None:
    made = InProcessAgents(lambda: StandinTrainer(steps=1, step_s=0.0))
    await made.health("sim://p1", "token")  # a pod's core: its directory is created under the work directory
    workdir = made._workdir
    assert workdir.is_dir() and any(workdir.iterdir())
    await made.close()
    assert not workdir.exists()

    given = InProcessAgents(lambda: StandinTrainer(steps=1, step_s=0.0), tmp_path / "agents")
    await given.health("sim://p1", "token")
    await given.close()
    assert (tmp_path / "agents").is_dir()
