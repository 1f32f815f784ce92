"""plan -> retrieve -> prompt as one step, the way the Triton model and the serving benchmark call it."""

from __future__ import annotations

import pytest

from assistant.prepare import prepare_request
from assistant.retrieve import ProductIndex

pytestmark = pytest.mark.vllm_version


def test_a_product_question_gets_cards_and_a_prompt_that_lists_them(product_index: ProductIndex) -> None:
    prepared = prepare_request("waterproof hiking boots", product_index)
    assert prepared.intent == "product_search"
    assert prepared.products
    for number, card in enumerate(prepared.products, start=1):
        assert f"{number}. {card['title']}" in prepared.prompt
    assert prepared.prompt.rstrip().endswith("Answer:")


def test_an_off_topic_question_retrieves_nothing(product_index: ProductIndex) -> None:
    prepared = prepare_request("who won the election for president", product_index)
    assert prepared.products == []
    assert "who won the election for president" in prepared.prompt
