"""The trainer registry and the stand-in trainer."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.pod.standin import StandinTrainer
from adapters.pod.trainers import TRAINERS, load_trainer, parse_options
from handlers.episode.bundle import make_bundle, unpack_bundle
from handlers.ports.inner_trainer import JobBundle, Progress
from tests.fakes.inner import FakeInnerTrainer


def bundle_dir(tmp_path: Path, files: dict[str, bytes]) -> JobBundle:
    root = tmp_path / "b"
    root.mkdir(parents=True)
    unpack_bundle(make_bundle(files, b"{}"), root)
    return JobBundle(job_id="j", family="calc_chain", root=str(root))


async def run(trainer: StandinTrainer, job: JobBundle) -> tuple[object, list[Progress]]:
    seen: list[Progress] = []

    async def progress(p: Progress) -> None:
        seen.append(p)

    return await trainer.run(job, progress), seen


async def test_standin_scores_are_a_function_of_the_bundle(tmp_path: Path) -> None:
    a = bundle_dir(tmp_path / "1", {"job.toml": b"[prime_rl]\nlr = 1\n"})
    b = bundle_dir(tmp_path / "2", {"job.toml": b"[prime_rl]\nlr = 1\n"})
    c = bundle_dir(tmp_path / "3", {"job.toml": b"[prime_rl]\nlr = 2\n"})
    t = StandinTrainer(steps=3, step_s=0.0)
    (ra, pa), (rb, _), (rc, _) = [await run(t, j) for j in (a, b, c)]
    assert ra.ok and (ra.pre, ra.post) == (rb.pre, rb.post)  # type: ignore[attr-defined]
    assert (ra.pre, ra.post) != (rc.pre, rc.post)  # type: ignore[attr-defined]
    assert 0.0 <= ra.pre <= 1.0 and 0.0 <= ra.post <= 1.0  # type: ignore[attr-defined]
    assert [p.phase for p in pa] == ["pre_score", "train", "train", "train", "post_score"]
    assert [p.step for p in pa if p.phase == "train"] == [1, 2, 3]
    assert "standin" in ra.sampling  # type: ignore[attr-defined]


async def test_standin_needs_a_job_toml(tmp_path: Path) -> None:
    res, _ = await run(StandinTrainer(step_s=0.0), bundle_dir(tmp_path, {"env.py": b"x"}))
    assert (res.ok, res.failure) == (False, "config_error")  # type: ignore[attr-defined]
    res, _ = await run(StandinTrainer(step_s=0.0), bundle_dir(tmp_path / "x", {"job.toml": b"[[["}))
    assert res.failure == "config_error" and "job.toml" in res.detail  # type: ignore[attr-defined]


def test_trainers_load_by_name_or_module_factory() -> None:
    standin = load_trainer("standin", {"steps": "7", "step_s": "0"})
    assert isinstance(standin, StandinTrainer) and standin.steps == 7
    fake = load_trainer("tests.fakes.inner:make_trainer", {"seconds": "0.5"})
    assert isinstance(fake, FakeInnerTrainer) and fake.seconds == 0.5
    assert "standin" in TRAINERS


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("nope", {}, "unknown trainer 'nope'"),
        ("no.such.module:make", {}, "cannot load"),
        ("standin", {"stepz": "1"}, "unknown option"),
        ("standin", {"steps": "0"}, "steps must be >= 1"),
    ],
)
def test_bad_trainer_choices_say_what_is_wrong(name: str, options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_trainer(name, options)


def test_trainer_options_parse() -> None:
    assert parse_options(["a=1", "b=x=y"]) == {"a": "1", "b": "x=y"}
    with pytest.raises(ValueError, match="key=value"):
        parse_options(["novalue"])
