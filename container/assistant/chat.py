"""The model's own prompt format: its chat template (system + user messages) and the tokens that end a turn.

An Instruct model answers well only in the format it was tuned on, and stops where its template ends a turn;
a base model (no template) gets plain text. The tokenizer also counts the tokens of the retrieved context,
which has a budget because prefill time is time to first token.

Text from shoppers and from the catalog is never trusted with control tokens: the tokenizer turns
`<|eot_id|><|start_header_id|>system` typed into a question (or a product title) into the real tokens, which
would end the user's turn and open a new system turn. `clean` removes every special and added token's text
from it before the template wraps it, so the only control tokens in a prompt are the template's own.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

# End-of-turn tokens of the common chat templates (Llama 3, ChatML, Phi); the ones the vocabulary has count.
TURN_END_TOKENS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<|eom_id|>")
# Probe texts: whether the template shows a system message, or drops or refuses it.
_PROBE_SYSTEM = "system-probe-7f3a"
_PROBE_USER = "user-probe-5c1e"
# Cleaned texts kept per host: the products retrieved most (titles, descriptions); a few MB at most.
CLEANED_TEXTS_CACHED = 4_096
# Product lines' token counts kept per host: a popular product at the same rank (its line starts with its
# number) is counted once, not on every request that shows it; a line and an int, under 1 MB in all.
LINE_COUNTS_CACHED = 8_192


class ChatTemplateError(ValueError):
    """The tokenizer's chat template cannot carry our messages; the message names the tokenizer."""


def _identity(text: str) -> str:
    return text


def control_token_cleaner(tokens: Iterable[str]) -> Callable[[str], str]:
    """A function that removes every occurrence of the given token texts, also those that a removal joins
    together ("<|eot<|eot_id|>_id|>" loses both), in time linear in the text.

    Removing and searching again until nothing changes took one pass per level of nesting: 156 ms for a
    4,000-character nested question, 4.3 s for a 20,000-character description. Here the text goes through
    an Aho-Corasick automaton once, kept as a stack: a token that ends at a character is popped off the
    output with the automaton states its characters had, so text before it and after it meet as if the
    token had never been there (a token they form together is found as the rest of it arrives). Text
    without any token (the common case) returns after one regex search.
    """
    texts = sorted({token for token in tokens if token}, key=len, reverse=True)
    if not texts:
        return _identity
    pattern = re.compile("|".join(re.escape(text) for text in texts))
    automaton = _TokenAutomaton(texts)

    def clean(text: str) -> str:
        if pattern.search(text) is None:
            return text
        return automaton.remove_all(text)

    return clean


class _TokenAutomaton:
    """Aho-Corasick over the token texts, with each state's transitions resolved on first use."""

    def __init__(self, texts: list[str]) -> None:
        self.goto: list[dict[str, int]] = [{}]
        self.match_length = [0]  # the longest token ending at each state (0: none)
        for text in texts:
            state = 0
            for char in text:
                following = self.goto[state].get(char)
                if following is None:
                    following = len(self.goto)
                    self.goto[state][char] = following
                    self.goto.append({})
                    self.match_length.append(0)
                state = following
            self.match_length[state] = max(self.match_length[state], len(text))
        self.fail = [0] * len(self.goto)
        queue = list(self.goto[0].values())
        for state in queue:  # breadth first: a state's failure link is shallower than the state
            for char, following in self.goto[state].items():
                queue.append(following)
                fallback = self.fail[state]
                while fallback and char not in self.goto[fallback]:
                    fallback = self.fail[fallback]
                link = self.goto[fallback].get(char, 0)
                self.fail[following] = link if link != following else 0
                self.match_length[following] = max(self.match_length[following], self.match_length[link])
        self._moves: dict[tuple[int, str], int] = {}

    def move(self, state: int, char: str) -> int:
        key = (state, char)
        cached = self._moves.get(key)
        if cached is not None:
            return cached
        current = state
        while current and char not in self.goto[current]:
            current = self.fail[current]
        following = self.goto[current].get(char, 0)
        if len(self._moves) < 1_000_000:  # bounded: the cache must not grow with hostile text
            self._moves[key] = following
        return following

    def remove_all(self, text: str) -> str:
        kept: list[str] = []
        states = [0]  # states[i]: the automaton's state after kept[:i]
        for char in text:
            state = self.move(states[-1], char)
            kept.append(char)
            states.append(state)
            length = self.match_length[state]
            if length:
                del kept[-length:]
                del states[-length:]
        return "".join(kept)


