"""adapters.vllm.traces on a recorded verifiers 0.4.0 `vf-eval` output and on constructed episodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.vllm.traces import TracesError, parse_traces

RECORDED = Path(__file__).resolve().parents[3] / "fixtures" / "prime_rl" / "traces" / "vf_eval_calc_chain_3.jsonl"


def test_recorded_eval_solved_nonsense_and_server_error() -> None:
    # Recorded: task 0 solved by the reference policy, task 1 answered with nonsense, task 2 got HTTP 500s.
    out = parse_traces(RECORDED)
    assert out.n == 3 and out.errored == 1
    by_task = dict(zip(out.task_ids, out.rewards, strict=True))
    assert by_task == {"calc_chain/hidden/0": 1.0, "calc_chain/hidden/1": 0.0, "calc_chain/hidden/2": 0.0}
    assert out.score == pytest.approx(1 / 3)
    assert out.error_types == {"ProviderError": 1}
    assert out.first_error.startswith("ProviderError: upstream 500")
    assert out.error_fraction == pytest.approx(1 / 3)


def episode(rewards: dict[str, tuple[float | None, float]], ok: bool = True, trace_ok: bool = True) -> dict:
    return {
        "id": "e",
        "ok": ok,
        "errors": [],
        "traces": [
            {
                "ok": trace_ok,
                "errors": [] if trace_ok else [{"type": "ToolsetError", "message": "tool server died"}],
                "stop_condition": "agent_completed",
                "rewards": {k: {"score": s, "weight": w} for k, (s, w) in rewards.items()},
                "task": {"data": {"id": "t"}},
            }
        ],
    }


def write(tmp_path: Path, episodes: list[dict]) -> Path:
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    return path


def test_reward_is_the_weighted_sum_and_unscored_counts_as_errored(tmp_path: Path) -> None:
    out = parse_traces(
        write(
            tmp_path,
            [
                episode({"a": (1.0, 0.5), "b": (0.5, 1.0)}),
                episode({"a": (None, 1.0)}),
                episode({"a": (1.0, 1.0)}, trace_ok=False),
                episode({"a": (1.0, 1.0)}, ok=False),
            ],
        )
    )
    assert out.rewards == [1.0, 0.0, 0.0, 0.0]
    assert out.errored == 3 and out.error_types == {"ToolsetError": 1, "not_ok": 2}


def test_bad_lines_name_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(episode({"a": (1.0, 1.0)})) + "\n{oops\n")
    with pytest.raises(TracesError, match=r"traces\.jsonl:2: not JSON"):
        parse_traces(path)
    path.write_text('{"id": 1}\n')
    with pytest.raises(TracesError, match=r":1: not a verifiers episode"):
        parse_traces(path)
    with pytest.raises(TracesError, match="cannot read"):
        parse_traces(tmp_path / "absent.jsonl")


@given(st.lists(st.tuples(st.floats(0, 1), st.booleans()), max_size=20))
def test_score_is_the_mean_with_errored_episodes_at_zero(items: list[tuple[float, bool]]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        out = parse_traces(write(Path(d), [episode({"r": (s, 1.0)}, ok=ok) for s, ok in items]))
    expected = [s if ok else 0.0 for s, ok in items]
    assert out.n == len(items) and out.errored == sum(not ok for _, ok in items)
    assert out.score == pytest.approx(sum(expected) / len(expected) if expected else 0.0)
