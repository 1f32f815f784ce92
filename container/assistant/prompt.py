"""Prompt assembly: a system message, and a user message with the retrieved products and the question.

Prefill time is time to first token, so the retrieved context has a token budget and each product is one
short line with what a shopper weighs: title, price, rating and a few words of description. Brand and
category are left out (titles carry the brand; the category is what the shopper asked for). The prompt's
length is bounded whatever the catalog holds, and catalog text cannot forge prompt lines or control tokens
(the chat format removes its tokenizer's special tokens from the question and the product lines).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence

from assistant.catalog import Product
from assistant.chat import ChatFormat
from assistant.plan import Intent, QueryPlan

MAX_PRODUCTS = 10
MAX_TITLE_CHARS = 80
MAX_DESCRIPTION_CHARS = 32
MAX_QUESTION_CHARS = 4_000
# Tokens for the product lines: five cards of the demo catalog fit with room to spare.
CONTEXT_TOKEN_BUDGET = 220
# Product lines kept per host (number, product -> line): the products retrieved most, each at its ranks.
LINES_CACHED = 4_096

SYSTEM_TEXT = "Recommend only the numbered products, by number; invent nothing; be brief."
_INTENT_GUIDANCE = {
    Intent.PRODUCT_SEARCH: "Say which fit and why.",
    Intent.COMPARISON: "Compare them; say which suits whom.",
    Intent.GENERAL_QUESTION: "Give practical advice.",
    Intent.OFF_TOPIC: "Not a shopping question: say you only help with the shop's products.",
}
NO_PRODUCTS_TEXT = "No matching products found; say so and suggest another search."
_WHITESPACE = re.compile(r"\s+")
_WORD = re.compile(r"[\w-]+")
# Words that link a description's phrases but tell the model nothing about the product.
_LINKING_WORDS = frozenset(
    ["a", "an", "the", "and", "with", "made", "of", "for", "in", "on", "its", "it", "is", "this", "that"]
)
_CURRENCY_SIGNS = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}


def _one_line(text: str, limit: int, *, mark_cut: bool = True) -> str:
    # Newlines from catalog text could imitate the prompt's own "Question:" line; keep each field on one line.
    flat = _WHITESPACE.sub(" ", text).strip()
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1].rsplit(" ", 1)[0] or flat[: limit - 1]
    return cut + "…" if mark_cut else cut


def format_price(price: float | None, currency: str) -> str:
    if price is None:
        return "price n/a"
    sign = _CURRENCY_SIGNS.get(currency)
    return f"{sign}{price:,.2f}" if sign else f"{price:,.2f} {currency}"


def _unchanged(text: str) -> str:
    return text


def product_line(number: int, product: Product, clean: Callable[[str], str] = _unchanged) -> str:
    """One product as the model sees it: `3. Title; $129.99; 4.6/5; a few words the title does not say`.

    `clean` is applied to the title and description before they are cut to length, so control-token text
    takes no room in the line."""
    title = _one_line(clean(product.title), MAX_TITLE_CHARS)
    parts = [f"{number}. {title}", format_price(product.price, product.currency)]
    if product.rating is not None:
        parts.append(f"{product.rating:.1f}/5")
    description = clean(product.description) if product.description else ""
    if description:
        # What the title already says costs tokens and tells the model nothing: keep the other words.
        title_words = {word.lower() for word in _WORD.findall(title)}
        first_sentence = description.split(". ", 1)[0]
        rest = " ".join(
            word
            for word in first_sentence.split()
            if word.lower().strip(",.;") not in title_words and word.lower() not in _LINKING_WORDS
        )
        if rest:
            parts.append(_one_line(rest, MAX_DESCRIPTION_CHARS, mark_cut=False).rstrip(",;"))
    return "; ".join(parts)


@functools.lru_cache(maxsize=LINES_CACHED)
def _cleaned_line(number: int, product: Product, clean: Callable[[str], str]) -> str:
    # Keyed by every field of the product (it is frozen): a changed price or title is a new line.
    return clean(product_line(number, product, clean))


def product_block(products: Sequence[Product], chat: ChatFormat, budget: int) -> list[str]:
    """Product lines in rank order while they fit the token budget (the first always does, trimmed)."""
    lines: list[str] = []
    used = 0
    # One line at a time: lines past the budget are neither built nor counted. Built lines and their counts
    # are remembered per host (a product shown at the same rank again costs a lookup): building and
    # tokenizing them was most of a request's preparation (bench/prepare_cpu.py).
    for number, product in enumerate(products[:MAX_PRODUCTS], start=1):
        line = _cleaned_line(number, product, chat.clean)
        cost = chat.line_tokens(line) + 1
        if lines and used + cost > budget:
            break
        lines.append(line)
        used += cost
    return lines


def build_prompt(
    question: str,
    plan: QueryPlan,
    products: Sequence[Product],
    chat: ChatFormat | None = None,
    *,
    context_token_budget: int = CONTEXT_TOKEN_BUDGET,
) -> str:
    """The text the engine completes. Off-topic questions get no product block at all."""
    chat = chat or ChatFormat.plain()
    system = f"{SYSTEM_TEXT} {_INTENT_GUIDANCE[plan.intent]}"
    parts = []
    if plan.intent is not Intent.OFF_TOPIC and plan.retrieve:
        lines = product_block(products, chat, context_token_budget)
        # No heading: the system text names the numbered list, and every token here is prefill.
        parts.append("\n".join(lines) if lines else NO_PRODUCTS_TEXT)
    parts.append(f"Question: {_one_line(chat.clean(question), MAX_QUESTION_CHARS)}")
    return chat.prompt(system, "\n\n".join(parts))


def max_prompt_chars() -> int:
    """An upper bound on len(build_prompt(...)) in plain format, for sizing max_model_len."""
    line_chars = 4 + MAX_TITLE_CHARS + 3 + 40 + 3 + 20 + 3 + MAX_DESCRIPTION_CHARS
    fixed = len(SYSTEM_TEXT) + max(len(text) for text in _INTENT_GUIDANCE.values()) + len(NO_PRODUCTS_TEXT)
    return fixed + MAX_PRODUCTS * (line_chars + 1) + MAX_QUESTION_CHARS + 64
