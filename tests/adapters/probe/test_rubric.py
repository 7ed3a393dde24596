"""Rubric cases (gold and wrong replies, reference tool calls) and the verdict on their rewards."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from adapters.probe._rubric import judge_rubric, rubric_cases, wrong_answer
from families import get_family, normalise_number

CALC_TOOLS = {"add", "sub", "mul", "div"}


def _load_reply(n: int) -> dict[str, Any]:
    family = get_family("calc_chain")
    tasks = [family.generate("train", s) for s in range(n)]
    items = [{"prompt": t.prompt, "answer": t.answer} for t in tasks]
    dumps = [{"id": t.id, "prompt": t.prompt, "answer": t.answer, "world": t.world} for t in tasks]
    return {"items": items, "dumps": dumps}


def _result(gold: float | None, wrong: float | None, error: str = "") -> dict[str, Any]:
    return {"gold": {"reward": gold, "errors": [error] if error else []}, "wrong": {"reward": wrong, "errors": []}}


def test_cases_carry_the_reference_solver_calls_and_both_replies() -> None:
    reply = _load_reply(10)
    cases = rubric_cases(reply, "calc_chain", CALC_TOOLS, 4)
    assert len(cases) == 4 and cases[0]["index"] == 0 and cases[-1]["index"] == 9
    family = get_family("calc_chain")
    for case in cases:
        item = reply["items"][case["index"]]
        assert case["replies"]["gold"] == f"<answer>{item['answer']}</answer>"
        assert case["replies"]["wrong"] != case["replies"]["gold"]
        task = family.generate("train", case["index"])
        expected = [{"name": s.tool, "arguments": s.arguments} for s in family.solve(task) if s.tool]
        assert case["calls"] == expected


def test_no_calls_when_the_data_does_not_fit_the_solver() -> None:
    reply = _load_reply(3)
    for dump in reply["dumps"]:
        dump.pop("world")
    assert all(c["calls"] == [] for c in rubric_cases(reply, "calc_chain", CALC_TOOLS, 3))
    reply = _load_reply(3)
    reply["items"][0]["answer"] = "123456"  # the solver disagrees with the task's answer
    reply["dumps"][0]["answer"] = "123456"
    assert rubric_cases(reply, "calc_chain", CALC_TOOLS, 3)[0]["calls"] == []
    assert all(c["calls"] == [] for c in rubric_cases(_load_reply(3), "calc_chain", {"add"}, 3))


@given(st.text(max_size=12), st.lists(st.text(max_size=12), max_size=4))
@example("²", [])  # a digit to str.isdigit() that int() refuses: once raised ValueError in the engine process
@example("-٣", [])  # a decimal digit of another script: int() takes it
def test_wrong_answer_always_differs_from_the_answer(answer: str, others: list[str]) -> None:
    wrong = wrong_answer(answer, others)
    assert wrong and normalise_number(wrong) != normalise_number(answer)


def _cases(n: int) -> list[dict[str, Any]]:
    return [
        {"index": i, "calls": [], "replies": {"gold": "<answer>1</answer>", "wrong": "<answer>2</answer>"}}
        for i in range(n)
    ]


def test_clear_separation_passes() -> None:
    ok, detail = judge_rubric(_cases(4), [_result(1.0, 0.0)] * 4)
    assert ok and "mean reward 1 for correct answers vs 0" in detail


def test_no_separation_or_small_gap_fails() -> None:
    ok, detail = judge_rubric(_cases(4), [_result(1.0, 1.0)] * 4)
    assert not ok and "cannot tell" in detail
    ok, _ = judge_rubric(_cases(4), [_result(1.0, 0.8)] * 4)  # always higher, but by too little
    assert not ok
    ok, _ = judge_rubric(_cases(5), [_result(1.0, 0.0)] * 3 + [_result(0.0, 1.0)] * 2)  # wins 3/5 < 80%
    assert not ok
    ok, detail = judge_rubric(_cases(2), [_result(0.0, 0.0)] * 2)
    assert not ok and "0 for correct and wrong answers alike" in detail


def test_scoring_errors_fail_with_a_hint_for_sync_rewards() -> None:
    err = "TaskError: task T scoring: TypeError: An asyncio.Future, a coroutine or an awaitable is required"
    ok, detail = judge_rubric(_cases(2), [_result(None, None, err)] * 2)
    assert not ok and "must be `async def`" in detail and "task #0" in detail


@given(st.lists(st.tuples(st.floats(-5, 5), st.floats(-5, 5)), min_size=1, max_size=8))
def test_verdict_is_invariant_to_positive_reward_scaling(pairs: list[tuple[float, float]]) -> None:
    """A reward weighted x3 tells answers apart exactly as well as the unweighted one."""
    cases = _cases(len(pairs))
    plain, _ = judge_rubric(cases, [_result(g, w) for g, w in pairs])
    scaled, _ = judge_rubric(cases, [_result(3 * g, 3 * w) for g, w in pairs])
    assert plain == scaled
