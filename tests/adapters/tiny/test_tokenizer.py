"""The BPE tokenizer: exact round trip, digits one per token, control tokens as single ids."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=80))
def test_round_trip_is_exact(micro_ckpt, text):
    tok = micro_ckpt.tokenizer
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text


@settings(max_examples=50, deadline=None)
@given(number=st.integers(0, 10**12))
def test_digits_are_one_token_each(micro_ckpt, number):
    tok = micro_ckpt.tokenizer
    text = f"x = {number}"
    pieces = [tok.decode([i]) for i in tok(text, add_special_tokens=False)["input_ids"]]
    digits = [p.strip() for p in pieces if any(c.isdigit() for c in p)]
    assert digits == list(str(number))


def test_control_tokens_are_single_ids_and_only_controls_are_skipped(micro_ckpt):
    from adapters.tiny.chat import SPECIAL_TOKENS, TEXT_TOKENS
    from adapters.tiny.tokenizer import stop_token_ids

    tok = micro_ckpt.tokenizer
    for token in (*SPECIAL_TOKENS, *TEXT_TOKENS):
        assert len(tok(token, add_special_tokens=False)["input_ids"]) == 1, token
    ids = tok("<|im_start|>assistant\n<tool_call>x</tool_call><|im_end|>", add_special_tokens=False)["input_ids"]
    assert tok.decode(ids, skip_special_tokens=True) == "assistant\n<tool_call>x</tool_call>"
    assert tok.convert_tokens_to_ids("<|im_end|>") in stop_token_ids(tok)


def test_saved_tokenizer_reloads_with_template(micro_ckpt, tmp_path):
    from transformers import PreTrainedTokenizerFast

    micro_ckpt.tokenizer.save_pretrained(tmp_path)
    again = PreTrainedTokenizerFast.from_pretrained(tmp_path)
    messages = [{"role": "user", "content": "Start with 12."}]
    assert again.apply_chat_template(messages, tokenize=False) == micro_ckpt.tokenizer.apply_chat_template(
        messages, tokenize=False
    )
    assert again("a 123 <tool_call>")["input_ids"] == micro_ckpt.tokenizer("a 123 <tool_call>")["input_ids"]
