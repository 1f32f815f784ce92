"""The tiny model's tokenizer: trained on catalog text, every token valid text on its own."""

from __future__ import annotations

import pytest

from local.tiny_model import train_tokenizer

pytestmark = pytest.mark.vllm_version


@pytest.fixture(scope="module")
def tokenizer():
    texts = [
        "Waterproof hiking boots with Vibram soles",
        "Ultralight tent for two",
        "Café espresso grinder",
    ] * 50
    return train_tokenizer(texts, vocab_size=400)


def test_every_token_decodes_to_printable_text(tokenizer) -> None:
    for token_id in range(len(tokenizer)):
        text = tokenizer.decode([token_id], skip_special_tokens=True)
        assert "\ufffd" not in text
        assert all(char == "\n" or 32 <= ord(char) < 127 for char in text), (token_id, text)


def test_catalog_words_round_trip_and_merge(tokenizer) -> None:
    ids = tokenizer.encode("waterproof hiking boots", add_special_tokens=False)
    assert tokenizer.decode(ids) == "waterproof hiking boots"
    assert len(ids) < len("waterproof hiking boots") / 2  # BPE merged the catalog's words


def test_non_ascii_input_does_not_fail(tokenizer) -> None:
    assert tokenizer.encode("bottes imperméables", add_special_tokens=False)
