"""adapters.prime_rl.classify on recorded prime-rl output (fixtures/prime_rl/logs: real `rl --dry-run` runs of
the pinned prime-rl's launcher on CPU, paths rewritten) and on log lines in prime-rl's formats."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.prime_rl.classify import classify_dry_run, classify_run, is_oom, last_error_line, strip_ansi

LOGS = Path(__file__).resolve().parents[3] / "fixtures" / "prime_rl" / "logs"


def recorded(name: str) -> str:
    return (LOGS / f"dryrun_{name}.txt").read_text()


def test_recorded_batch_group_mismatch_is_a_config_error() -> None:
    f = classify_dry_run(recorded("bad_group"), env_module="calc_train")
    assert f.reason == "config_error"
    assert "Batch size must be divisible" in f.detail and "--orchestrator" in f.detail


def test_recorded_unknown_optimizer_is_a_config_error_listing_the_tags() -> None:
    f = classify_dry_run(recorded("bad_opt"), env_module="calc_train")
    assert f.reason == "config_error" and "'lion'" in f.detail and "--trainer.optim" in f.detail


def test_recorded_unknown_env_id_is_a_config_error() -> None:
    f = classify_dry_run(recorded("bad_env"), env_module="calc_trainx")
    assert f.reason == "config_error"
    assert "taskset 'calc-trainx' not found (tried to import 'calc_trainx')" in f.detail


def test_recorded_env_raising_on_import_is_an_env_crash() -> None:
    f = classify_dry_run(recorded("crash"), env_module="crash_env")
    assert f.reason == "env_crash" and "RuntimeError: boom at import" in f.detail
    # The same traceback is not blamed on an env that does not appear in it.
    assert classify_dry_run(recorded("crash"), env_module="other_env").reason == "config_error"


ANSI_OOM = "\x1b[2m10:00:01\x1b[0m \x1b[31m\x1b[1m  ERROR\x1b[0m torch.OutOfMemoryError: CUDA out of memory. Tried to"


def run(code: int = 1, timed_out: bool = False, env_logs: dict[str, str] | None = None, **logs: str):
    named = {k.replace("_log", ".log"): v for k, v in logs.items()}
    return classify_run(code, timed_out=timed_out, logs=named, env_logs=env_logs or {}, env_module="calc_train")


def test_timeout_wins_over_everything() -> None:
    assert run(timed_out=True, trainer_log=ANSI_OOM).reason == "timeout"


def test_oom_in_any_log_through_ansi_codes() -> None:
    f = run(trainer_log="ok\n" + ANSI_OOM, rl="Error: Trainer failed with exit code 1")
    assert f.reason == "oom" and f.detail.startswith("trainer.log: ") and "\x1b" not in f.detail
    assert run(inference_log="ValueError: No available memory for the cache blocks.").reason == "oom"


def test_env_server_failure_names_the_env_error() -> None:
    f = run(
        rl="10:00:05   ERROR Error: Train env server calc-train failed with exit code 1",
        env_logs={"envs/train/calc-train.log": "Traceback (most recent call last):\nKeyError: 'answer'"},
    )
    assert (f.reason, f.detail) == ("env_crash", "envs/train/calc-train.log: KeyError: 'answer'")


def test_traceback_ending_in_the_env_module_is_an_env_crash() -> None:
    tb = 'Traceback (most recent call last):\n  File "/site/calc_train/taskset.py", line 3, in load\nValueError: bad'
    assert run(orchestrator_log=tb).reason == "env_crash"


def test_host_sigkill_without_deadline_is_oom_else_trainer_crash() -> None:
    assert run(code=-9).reason == "oom"
    f = run(rl="Error: Trainer failed with exit code 1", trainer_log="RuntimeError: NCCL error: unhandled")
    assert f.reason == "trainer_crash"
    assert f.detail == "Error: Trainer failed with exit code 1; trainer.log: RuntimeError: NCCL error: unhandled"
    assert run(code=3).detail == "rl exited with code 3 and no error in its logs"


def test_the_first_failed_process_decides_between_env_and_trainer() -> None:
    # The env logged a rollout's traceback and carried on; the trainer then died of its own error.
    env_logs = {"envs/train/calc-train.log": "Traceback (most recent call last):\nKeyError: 'answer'"}
    f = run(
        rl="ERROR Error: Trainer failed with exit code 1", trainer_log="RuntimeError: NCCL timeout", env_logs=env_logs
    )
    assert (f.reason, f.detail) == (
        "trainer_crash",
        "ERROR Error: Trainer failed with exit code 1; trainer.log: RuntimeError: NCCL timeout",
    )
    # The orchestrator died and the env left the evidence: the env.
    f = run(rl="Error: Orchestrator failed with exit code 1", env_logs=env_logs)
    assert (f.reason, f.detail) == ("env_crash", "envs/train/calc-train.log: KeyError: 'answer'")
    f = run(rl="Error: Inference failed with exit code 1", inference_log="RuntimeError: engine core died")
    assert f.reason == "trainer_crash" and "inference.log: RuntimeError: engine core died" in f.detail


def test_step_lines_with_error_rates_are_not_errors() -> None:
    step = "Step 3 |   2.1s | Reward 0.4500 | Trainable 4/8 (50.0%) | Error 0.0% | Cancelled 0.0%"
    assert last_error_line(step) is None
    assert run(code=1, orchestrator_log=step).reason == "trainer_crash"


@given(st.text(max_size=200))
def test_is_oom_is_stable_under_ansi_wrapping(text: str) -> None:
    assert is_oom(text) == is_oom(f"\x1b[31m{text}\x1b[0m") or "\x1b" in text
    assert strip_ansi(f"\x1b[1m{text}\x1b[0m") == strip_ansi(text)


@pytest.mark.parametrize(
    "line",
    ["torch.OutOfMemoryError: CUDA out of memory.", "RuntimeError: CUBLAS_STATUS_ALLOC_FAILED when calling"],
)
def test_oom_signatures(line: str) -> None:
    assert is_oom(line)
