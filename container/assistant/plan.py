"""Query planning: what kind of question this is, and whether and what to retrieve for it.

Rule- and lexicon-based on purpose: it runs in microseconds on the request path (the reference system spent
up to 300 ms on an LLM planning call), is deterministic, and every rule is a table entry a test can name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum


class Intent(StrEnum):
    PRODUCT_SEARCH = "product_search"
    COMPARISON = "comparison"
    GENERAL_QUESTION = "general_question"
    OFF_TOPIC = "off_topic"


# Comparisons need both sides in the candidate set, so they fetch more; advice needs only a few examples.
TOP_K_BY_INTENT: dict[Intent, int] = {
    Intent.PRODUCT_SEARCH: 5,
    Intent.COMPARISON: 8,
    Intent.GENERAL_QUESTION: 3,
    Intent.OFF_TOPIC: 0,
}
MAX_TOP_K = max(TOP_K_BY_INTENT.values())
MAX_SEARCH_TERMS = 16
# Planning looks at the start of very long input only: the intent is stated early, and the cost stays flat.
_MAX_PLANNED_CHARS = 2_000


@dataclass(frozen=True, slots=True)
class QueryPlan:
    intent: Intent
    retrieve: bool
    search_query: str
    top_k: int
    max_price: float | None = None
    # The currency the cap was stated in (USD, EUR, GBP), None for a bare number. The cap is compared with
    # the catalog's prices as they are: a shop's catalog is in its own currency.
    price_currency: str | None = None
    # "cheapest", "lowest price": rank the relevant products by price rather than by relevance alone.
    sort_by_price: bool = False


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


_WORD = re.compile(r"[^\W_]+")
# Runs of whitespace become one space before any pattern runs, so the price pattern has single optional
# spaces (" ?") where `\s*` next to `\s*` would backtrack: with `\s*`, 4,000 spaces after a "<" took
# 65-265 ms per question on the engine loop (quadratic in the run's length).
_WHITESPACE = re.compile(r"\s+")
# An amount: digits with optional thousands separators ("1,500", "12,000,000") or plain ("1500"), and cents.
# The lookahead refuses a number that goes on ("1,50" is not 1 or 150; "1.500" is neither 1.5 nor 1500).
# A space may separate thousands too ("1 500", as much of Europe writes; a no-break space is whitespace, so
# it is a space by then), one separator throughout.
_AMOUNT = (
    r"(?P<amount>\d{1,3}(?:,\d{3})+|\d{1,3}(?: \d{3})+(?![\d,])|\d{1,7})"
    r"(?P<cents>\.\d{1,2})?(?![\d,]\d|\.\d)"
)
_PRICE_CAP = re.compile(
    r"(?:under|below|less than|cheaper than|at most|up to|max(?:imum)?|<) ?"
    # The amount ends a word, unless a "k" does: "£1,500m" is no cap of £1,500 with a search for "m".
    rf"(?P<sign>[$€£])? ?{_AMOUNT}(?: ?(?P<k>k\b))?(?![^\W_])(?: ?(?P<after_sign>[$€£]))?"
    r"(?! ?(?:pounds(?! sterling)|lbs?|kg|kilos?|grams?|g\b|oz|ounces|inch|inches|in\b|cm|mm|feet|ft|"
    r"liters?|l\b|hours?|hrs?|minutes?|mins?|days?|years?|people|person|watts?|w\b|mah|gb|tb|hz)\b)"
    r" ?(?P<currency>dollars|usd|bucks|euros?|eur|pounds sterling|quid|gbp)?",
)
_CURRENCY_BY_SIGN = {"$": "USD", "€": "EUR", "£": "GBP"}
_CURRENCY_BY_WORD = {
    "dollars": "USD",
    "usd": "USD",
    "bucks": "USD",
    "euro": "EUR",
    "euros": "EUR",
    "eur": "EUR",
    "pounds sterling": "GBP",
    "quid": "GBP",
    "gbp": "GBP",
}
# A bare number after "under" is a price only where the question talks money ("tv under 55" is a size).
_PRICE_CONTEXT = frozenset(
    [
        "price",
        "prices",
        "priced",
        "cost",
        "costs",
        "budget",
        "spend",
        "spending",
        "cheap",
        "cheaper",
        "affordable",
        "dollar",
        "dollars",
        "usd",
        "bucks",
        "euro",
        "euros",
        "eur",
        "gbp",
    ]
)
_CHEAPEST = (" cheapest ", " lowest price ", " least expensive ", " most affordable ", " lowest priced ")

_OFF_TOPIC_WORDS = _word_set(
    """
    politics political politician election elections president presidential senator congress parliament
    democrat democrats republican republicans vote voting government minister war
    weather forecast
    python javascript typescript java golang kotlin sql regex code coding programmer debug debugging compile
    compiler stacktrace traceback function variable algorithm leetcode
    news stocks bitcoin crypto cryptocurrency ethereum
    joke jokes poem poems lyrics song songs movie movies horoscope astrology
    homework equation calculus
    diagnosis symptoms medication prescription lawyer lawsuit
    """
)
# Phrases outrank commerce words ("stock price" is not a shopping question) but not product nouns.
_OFF_TOPIC_PHRASES = (
    " capital of ",
    " who won ",
    " meaning of life ",
    " write me a ",
    " write a ",
    " stock price ",
    " stock market ",
)

# Words that make a message about shopping even when an off-topic word appears ("laptop for python").
_PRODUCT_NOUNS = _word_set(
    """
    boot shoe sneaker sandal trainer tent sleeping bag backpack daypack pack jacket coat shell parka vest
    fleece glove hat sock pant short shirt legging headphone earbud earphone headset speaker soundbar laptop
    notebook ultrabook computer pc tablet phone smartphone watch smartwatch tracker camera lens drone monitor
    screen tv television keyboard mouse charger cable router printer console controller chair desk lamp
    blender mixer toaster kettle coffee espresso grinder maker knife knive cookware pan pot mat bike bicycle
    ebike runner helmet bottle flask stove lantern headlamp cooler hammock pole trekking ski snowboard skate
    luggage suitcase wallet sunglasses mattress pillow vacuum fan heater grill
    """
)
_COMMERCE_WORDS = _word_set(
    """
    buy buying purchase order price prices priced cost costs cheap cheaper cheapest affordable budget deal
    deals discount sale shop shopping gift recommend recommendation recommendations suggest product products
    brand brands model models review reviews rated warranty shipping
    """
)
_COMPARISON_WORDS = frozenset({"vs", "versus", "compare", "compared", "comparing", "comparison"})
_COMPARISON_PHRASES = (" difference between ", " differences between ", " better than ", " which is better ")
_ADVICE_WORDS = _word_set(
    """
    tips tip guide advice explain choose choosing care maintain maintenance clean cleaning wash washing
    worth should fit sizing size waterproofing layering
    """
)
_ADVICE_OPENERS = ("how ", "why ", "when ", "is it ", "do i ", "does ", "can i ")
_PURCHASE_WORDS = _word_set(
    "buy purchase order recommend recommendation suggest show find need want looking best top cheapest"
)
_FILLER_WORDS = _word_set(
    """
    a an the i me my mine we our you your it its is are am be been was were do does did can could would should
    will shall may might must please pls need needs want wants wanted looking look for to of in on at by from
    with without and or but so if some any something anything recommend recommendation recommendations
    suggest suggestion suggestions show find get buy buying purchase good best great nice top which what whats
    how why when where who that this these those there here help hi hello hey thanks thank thx vs versus
    compare compared comparing comparison difference differences between better than tips tip guide advice
    choose choosing pick about tell know like really very just also one ones under below less cheaper over
    above dollars usd bucks price priced cost costs around im ive id dont doesnt s t shopping shop store
    options option us them they their he she his her much many worth cheapest lowest least expensive
    affordable most budget spend spending
    """
)


def _lexicon_form(word: str) -> str:
    # Plural to singular is all the lexicons need; a full stemmer would cost more than the whole plan.
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def _price_cap(match: re.Match[str], words: set[str]) -> tuple[float, str | None] | None:
    """(cap, currency) a match states, or None when a bare number has no money around it."""
    sign = match.group("sign") or match.group("after_sign")
    currency = _CURRENCY_BY_SIGN.get(sign or "") or _CURRENCY_BY_WORD.get(match.group("currency") or "")
    if not (currency or match.group("k")) and not words & _PRICE_CONTEXT:
        return None
    amount = float(match.group("amount").replace(",", "").replace(" ", "") + (match.group("cents") or ""))
    return (amount * 1000 if match.group("k") else amount), currency


CatalogTerms = Callable[[str], bool]


def _demo_nouns(word: str) -> bool:
    return _lexicon_form(word) in _PRODUCT_NOUNS


def plan_query(text: str, in_catalog: CatalogTerms | None = None) -> QueryPlan:
    """Classifies a shopping question and decides the retrieval for it. Never raises on any str.

    in_catalog(word) says whether the catalog's titles, brands or categories hold the word (the index
    answers it): the shopping vocabulary is the shop's own. A question is refused as off-topic only when it
    has an off-topic sign and no word of it is in the catalog; otherwise retrieval decides. Without an index
    (unit tests), a small list of product nouns stands in.
    """
    in_catalog = in_catalog or _demo_nouns
    # A bounded prefix (twice the planned length, as whitespace may shrink) and collapsed whitespace: the
    # cost per question stays flat whatever the client sends.
    prefix = _WHITESPACE.sub(" ", text[: 2 * _MAX_PLANNED_CHARS])[:_MAX_PLANNED_CHARS]
    lowered = prefix.lower().replace("\u2019", "").replace("'", "")
    max_price = price_currency = None
    price_match = _PRICE_CAP.search(lowered)
    if price_match is not None:
        cap = _price_cap(price_match, set(_WORD.findall(lowered)))
        if cap is not None:
            max_price, price_currency = cap
            lowered = lowered[: price_match.start()] + " " + lowered[price_match.end() :]
    words = _WORD.findall(lowered)
    forms = {_lexicon_form(word) for word in words}
    padded = f" {' '.join(words)} "
    sort_by_price = any(phrase in padded for phrase in _CHEAPEST)
    content_words = [word for word in dict.fromkeys(words) if word not in _FILLER_WORDS]

    names_product = any(in_catalog(word) for word in content_words)
    shopping = names_product or bool(forms & _COMMERCE_WORDS) or max_price is not None
    off_topic_phrase = any(phrase in padded for phrase in _OFF_TOPIC_PHRASES)
    if (off_topic_phrase and not names_product) or (forms & _OFF_TOPIC_WORDS and not shopping):
        return QueryPlan(Intent.OFF_TOPIC, retrieve=False, search_query="", top_k=0)

    comparison = bool(forms & _COMPARISON_WORDS) or any(phrase in padded for phrase in _COMPARISON_PHRASES)
    # "X or Y" compares only when both sides look like products ("boots or trail runners").
    if not comparison and " or " in padded and shopping:
        left, _, right = padded.partition(" or ")
        comparison = any(in_catalog(w) for w in left.split() if w not in _FILLER_WORDS) and any(
            in_catalog(w) for w in right.split() if w not in _FILLER_WORDS
        )
    if comparison:
        intent = Intent.COMPARISON
    else:
        opener = padded.lstrip()
        advice = bool(forms & _ADVICE_WORDS) or opener.startswith(_ADVICE_OPENERS)
        wants_to_buy = bool(forms & _PURCHASE_WORDS) and not opener.startswith(("how ", "why "))
        intent = Intent.GENERAL_QUESTION if advice and not wants_to_buy else Intent.PRODUCT_SEARCH

    search_query = " ".join(content_words[:MAX_SEARCH_TERMS])
    if not search_query:
        # Greetings and thanks: nothing to look up, the model answers from the system text alone.
        return QueryPlan(Intent.GENERAL_QUESTION, retrieve=False, search_query="", top_k=0)
    return QueryPlan(
        intent,
        retrieve=True,
        search_query=search_query,
        top_k=TOP_K_BY_INTENT[intent],
        max_price=max_price,
        price_currency=price_currency,
        sort_by_price=sort_by_price,
    )