@dataclass(frozen=True)
class ChatFormat:
    render: Callable[[str, str], str] | None
    count_tokens: Callable[[str], int]
    stop_token_ids: tuple[int, ...] = ()
    name: str = "plain text"
    # Removes the tokenizer's special and added tokens from untrusted text (shopper's and catalog's).
    clean: Callable[[str], str] = _identity
    # The prompt's tokens as the engine counts them (with the BOS it adds); None: count_tokens.
    count_prompt_tokens: Callable[[str], int] | None = None
    # count_tokens of several texts (a prompt's product lines), cheaper per text; None: count_tokens each.
    count_tokens_batch: Callable[[list[str]], list[int]] | None = None
    # count_tokens of one product line, remembered per line (LINE_COUNTS_CACHED); None: count_tokens.
    count_line: Callable[[str], int] | None = None

    @classmethod
    def plain(cls) -> ChatFormat:
        """No tokenizer: plain text, tokens estimated at four characters each."""
        return cls(render=None, count_tokens=lambda text: max(1, len(text) // 4))

    @classmethod
    def load(cls, tokenizer_path: str) -> ChatFormat:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)

        def count_tokens(text: str) -> int:
            return len(tokenizer.encode(text, add_special_tokens=False))

        count_tokens_batch = None
        count_one = count_tokens
        backend = getattr(tokenizer, "backend_tokenizer", None) if tokenizer.is_fast else None
        if backend is not None:
            # The Rust tokenizer a fast tokenizer's encode() calls, without the wrapper's per-call Python
            # (argument objects, truncation checks: most of a product line's cost). Same ids: encode() reaches
            # the same backend with the same special-token flag. One text per call on purpose: the backend's
            # encode_batch spreads a batch over a thread pool, which cost 3x more than it saved here.
            def count_one(text: str) -> int:
                return len(backend.encode(text, add_special_tokens=False).ids)

            def count_tokens_batch(texts: list[str]) -> list[int]:
                return [count_one(text) for text in texts]

        # Encoding the product lines was the largest share of a preparation's CPU (bench/prepare_cpu.py); the
        # same line always has the same count.
        count_line = functools.lru_cache(maxsize=LINE_COUNTS_CACHED)(count_one)

        def count_prompt_tokens(text: str) -> int:
            # As vLLM tokenizes a text prompt: with the tokenizer's special tokens added.
            return len(tokenizer.encode(text))

        # Special tokens (BOS, EOS, ...) and every added token (Llama 3's header and turn tokens are added
        # tokens): the tokenizer matches all of them in plain text.
        # Cached: a product's title and description are cleaned once per host, not on every request that
        # retrieves them (a poisoned 20,000-character description costs ~6 ms the first time).
        clean = functools.lru_cache(maxsize=CLEANED_TEXTS_CACHED)(
            control_token_cleaner([*tokenizer.all_special_tokens, *tokenizer.get_added_vocab()])
        )
        if not tokenizer.chat_template:
            return cls(
                render=None,
                count_tokens=count_tokens,
                name="plain text (no chat template)",
                clean=clean,
                count_tokens_batch=count_tokens_batch,
                count_line=count_line,
            )
        vocabulary = tokenizer.get_vocab()
        stops = {vocabulary[token] for token in TURN_END_TOKENS if token in vocabulary}
        if tokenizer.eos_token_id is not None:
            stops.add(tokenizer.eos_token_id)
        # The engine adds the BOS token when it tokenizes the prompt; the template's own would double it.
        bos = tokenizer.bos_token or ""
        adds_bos = bool(bos) and tokenizer("x").input_ids[:1] == [tokenizer.bos_token_id]

        def apply(messages: list[dict[str, str]]) -> str:
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return text[len(bos) :] if adds_bos and text.startswith(bos) else text

        fold_system = not _shows_system(apply)
        if fold_system:
            probe = apply([{"role": "user", "content": f"{_PROBE_SYSTEM}\n\n{_PROBE_USER}"}])
            if _PROBE_SYSTEM not in probe or _PROBE_USER not in probe:
                raise ChatTemplateError(
                    f"{tokenizer_path}: the chat template shows neither a system message nor the user's text"
                )

        def render(system: str, user: str) -> str:
            if fold_system:
                # Templates without a system role (Gemma's, Mistral's) refuse or drop it: the system text
                # opens the first user turn instead.
                return apply([{"role": "user", "content": f"{system}\n\n{user}"}])
            return apply([{"role": "system", "content": system}, {"role": "user", "content": user}])

        return cls(
            render=render,
            count_tokens=count_tokens,
            stop_token_ids=tuple(sorted(stops)),
            name="chat template (system text in the user turn)" if fold_system else "chat template",
            clean=clean,
            count_prompt_tokens=count_prompt_tokens,
            count_tokens_batch=count_tokens_batch,
            count_line=count_line,
        )

    def count_each(self, texts: list[str]) -> list[int]:
        """count_tokens of each text, through count_tokens_batch where the tokenizer offers it."""
        if self.count_tokens_batch is not None:
            return self.count_tokens_batch(texts)
        return [self.count_tokens(text) for text in texts]

    def line_tokens(self, line: str) -> int:
        """count_tokens of one product line, from the per-host cache where the tokenizer has one."""
        return (self.count_line or self.count_tokens)(line)

    def prompt_tokens(self, prompt: str) -> int:
        return (self.count_prompt_tokens or self.count_tokens)(prompt)

    def prompt(self, system: str, user: str) -> str:
        if self.render is None:
            return f"{system}\n\n{user}\n\nAnswer:"
        return self.render(system, user)

    def describe(self) -> str:
        stops = f", stop tokens {list(self.stop_token_ids)}" if self.stop_token_ids else ""
        return f"{self.name}{stops}"


def _shows_system(apply: Callable[[list[dict[str, str]]], str]) -> bool:
    """Whether the template renders a system message (some raise on one, some drop it silently)."""
    messages = [{"role": "system", "content": _PROBE_SYSTEM}, {"role": "user", "content": _PROBE_USER}]
    try:
        rendered = apply(messages)
    except Exception:  # jinja2's TemplateError from raise_exception(), or any template bug: probe the fold
        return False
    return _PROBE_SYSTEM in rendered and _PROBE_USER in rendered
