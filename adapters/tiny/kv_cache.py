"""A KV cache for :func:`adapters.tiny.generate.generate` that grows in place instead of by concatenation.

transformers' ``DynamicLayer`` appends each decode step's key and value with ``torch.cat``, copying the whole
cache every step: for a scoring batch (64 rows, prompts of several hundred tokens) that copy was a tenth of a
decode step on the tiny models. Here each layer keeps a buffer with spare room along the sequence axis (grown
by half its length when full, so a row of ``L`` tokens costs ``O(L)`` copies in all, not ``O(L^2)``) and hands
attention a view of its filled part. The keys and values are the same numbers in the same order, so attention computes
the same result: tests/adapters/tiny/test_kv_cache.py checks that generation is bit-identical to the
concatenating cache.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor
from transformers import DynamicCache
from transformers.cache_utils import Cache, DynamicLayer

__all__ = ["GrowingCache"]

_MIN_ROOM = 64  # spare positions after the prompt: a scoring turn (at most 96 tokens) then copies at most once


class _GrowingLayer(DynamicLayer):  # type: ignore[no-untyped-call]  # transformers: untyped __init_subclass__
    """One layer's keys and values in buffers ``[batch, heads, capacity, head_dim]``, filled up to ``length``."""

    def lazy_initialization(self, key_states: Tensor, value_states: Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self._key_buf: Tensor | None = None
        self._value_buf: Tensor | None = None
        self._length = 0

    def _grow(self, extra: int, key_states: Tensor, value_states: Tensor) -> None:
        need = self._length + extra
        if self._key_buf is not None and need <= self._key_buf.shape[-2]:
            return
        capacity = need + max(_MIN_ROOM, self._length // 2)
        batch, heads, _, dim = key_states.shape
        keys = key_states.new_empty((batch, heads, capacity, dim))
        values = value_states.new_empty((batch, heads, capacity, value_states.shape[-1]))
        if self._key_buf is not None and self._value_buf is not None:
            keys[:, :, : self._length] = self._key_buf[:, :, : self._length]
            values[:, :, : self._length] = self._value_buf[:, :, : self._length]
        self._key_buf, self._value_buf = keys, values

    def update(self, key_states: Tensor, value_states: Tensor, *args: Any, **kwargs: Any) -> tuple[Tensor, Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        extra = key_states.shape[-2]
        self._grow(extra, key_states, value_states)
        assert self._key_buf is not None and self._value_buf is not None
        self._key_buf[:, :, self._length : self._length + extra] = key_states
        self._value_buf[:, :, self._length : self._length + extra] = value_states
        self._length += extra
        self.keys = self._key_buf[:, :, : self._length]
        self.values = self._value_buf[:, :, : self._length]
        return self.keys, self.values

    def batch_select_indices(self, indices: Tensor) -> None:
        if self.get_seq_length() > 0 and self._key_buf is not None and self._value_buf is not None:
            self._key_buf = self._key_buf[indices, ...]
            self._value_buf = self._value_buf[indices, ...]
            self.keys = self._key_buf[:, :, : self._length]
            self.values = self._value_buf[:, :, : self._length]

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("generate() never crops its cache")

    def batch_repeat_interleave(self, repeats: int) -> None:
        raise NotImplementedError("generate() never repeats its cache")


class GrowingCache(DynamicCache):
    """A ``DynamicCache`` whose layers grow in place (one :class:`_GrowingLayer` per decoder layer, made lazily)."""

    def __init__(self) -> None:
        Cache.__init__(self, layer_class_to_replicate=_GrowingLayer)
