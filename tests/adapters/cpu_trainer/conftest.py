"""The CPU trainer's tests: a module's jobs share this process's training zygote, stopped when the module ends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module", autouse=True)
def _close_training_zygotes() -> Iterator[None]:
    yield
    from adapters.cpu_trainer._warm import close_zygotes

    close_zygotes()  # a zygote left running would look like a leftover sandbox to later modules' checks
