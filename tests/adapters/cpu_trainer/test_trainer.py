"""The CPU trainer as the inner-trainer port: a job bundle in, a classified JobResult out, progress on the way.

A randomly initialised tiny model (saved to a temporary checkpoint directory that job.toml names) keeps
these tests fast and independent of the committed checkpoints; whether training *helps* is measured with
the real checkpoints in test_cpu_trainer_direction.py and benchmarks/cpu_job.py.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from handlers.ports.inner_trainer import InnerTrainer, JobBundle, Progress
from tests.contracts.inner_trainer_contract import InnerTrainerContract, Outcome, run_job

if TYPE_CHECKING:
    from adapters.cpu_trainer import CpuTrainer
    from adapters.tiny.score_memo import ScoreMemo

# find_spec, not importorskip: collection must not import verifiers (issue 18).
pytestmark = pytest.mark.skipif(importlib.util.find_spec("verifiers") is None, reason="verifiers is not installed")


ROOT = Path(__file__).resolve().parents[3]
ENVS = ROOT / "fixtures" / "envs"


@pytest.fixture(scope="module")
def random_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from adapters.tiny.model import MODEL_SPECS, Checkpoint, build_model, save_checkpoint
    from adapters.tiny.pretrain import build_tokenizer

    tokenizer = build_tokenizer(0, per_family=20, vocab_size=300)
    ckpt = Checkpoint("random-tiny", build_model(MODEL_SPECS["tiny-0.6b"], tokenizer, 0), tokenizer)
    return save_checkpoint(ckpt, tmp_path_factory.mktemp("ckpt") / "random-tiny", {"name": "random-tiny"})


def bundle(
    tmp_path: Path, model: str, env_id: str = "family-reference", env_path: str = "", **extra: object
) -> JobBundle:
    """A job bundle in ``tmp_path``; the env package lies inside it (the trainer refuses one outside)."""
    table = {"model": model, "learning_rate": 1e-5, "max_steps": 2, "batch_size": 4, "group_size": 2, "max_tokens": 16}
    table |= extra
    if not env_path:
        shutil.copytree(ENVS / "family_reference", tmp_path / "env" / "family_reference")
        env_path = "env/family_reference"
    lines = ["[prime_rl]", *(f"{k} = {v!r}".replace("'", '"') for k, v in table.items())]
    lines += ["", "[env]", f'id = "{env_id}"', f'path = "{env_path}"', "num_tasks = 20"]
    (tmp_path / "job.toml").write_text("\n".join(lines) + "\n")
    return JobBundle(job_id="job-1", family="calc_chain", root=str(tmp_path))


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory: pytest.TempPathFactory, random_checkpoint: Path) -> Outcome:
    """The one training job of this module, shared by the test below and the port contract (the expensive part
    is starting the confined training child)."""
    from adapters.cpu_trainer import CpuTrainer

    return run_job(CpuTrainer(eval_limit=8), bundle(tmp_path_factory.mktemp("job"), str(random_checkpoint)))


def test_a_job_runs_pre_score_training_post_score_with_progress_and_timings(reference_run: Outcome) -> None:
    result, seen = reference_run.result, reference_run.progress
    assert result.ok, result.detail
    assert result.pre is not None and result.post is not None and 0.0 <= result.pre <= 1.0
    assert {"setup", "pre_score", "rollouts", "learning", "post_score", "total"} <= set(result.timings)
    assert result.train_seconds == pytest.approx(result.timings["rollouts"] + result.timings["learning"], abs=1e-2)
    assert "n=8" in result.sampling and "T=1" in result.sampling
    phases = [p.phase for p in seen]
    assert phases[0] == "pre_score" and phases[-1] == "post_score"
    steps = [p for p in seen if p.phase == "train"]
    assert [p.step for p in steps] == [1, 2] and all(p.total_steps == 2 and p.reward is not None for p in steps)
    assert result.metrics["rollouts"] == 8.0 and "learning_rate 1e-05 x 10" in result.detail
    # Training ran in a confined child process, which this process only heard from through its output.
    assert result.isolation in ("bwrap", "unshare", "none")
    assert f"training isolation: {result.isolation}" in result.detail
    assert result.timings["train_setup"] > 0
    assert result.timings["train_cpu"] > 0  # the child's own CPU time, as it reported it


class TestCpuTrainerContract(InnerTrainerContract):
    """The inner-trainer port's contract, on the job above."""

    def make_trainer(self, tmp: Path, request: pytest.FixtureRequest) -> InnerTrainer:
        from adapters.cpu_trainer import CpuTrainer

        return CpuTrainer(eval_limit=8)

    def good_bundle(self, tmp: Path, request: pytest.FixtureRequest) -> JobBundle:
        return bundle(tmp, str(request.getfixturevalue("random_checkpoint")))

    def bad_bundle(self, tmp: Path, request: pytest.FixtureRequest) -> JobBundle:
        (tmp / "job.toml").write_text("[prime_rl]\nmodel = 3\n")
        return JobBundle(job_id="job-bad", family="calc_chain", root=str(tmp))

    @pytest.fixture(scope="class")
    @classmethod
    def ok_run(cls, reference_run: Outcome) -> Outcome:  # the same job as good_bundle's: trained once
        return reference_run


