from __future__ import annotations

import importlib.util

import pytest

from handlers.training import SampledTurn, trajectory_to_datums

# find_spec, not importorskip: collection must not import tinker (issue 18).
pytestmark = pytest.mark.skipif(importlib.util.find_spec("tinker") is None, reason="tinker is not installed")


def specs():
    t = SampledTurn(prompt_tokens=[5, 6, 7], sampled_tokens=[8, 9], sampled_logprobs=[-0.25, -0.5])
    return trajectory_to_datums([t], advantage=0.5)


def test_to_datum_is_a_real_aligned_tinker_datum():
    from tinker import types

    from adapters.tinker.convert import to_datum

    [spec] = specs()
    d = to_datum(spec)
    assert isinstance(d, types.Datum)
    assert d.model_input.to_ints() == [5, 6, 7, 8]
    assert d.loss_fn_inputs["target_tokens"].tolist() == [6, 7, 8, 9]
    assert d.loss_fn_inputs["target_tokens"].dtype == "int64"
    assert d.loss_fn_inputs["logprobs"].tolist() == [0.0, 0.0, -0.25, -0.5]
    assert d.loss_fn_inputs["advantages"].tolist() == [0.0, 0.0, 0.5, 0.5]
    assert set(d.loss_fn_inputs) == {"target_tokens", "logprobs", "advantages"}


async def test_train_step_and_save_through_the_sdk_shape():
    from tinker import types

    from adapters.tinker.learner import TinkerLearner
    from tests.fakes.tinker import FakeTinker

    svc = FakeTinker()
    learner = TinkerLearner(svc, base_model="Qwen/Qwen3.6-35B-A3B", rank=8)
    out = await learner.train_step(
        specs(), loss_fn="ppo", loss_fn_config={"clip_low_threshold": 0.8}, learning_rate=4e-5
    )
    assert out.metrics["loss:sum"] == pytest.approx(-1.0)
    assert out.metrics["optim/lr"] == pytest.approx(4e-5)
    assert svc.created == [("lora", ("Qwen/Qwen3.6-35B-A3B", 8))]
    [(data, loss, cfg)] = svc.forward_backward_calls
    assert loss == "ppo" and cfg == {"clip_low_threshold": 0.8} and isinstance(data[0], types.Datum)
    assert svc.clients[0].calls == ["forward_backward", "optim_step"]  # both submitted, in order
    state, sampler = await learner.save("step_000001", with_state=True)
    assert svc.states[state]["steps"] == 1 and sampler in svc.samplers


async def test_poisoned_client_is_replaced_from_last_state():
    import tinker
    from tinker import types

    from adapters.tinker.learner import TinkerLearner
    from tests.fakes.tinker import FakeTinker

    svc = FakeTinker()
    learner = TinkerLearner(svc, base_model="m", rank=4)
    await learner.train_step(specs(), loss_fn="importance_sampling", loss_fn_config=None, learning_rate=1e-5)
    state, _ = await learner.save("s1", with_state=True)
    svc.fail_next["forward_backward"] = 1
    with pytest.raises(tinker.RequestFailedError):
        await learner.train_step(specs(), loss_fn="importance_sampling", loss_fn_config=None, learning_rate=1e-5)
    # the SDK rule: that client now refuses everything
    poisoned = svc.clients[0]
    with pytest.raises(RuntimeError, match="poisoned"):
        poisoned.optim_step(types.AdamParams()).result()
    await learner.train_step(specs(), loss_fn="importance_sampling", loss_fn_config=None, learning_rate=1e-5)
    assert svc.created[-1] == ("from_state", state)
    assert svc.clients[-1].state["steps"] == 2  # 1 restored + 1 new; the failed step never applied
    assert learner.clients_created == 2


async def test_resume_uses_state_with_optimizer():
    from adapters.tinker.learner import TinkerLearner
    from tests.fakes.tinker import FakeTinker

    svc = FakeTinker()
    first = TinkerLearner(svc, base_model="m", rank=4)
    await first.train_step(specs(), loss_fn="importance_sampling", loss_fn_config=None, learning_rate=1e-5)
    state, _ = await first.save("s1", with_state=True)
    resumed = TinkerLearner(svc, base_model="m", rank=4, resume_state_path=state)
    await resumed.save("s2", with_state=False)
    assert svc.created[-1] == ("from_state", state)


async def test_empty_batch_refused():
    from adapters.tinker.learner import TinkerLearner
    from tests.fakes.tinker import FakeTinker

    with pytest.raises(ValueError):
        await TinkerLearner(FakeTinker(), base_model="m", rank=4).train_step(
            [], loss_fn="ppo", loss_fn_config=None, learning_rate=1e-5
        )
