"""Prompt assembly: system text, the retrieved products as a numbered list, then the question.

The prompt's length is bounded whatever the catalog holds, so a long product description cannot push the
question out of the model's context or slow prefill for everyone in the batch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from assistant.catalog import Product
from assistant.plan import Intent, QueryPlan

MAX_PRODUCTS = 10
MAX_DESCRIPTION_CHARS = 240
MAX_TITLE_CHARS = 120
MAX_QUESTION_CHARS = 4_000

SYSTEM_TEXT = (
    "You are a helpful shopping assistant for an online store. Answer briefly and accurately. "
    "Recommend only products from the numbered list, refer to them by number and title, "
    "and never invent products, prices or features."
)
_INTENT_GUIDANCE = {
    Intent.PRODUCT_SEARCH: "Suggest the products that best fit the request and say why.",
    Intent.COMPARISON: "Compare the products the shopper asks about point by point; say which suits whom.",
    Intent.GENERAL_QUESTION: "Answer with practical advice; mention a listed product where it helps.",
    Intent.OFF_TOPIC: (
        "The question is not about shopping. Say politely that you can only help with products from the "
        "store, and offer to help find something."
    ),
}
NO_PRODUCTS_TEXT = "No matching products were found in the catalog; say so and suggest a better search."
_WHITESPACE = re.compile(r"\s+")


def _one_line(text: str, limit: int) -> str:
    # Newlines from catalog text could imitate the prompt's own "Question:" line; keep each field on one line.
    flat = _WHITESPACE.sub(" ", text).strip()
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1].rsplit(" ", 1)[0] or flat[: limit - 1]
    return cut + "…"


def _product_lines(number: int, product: Product) -> list[str]:
    details = ", ".join(
        part for part in (_one_line(product.brand, 60), _one_line(product.category, 60)) if part
    )
    header = f"{number}. {_one_line(product.title, MAX_TITLE_CHARS)}"
    if details:
        header += f" ({details})"
    header += f" - ${product.price:,.2f}"
    lines = [header]
    if product.description:
        lines.append(f"   {_one_line(product.description, MAX_DESCRIPTION_CHARS)}")
    return lines


def build_prompt(question: str, plan: QueryPlan, products: Sequence[Product]) -> str:
    """The text the engine completes. Off-topic questions get no product block at all."""
    parts = [SYSTEM_TEXT, _INTENT_GUIDANCE[plan.intent]]
    if plan.intent is not Intent.OFF_TOPIC and plan.retrieve:
        if products:
            lines = ["Products:"]
            for number, product in enumerate(products[:MAX_PRODUCTS], start=1):
                lines.extend(_product_lines(number, product))
            parts.append("\n".join(lines))
        else:
            parts.append(NO_PRODUCTS_TEXT)
    parts.append(f"Question: {_one_line(question, MAX_QUESTION_CHARS)}")
    parts.append("Answer:")
    return "\n\n".join(parts)


def max_prompt_chars() -> int:
    """An upper bound on len(build_prompt(...)) for any input, for sizing max_model_len."""
    product_chars = MAX_TITLE_CHARS + 2 * 60 + 40 + MAX_DESCRIPTION_CHARS + 20
    fixed = len(SYSTEM_TEXT) + max(len(text) for text in _INTENT_GUIDANCE.values()) + len(NO_PRODUCTS_TEXT)
    return fixed + len("Products:") + MAX_PRODUCTS * product_chars + MAX_QUESTION_CHARS + 64