async def noop(p: Progress) -> None:
    return None


async def test_a_broken_job_toml_is_a_config_error(tmp_path: Path) -> None:
    from adapters.cpu_trainer import CpuTrainer

    (tmp_path / "job.toml").write_text("[prime_rl]\nmodel = 3\n")
    result = await CpuTrainer().run(JobBundle(job_id="j", family="calc_chain", root=str(tmp_path)), noop)
    assert (result.ok, result.failure) == (False, "config_error")
    assert "job.toml" in result.detail


async def test_an_unknown_model_is_a_config_error(tmp_path: Path) -> None:
    from adapters.cpu_trainer import CpuTrainer

    result = await CpuTrainer().run(bundle(tmp_path, "Qwen/Qwen3-72B"), noop)
    assert (result.ok, result.failure) == (False, "config_error")
    assert "Qwen/Qwen3-72B" in result.detail


async def test_an_env_that_does_not_load_is_an_env_crash(tmp_path: Path, random_checkpoint: Path) -> None:
    from adapters.cpu_trainer import CpuTrainer

    env = tmp_path / "env" / "broken_env"
    env.mkdir(parents=True)
    (env / "__init__.py").write_text("raise RuntimeError('import-time crash')\n")
    result = await CpuTrainer(eval_limit=4).run(bundle(tmp_path, str(random_checkpoint), "broken-env", "env"), noop)
    assert (result.ok, result.failure) == (False, "env_crash")
    assert "import-time crash" in result.detail


async def test_an_env_path_outside_the_bundle_is_a_config_error(tmp_path: Path, random_checkpoint: Path) -> None:
    from adapters.cpu_trainer import CpuTrainer

    (tmp_path / "job").mkdir()
    job = bundle(tmp_path / "job", str(random_checkpoint), env_path=str(ENVS / "family_reference"))
    result = await CpuTrainer().run(job, noop)
    assert (result.ok, result.failure) == (False, "config_error")
    assert "outside the job bundle" in result.detail


def test_the_pod_agent_factory_reads_typed_options_and_refuses_unknown_ones() -> None:
    from adapters.cpu_trainer import make_trainer

    trainer = make_trainer({"seed": "3", "threads": "2", "eval_limit": "50", "kl_coef": "0.01"})
    assert (trainer.seed, trainer.threads, trainer.eval_limit, trainer.kl_coef) == (3, 2, 50, 0.01)
    with pytest.raises(ValueError, match="unknown option"):
        make_trainer({"sede": "3"})
    with pytest.raises(ValueError, match="threads='two' is not a int"):
        make_trainer({"threads": "two"})
    assert make_trainer({}).child_path == "warm" and make_trainer({"child_path": "cold"}).child_path == "cold"
    with pytest.raises(ValueError, match="child_path='tepid'; expected one of"):
        make_trainer({"child_path": "tepid"})


