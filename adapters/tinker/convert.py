"""Plain :class:`~handlers.training.DatumSpec` -> ``tinker.types.Datum`` (and back, for tests and checks).

The ``mask`` is ours, not Tinker's: the server-side RL losses take only ``target_tokens``, ``logprobs`` and
``advantages`` (zeros already mark the prompt), so the mask is dropped here as the cookbook does.
"""

from __future__ import annotations

from tinker import types

from handlers.training import DatumSpec

__all__ = ["to_datum"]


def to_datum(spec: DatumSpec) -> types.Datum:
    n = len(spec.input_tokens)
    for key, values in (
        ("target_tokens", spec.target_tokens),
        ("logprobs", spec.logprobs),
        ("advantages", spec.advantages),
    ):
        if len(values) != n:
            raise ValueError(f"datum: {key} has {len(values)} entries for {n} input tokens")
    return types.Datum(
        model_input=types.ModelInput.from_ints(list(spec.input_tokens)),
        loss_fn_inputs={
            "target_tokens": types.TensorData(data=list(spec.target_tokens), dtype="int64", shape=[n]),
            "logprobs": types.TensorData(data=list(spec.logprobs), dtype="float32", shape=[n]),
            "advantages": types.TensorData(data=list(spec.advantages), dtype="float32", shape=[n]),
        },
    )
