"""The tiny models' tokenizer: a byte-level BPE trained here, wrapped as a transformers fast tokenizer.

Byte-level, so any text round-trips exactly; digits are split one per token before BPE (as Qwen's
pre-tokenizer does), so numbers are spelled digit by digit and a model can copy and compare them. The
control tokens (``<|im_start|>``, ``<|im_end|>``, ``<|endoftext|>``) and the hermes tags (``<tool_call>``,
``<tool_response>`` ...) are single ids; the tags decode as text so a parser finds them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from .chat import CHAT_TEMPLATE, IM_END, PAD, SPECIAL_TOKENS, TEXT_TOKENS

__all__ = ["decode_reply", "stop_token_ids", "train_tokenizer", "wrap_tokenizer"]


def train_tokenizer(texts: Iterable[str], vocab_size: int = 1024, min_frequency: int = 2) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on ``texts`` (rendered conversations) and wrap it with the chat template."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[*SPECIAL_TOKENS, *TEXT_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    # Re-register the tags as non-special added tokens: one id each, but kept when decoding.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TEXT_TOKENS])
    return wrap_tokenizer(tok)


def wrap_tokenizer(tok: Tokenizer) -> PreTrainedTokenizerFast:
    """A transformers tokenizer around ``tok`` with the chat template and the Qwen-style special tokens."""
    wrapped = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=PAD,
        padding_side="left",
        clean_up_tokenization_spaces=False,
        model_max_length=4096,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def decode_reply(tokenizer: PreTrainedTokenizerFast, token_ids: Sequence[int]) -> str:
    """A generated turn as text: control tokens (the closing ``<|im_end|>``) dropped, tags kept."""
    text = tokenizer.decode(list(token_ids), skip_special_tokens=True)
    if not isinstance(text, str):
        raise TypeError(f"decode returned {type(text).__name__}, expected str")
    return text


def stop_token_ids(tokenizer: PreTrainedTokenizerFast) -> list[int]:
    """Ids that end a generated turn: ``<|im_end|>`` and ``<|endoftext|>``."""
    ids = [tokenizer.convert_tokens_to_ids(t) for t in (IM_END, PAD)]
    return [int(i) for i in ids if isinstance(i, int)]