async def test_turn_seeded_requests_get_a_stable_seed_per_rollout_and_turn() -> None:
    from adapters.cpu_trainer._collect import TurnSeeded, rollout_seeds
    from adapters.openai_server import ChatRequest, Message, Reply

    seeds: list[int | None] = []

    class Inner:
        async def respond(self, request: ChatRequest) -> Reply:
            seeds.append(request.seed)
            return Reply(content="ok")

    policy = TurnSeeded(Inner())  # type: ignore[arg-type]
    first = [Message(role="user", content="q")]
    second = [*first, Message(role="assistant", content="a"), Message(role="user", content="q2")]
    for seed, messages in ((5, first), (5, second), (5, first), (None, first)):
        await policy.respond(ChatRequest(model="m", messages=messages, seed=seed))
    assert seeds[0] == seeds[2] != seeds[1] and seeds[3] is None
    assert rollout_seeds(0, 1, 4) == rollout_seeds(0, 1, 4) and len(set(rollout_seeds(0, 1, 4))) == 4
    assert rollout_seeds(0, 1, 4) != rollout_seeds(0, 2, 4)


def test_collapse_signature_needs_improbable_zero_reward_or_new_malformation() -> None:
    from adapters.cpu_trainer._collect import BatchStats
    from adapters.cpu_trainer._loop import _collapsed
    from adapters.cpu_trainer._settings import CpuTrainSettings

    s = CpuTrainSettings(model="m", learning_rate=1e-4, max_steps=1, batch_size=8, group_size=4)

    def batch(reward_max: float, malformed: float) -> BatchStats:
        return BatchStats(
            rollouts=64,
            reward_mean=reward_max / 2,
            reward_max=reward_max,
            malformed=malformed,
            errors=0.0,
            signal_groups=0,
            turns_mean=3.0,
        )

    assert _collapsed(batch(0.0, 0.0), [0.3, 0.4], 0.0, s)  # zero reward after a 35% success rate
    assert not _collapsed(batch(0.0, 0.0), [0.05, 0.02], 0.0, s)  # a weak base scores 0 by chance
    assert _collapsed(batch(1.0, 0.8), [0.3], 0.1, s)  # suddenly mostly malformed
    assert not _collapsed(batch(1.0, 0.8), [0.3], 0.7, s)  # malformed from the start: nothing collapsed


async def test_a_collapsed_batch_rolls_back_to_the_last_healthy_weights(
    tmp_path: Path, random_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import copy

    import torch

    from adapters.cpu_trainer import CpuTrainSettings, EpisodeSample, TurnSample, _loop, train
    from adapters.inproc import load_env
    from adapters.tiny.generate import completion_logprobs
    from adapters.tiny.model import load_checkpoint

    ckpt = load_checkpoint(random_checkpoint)
    schedule = iter([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0], [1.0, 0.0]])  # mean rewards 0.5, 0.5, 0 (collapse), 0.5
    weights: list[dict[str, torch.Tensor]] = []

    async def fake_collect(runner, policy, tasks, group_size, seeds=None):  # type: ignore[no-untyped-def]
        weights.append(copy.deepcopy(ckpt.model.state_dict()))
        prompt, completions = [1, 2, 3], [[4, 5], [6, 7]]
        with torch.no_grad():
            lps = completion_logprobs(ckpt.model, [prompt, prompt], completions)
        rewards = next(schedule)
        episodes = [
            EpisodeSample(group=0, reward=r, turns=[TurnSample(prompt_ids=prompt, token_ids=c, logprobs=lp.tolist())])
            for r, c, lp in zip(rewards, completions, lps, strict=True)
        ]
        results = [type("R", (), {"ok": True, "num_turns": 1, "errors": []})() for _ in episodes]
        return episodes, results

    monkeypatch.setattr(_loop, "collect", fake_collect)
    env = load_env("family-reference", path=ENVS / "family_reference", config={"num_tasks": 4})
    settings = CpuTrainSettings(model="m", learning_rate=1e-2, max_steps=4, batch_size=2, group_size=2, epochs=1)
    report = await train(ckpt, env, settings)
    assert [s.action for s in report.steps] == ["update", "update", "rollback", "update"]
    assert report.rollbacks == 1 and report.steps[3].learning_rate == pytest.approx(settings.learning_rate / 2)
    # After the rollback the model is what it was before the last healthy update (the snapshot of step 2).
    assert not all(torch.equal(weights[1][k], v) for k, v in weights[2].items())
    assert all(torch.equal(weights[1][k], v) for k, v in weights[3].items())


