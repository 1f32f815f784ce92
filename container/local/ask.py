"""`make ask Q="..."`: stream one answer from the running server, then print the products and TTFT."""

from __future__ import annotations

import argparse
import sys

import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from local.client import StreamingClient


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make ask", description=__doc__.splitlines()[0])
    parser.add_argument("question")
    parser.add_argument("--url", default="127.0.0.1:8001", help="Triton gRPC address")
    parser.add_argument("--model", default="assistant")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="default: the model's (its generation_config.json, or the config's model.sampling_defaults)",
    )
    args = parser.parse_args(argv)
    try:
        ready = grpcclient.InferenceServerClient(url=args.url).is_model_ready(args.model)
    except InferenceServerException:
        print(f"error: no Triton server at {args.url}; start one with `make serve`", file=sys.stderr)
        return 1
    if not ready:
        print(f"error: model {args.model!r} is not ready on {args.url} (still loading?)", file=sys.stderr)
        return 1
    sent = {"max_tokens": args.max_tokens}
    if args.temperature is not None:
        sent["temperature"] = args.temperature
    try:
        with StreamingClient(args.url) as client:
            result = client.ask(
                args.question,
                model=args.model,
                sampling=sent,
                on_chunk=lambda text: print(text, end="", flush=True),
                extra_inputs={"return_sampling_parameters": True} if args.model == "assistant" else None,
            )
    except InferenceServerException as err:
        print(
            f"error: cannot reach Triton at {args.url} ({err.message()}); is `make serve` running?",
            file=sys.stderr,
        )
        return 1
    print()
    if result.error is not None:
        print(f"error: {result.error}", file=sys.stderr)
        return 1
    print(f"\nproducts ({len(result.products)}):")
    for card in result.products:
        print(
            f"  - {card['title']}  ${card['price']:.2f}\n"
            f"    {card['url']}\n    image: {card.get('image_url')}"
        )
    if result.sampling_used is not None:
        # The model's defaults (generation_config.json, config overrides) under this request's own keys.
        used = ", ".join(
            f"{key} {value} ({'asked' if key in sent else 'default'})"
            for key, value in sorted(result.sampling_used.items())
        )
        print(f"\nsampling: {used}")
    ttft = f"{result.ttft_s * 1000:.0f} ms" if result.ttft_s is not None else "n/a"
    print(f"\ntime to first token: {ttft}; {len(result.chunks)} chunks in {result.total_s:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
