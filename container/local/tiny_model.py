"""Build a tiny Llama with random weights and a byte-level BPE tokenizer trained on catalog text.

It stands in for the production model on machines without Neuron devices: vLLM runs it for real on the CPU,
so the serving path (engine, streaming, cancellation, batching) is the production one; only the words are
nonsense. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

# Printable ASCII plus newline: every token is then valid text on its own, so a random model can never
# stream half a UTF-8 character (byte tokens above 0x7f would decode to U+FFFD).
_ASCII_BYTES = [*range(0x20, 0x7F), 0x0A]
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
# Llama 3's chat layout, so the tiny model takes the same prompt path as the production Instruct model.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
MODEL_SHAPE = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "head_dim": 64,
}
MAX_POSITIONS = 4096


def catalog_texts(catalog_path: Path) -> Iterator[str]:
    """Every string value of every JSON Lines record: titles, descriptions, categories..."""
    with catalog_path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield " ".join(_strings(json.loads(line)))


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def train_tokenizer(texts: Iterable[str], vocab_size: int):
    """A byte-level BPE limited to printable ASCII, wrapped as a Hugging Face fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    byte_level = _byte_level_map()
    alphabet = [byte_level[b] for b in _ASCII_BYTES]
    assert set(alphabet) <= set(pre_tokenizers.ByteLevel.alphabet())

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=alphabet,
        limit_alphabet=len(alphabet),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_ascii_only(texts), trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def _byte_level_map() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table, as the ByteLevel pre-tokenizer uses it."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {byte: chr(char) for byte, char in zip(printable, chars, strict=True)}


def _ascii_only(texts: Iterable[str]) -> Iterator[str]:
    for text in texts:
        yield text.encode("ascii", "ignore").decode("ascii")


def build_tiny_model(catalog_path: Path, out_dir: Path, *, vocab_size: int = 2048, seed: int = 0) -> Path:
    """Write config, random safetensors weights and tokenizer files to out_dir; return out_dir."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = train_tokenizer(catalog_texts(catalog_path), vocab_size)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
        torch_dtype="float32",
        **MODEL_SHAPE,
    )
    model = LlamaForCausalLM(config)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    write_generation_config(out_dir, bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id)
    return out_dir


# Llama 3.1 Instruct's own sampling defaults (its generation_config.json): the tiny model carries them, so the
# tests see a model's defaults reach the engine. No penalty: a random model rarely samples </s> as it is.
TINY_SAMPLING_DEFAULTS = {"temperature": 0.6, "top_p": 0.9}


def write_generation_config(out_dir: Path, *, bos_token_id: int, eos_token_id: int) -> None:
    from transformers import GenerationConfig

    GenerationConfig(
        bos_token_id=bos_token_id, eos_token_id=eos_token_id, do_sample=True, **TINY_SAMPLING_DEFAULTS
    ).save_pretrained(out_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--catalog", type=Path, required=True, help="catalog JSON Lines file (tokenizer text)"
    )
    parser.add_argument("--out", type=Path, required=True, help="model folder to write")
    parser.add_argument("--vocab-size", type=int, default=2048)
    args = parser.parse_args(argv)
    if not args.catalog.is_file():
        print(f"error: catalog file not found: {args.catalog}", file=sys.stderr)
        return 2
    build_tiny_model(args.catalog, args.out, vocab_size=args.vocab_size)
    print(f"tiny model written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