def _faked_training(monkeypatch: pytest.MonkeyPatch, weights: Path) -> list[str]:
    """Training faked (the child "returns" ``weights``) and the hidden eval counted: the names scored, in order."""
    import adapters.tiny.scorer
    from adapters.cpu_trainer import _trainer
    from adapters.cpu_trainer._loop import TrainReport
    from adapters.cpu_trainer._supervise import ChildOutcome

    scored: list[str] = []
    real_score = adapters.tiny.scorer.score_hidden

    def counting_score(ckpt, family, **kwargs):  # type: ignore[no-untyped-def]
        scored.append(ckpt.name)
        return real_score(ckpt, family, **kwargs)

    async def fake_train(**kwargs: object) -> ChildOutcome:
        report = TrainReport(steps=[], stop_reason="max_steps", rollbacks=0, rollout_seconds=0.0, learn_seconds=0.0)
        return ChildOutcome(
            report=report, weights=weights, isolation="none", note="", uid=None, rlimits={}, setup_seconds=0.0,
            wall_seconds=0.0,
        )  # fmt: skip

    monkeypatch.setattr(adapters.tiny.scorer, "score_hidden", counting_score)
    monkeypatch.setattr(_trainer, "train_in_child", fake_train)
    return scored


def _nudged_weights(base: Path, out: Path, by: float = 1e-3) -> Path:
    """The base checkpoint's weights with one tensor moved by ``by``: a "trained" model unlike its base."""
    import torch
    from safetensors.torch import save_model

    from adapters.tiny.model import load_checkpoint

    ckpt = load_checkpoint(base)
    with torch.no_grad():
        next(iter(ckpt.model.parameters())).add_(by)
    save_model(ckpt.model, str(out))
    return out


def _pod(memo: ScoreMemo | None = None) -> CpuTrainer:
    """A trainer as a pod has it (no child runs in these tests: training is faked, so no zygote either)."""
    from adapters.cpu_trainer import CpuTrainer

    return CpuTrainer(eval_limit=2, unsafe_no_sandbox=True, child_path="cold", score_memo=memo)


