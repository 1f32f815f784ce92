"""The model's own prompt format: its chat template (system + user messages) and the tokens that end a turn.

An Instruct model answers well only in the format it was tuned on, and stops where its template ends a turn;
a base model (no template) gets plain text. The tokenizer also counts the tokens of the retrieved context,
which has a budget because prefill time is time to first token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# End-of-turn tokens of the common chat templates (Llama 3, ChatML, Phi); the ones the vocabulary has count.
TURN_END_TOKENS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<|eom_id|>")


@dataclass(frozen=True)
class ChatFormat:
    render: Callable[[str, str], str] | None
    count_tokens: Callable[[str], int]
    stop_token_ids: tuple[int, ...] = ()
    name: str = "plain text"

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

        if not tokenizer.chat_template:
            return cls(render=None, count_tokens=count_tokens, name="plain text (no chat template)")
        vocabulary = tokenizer.get_vocab()
        stops = {vocabulary[token] for token in TURN_END_TOKENS if token in vocabulary}
        if tokenizer.eos_token_id is not None:
            stops.add(tokenizer.eos_token_id)
        # The engine adds the BOS token when it tokenizes the prompt; the template's own would double it.
        bos = tokenizer.bos_token or ""
        adds_bos = bool(bos) and tokenizer("x").input_ids[:1] == [tokenizer.bos_token_id]

        def render(system: str, user: str) -> str:
            messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return text[len(bos) :] if adds_bos and text.startswith(bos) else text

        return cls(
            render=render,
            count_tokens=count_tokens,
            stop_token_ids=tuple(sorted(stops)),
            name="chat template",
        )

    def prompt(self, system: str, user: str) -> str:
        if self.render is None:
            return f"{system}\n\n{user}\n\nAnswer:"
        return self.render(system, user)

    def describe(self) -> str:
        stops = f", stop tokens {list(self.stop_token_ids)}" if self.stop_token_ids else ""
        return f"{self.name}{stops}"
