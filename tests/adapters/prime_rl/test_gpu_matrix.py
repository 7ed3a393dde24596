"""benchmarks/gpu_matrix.py: no GPU -> plan and exit 2; the matrix rows and ladder from stand-in jobs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from adapters.prime_rl.runner import PrimeRLRunner

from .conftest import ROOT, SkillScorer, eval_source_for, standin_settings

spec = importlib.util.spec_from_file_location("gpu_matrix", ROOT / "benchmarks" / "gpu_matrix.py")
assert spec is not None and spec.loader is not None
gm = importlib.util.module_from_spec(spec)
sys.modules["gpu_matrix"] = gm
spec.loader.exec_module(gm)


def test_without_a_gpu_it_prints_the_plan_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(gm, "detect_gpus", list)
    assert gm.main(["--out", str(tmp_path / "m.json"), "--steps", "3"]) == 2
    out = capsys.readouterr().out
    assert "plan: 2 job(s)" in out and "'max_steps': 3" in out and "no GPU found" in out
    assert not (tmp_path / "m.json").exists()


def r(gpu: str, model: str, usd: float | None, ok: bool = True) -> dict:
    return {"gpu_type": gpu, "gpus": 2, "model": model, "ok": ok, "usd_per_job": usd}


def test_merge_replaces_same_rows_and_orders_the_ladder_by_cost_per_job() -> None:
    first = gm.merge(None, [r("A40", "m", 0.5), r("H100", "m", 0.9)], {"j": 1}, "d1")
    assert first["version"] == 1 and first["ladder"] == {"m": ["A40", "H100"]}
    second = gm.merge(first, [r("A40", "m", 1.2), r("4090", "m", None), r("A5000", "m", 0.1, ok=False)], {"j": 1}, "d2")
    assert second["version"] == 2 and len(second["rows"]) == 4
    assert second["ladder"] == {"m": ["H100", "A40"]}  # failed and unpriced rows are not rungs


async def test_run_matrix_measures_a_standin_job(tmp_path: Path, eval_pkg_root: Path) -> None:
    def make_runner(work: Path) -> PrimeRLRunner:
        settings = standin_settings(tmp_path)
        return PrimeRLRunner(settings, scorer=SkillScorer(), eval_source=eval_source_for(eval_pkg_root))

    rows = await gm.run_matrix(
        ["Qwen/Qwen3-0.6B"],
        steps=3,
        gpu_type="NVIDIA A40",
        gpus=2,
        make_runner=make_runner,
        usd_per_hour=0.98,
        work=tmp_path / "w",
        today="2026-11-30",
    )
    (row,) = rows
    assert row["ok"] and row["model"] == "Qwen/Qwen3-0.6B" and row["post"] == pytest.approx(0.6)
    assert row["usd_per_job"] == pytest.approx(round(0.98 * row["total_s"] / 3600, 4))
    assert row["peak_memory_gib"] == pytest.approx(11.8) and row["train_s"] > 0