async def test_the_same_weights_are_scored_once_per_pod(
    tmp_path: Path, random_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The base's hidden-eval score is the same for every job that starts from it, and trained weights equal to
    weights scored before score the same (same tasks, same seed): the pod's second job takes both; other trained
    weights, and another eval setting, are scored. (Training is faked: what is checked is which scores are
    taken.) The machine's memo is off: this is the pod's own."""
    from adapters.tiny.score_memo import ScoreMemo

    weights = _nudged_weights(random_checkpoint, tmp_path / "trained.safetensors")
    scored = _faked_training(monkeypatch, weights)
    trainer = _pod(ScoreMemo(None))
    seen: list[Progress] = []

    async def record(p: Progress) -> None:
        seen.append(p)

    first = await trainer.run(bundle(tmp_path / "a", str(random_checkpoint)), record)
    second = await trainer.run(bundle(tmp_path / "b", str(random_checkpoint)), record)
    assert first.ok and second.ok, (first.detail, second.detail)
    assert (second.pre, second.post) == (first.pre, first.post)
    assert len(scored) == 2  # the base, and the trained weights, once each
    notes = [p.message for p in seen[len(seen) // 2 :]]
    assert any("this base's score, taken by an earlier job on this pod" in m for m in notes)
    assert any("these weights' score, taken by an earlier job on this pod" in m for m in notes)
    _nudged_weights(random_checkpoint, weights, by=2e-3)  # the next job trains to other weights
    third = await trainer.run(bundle(tmp_path / "c", str(random_checkpoint)), record)
    assert third.ok and third.pre == first.pre and len(scored) == 3  # its post-score only
    trainer.eval_limit = 1  # another eval setting: another pre-score and post-score
    fourth = await trainer.run(bundle(tmp_path / "d", str(random_checkpoint)), record)
    assert fourth.ok and len(scored) == 5


async def test_a_new_pod_takes_the_scores_this_machine_took_before(
    tmp_path: Path, random_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The machine's score memo: a second trainer (another pod of the fleet, a later `ait episode`) with the same
    memo takes the base's score and the same trained weights' score from it without scoring; a trainer without
    it scores the same numbers."""
    from adapters.tiny.score_memo import ScoreMemo

    scored = _faked_training(monkeypatch, _nudged_weights(random_checkpoint, tmp_path / "trained.safetensors"))
    memo = ScoreMemo(tmp_path / "memo")
    seen: list[Progress] = []

    async def record(p: Progress) -> None:
        seen.append(p)

    first = await _pod(memo).run(bundle(tmp_path / "a", str(random_checkpoint)), record)
    assert first.ok and len(scored) == 2  # pre and post
    assert len(list((tmp_path / "memo").rglob("*.json"))) == 2
    second = await _pod(memo).run(bundle(tmp_path / "b", str(random_checkpoint)), record)
    assert second.ok and (second.pre, second.post) == (first.pre, first.post) and len(scored) == 2
    assert any("this base's score, taken before on this machine" in p.message for p in seen)
    assert any("these weights' score, taken before on this machine" in p.message for p in seen)
    # and the result says so (the log keeps it): an audit can tell a score taken from one scored
    assert "pre (this base's score, taken before on this machine)" in second.detail
    assert "post (these weights' score, taken before on this machine)" in second.detail
    assert "taken" not in first.detail
    third = await _pod(ScoreMemo(None)).run(bundle(tmp_path / "c", str(random_checkpoint)), record)
    assert third.ok and (third.pre, third.post) == (first.pre, first.post)  # scored again: the same numbers
    assert len(scored) == 4


async def test_a_pod_takes_the_pre_score_ait_baselines_took(
    tmp_path: Path, random_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ait baselines --inner cpu` scores each base at the settings a job's pre-score uses and leaves the score
    in the machine's memo: the pod's first job takes it from there, and it is the number a pod scores itself."""
    from adapters.tiny.score_memo import ScoreMemo
    from cli.baselines_cmd import cpu_score_fn

    entry = await cpu_score_fn(seed=0, limit=2)("calc_chain", str(random_checkpoint))
    scored = _faked_training(monkeypatch, _nudged_weights(random_checkpoint, tmp_path / "trained.safetensors"))
    seen: list[Progress] = []

    async def record(p: Progress) -> None:
        seen.append(p)

    taken = await _pod().run(bundle(tmp_path / "a", str(random_checkpoint)), record)  # this test's machine memo
    assert taken.ok and taken.pre == entry.score and len(scored) == 1  # the post-score only
    assert any("this base's score, taken before on this machine" in p.message for p in seen)
    alone = await _pod(ScoreMemo(None)).run(bundle(tmp_path / "b", str(random_checkpoint)), record)
    assert alone.ok and alone.pre == entry.score and len(scored) == 3


async def test_weights_that_never_left_the_base_take_the_base_score_without_scoring_again(
    tmp_path: Path, random_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job whose training changed nothing (no signal, or rolled back to the base) ends with the base's exact
    weights: the seeded eval would score them exactly as the base, so the base's score is taken; a job whose
    weights moved by the least amount is scored again."""
    from adapters.cpu_trainer import _trainer
    from adapters.tiny.score_memo import ScoreMemo

    scored = _faked_training(monkeypatch, random_checkpoint / "model.safetensors")  # "trained" = the base
    no_memo = ScoreMemo(None)  # a pod on a machine that never scored this base
    seen: list[Progress] = []

    async def record(p: Progress) -> None:
        seen.append(p)

    same = await _pod(no_memo).run(bundle(tmp_path / "a", str(random_checkpoint)), record)
    assert same.ok and same.post == same.pre and len(scored) == 1  # the pre-score only
    assert any("the weights are the base's" in p.message for p in seen if p.phase == "post_score")

    # The premise, checked: the same weights loaded as trained weights and scored again (no memo key at all, so
    # nothing is taken) give exactly the base's score.
    def no_key(*args: object, **kwargs: object) -> str:
        raise ValueError("not memoisable")

    monkeypatch.setattr(_trainer, "memo_key", no_key)
    again = await _pod(no_memo).run(bundle(tmp_path / "b", str(random_checkpoint)), record)
    assert again.ok and again.post == same.pre and len(scored) == 3  # pre and post scored this time
    # and weights moved by the least amount are scored, not taken as the base's
    monkeypatch.undo()
    scored_moved = _faked_training(monkeypatch, _nudged_weights(random_checkpoint, tmp_path / "moved.safetensors"))
    moved = await _pod(no_memo).run(bundle(tmp_path / "c", str(random_checkpoint)), record)
    assert moved.ok and len(scored_moved) == 2
