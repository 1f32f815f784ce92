"""plan -> retrieve -> prompt: what the engine runs for one question, and the product cards beside it.

One function for the Triton model and the serving benchmark, so the benchmark's same-prompt baseline is
exactly what the model builds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from assistant.chat import ChatFormat
from assistant.plan import plan_query
from assistant.prompt import build_prompt
from assistant.retrieve import ProductIndex


@dataclass(frozen=True)
class PreparedRequest:
    """What the engine runs and what travels beside the text: the prompt, the cards, the turn's end."""

    prompt: str
    products: list[dict[str, object]] = field(default_factory=list)
    intent: str = ""
    stop_token_ids: tuple[int, ...] = ()


def prepare_request(text: str, index: ProductIndex, chat: ChatFormat | None = None) -> PreparedRequest:
    chat = chat or ChatFormat.plain()
    # Control-token text plans as words ("eot", "id") and would reach the prompt: gone before either.
    text = chat.clean(text)
    plan = plan_query(text, index.in_catalog)
    products = (
        index.search(
            plan.search_query, plan.top_k, max_price=plan.max_price, sort_by_price=plan.sort_by_price
        )
        if plan.retrieve
        else []
    )
    return PreparedRequest(
        prompt=build_prompt(text, plan, products, chat),
        products=[product.card() for product in products],
        intent=str(plan.intent),
        stop_token_ids=chat.stop_token_ids,
    )
