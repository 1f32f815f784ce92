"""The demo catalog, its index and the tiny model, built on first use under build/ (git-ignored)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parents[2]
DEFAULT_BUILD_DIR = REPO_DIR / "build" / "serve"
DEMO_PRODUCTS = 5_000
DEMO_SEED = 7


@dataclass(frozen=True)
class DemoAssets:
    catalog: Path
    index_dir: Path
    model_dir: Path


def tiny_model_folder() -> str:
    """transformers 5 writes tokenizer and config files that 4.x cannot read (vLLM 0.13's environment has
    4.x): each major version gets a tiny model of its own, so both serving environments share build/."""
    from importlib.metadata import version

    return f"tiny-model-transformers{version('transformers').split('.')[0]}"


def ensure_demo_assets(build_dir: Path = DEFAULT_BUILD_DIR, *, products: int = DEMO_PRODUCTS) -> DemoAssets:
    """Build whatever is missing; each step writes a marker last, so an interrupted build is redone."""
    from assistant.catalog import generate_catalog, write_catalog
    from assistant.retrieve import INDEX_FORMAT, build_index
    from local.tiny_model import build_tiny_model

    build_dir = build_dir.resolve()
    assets = DemoAssets(build_dir / "catalog.jsonl", build_dir / "index", build_dir / tiny_model_folder())
    build_dir.mkdir(parents=True, exist_ok=True)
    catalog_done = build_dir / ".catalog-v2.done"
    if not catalog_done.exists():
        write_catalog(generate_catalog(products, DEMO_SEED), assets.catalog)
        catalog_done.touch()
    index_done = build_dir / f".index-v{INDEX_FORMAT}.done"
    if not index_done.exists():
        build_index(assets.catalog, assets.index_dir)
        index_done.touch()
    # Named for what the model has: a rebuilt tiny model (here: with a chat template) gets a new marker.
    model_done = build_dir / f".{assets.model_dir.name}-chat.done"
    if not model_done.exists():
        build_tiny_model(assets.catalog, assets.model_dir)
        model_done.touch()
    # Sampling defaults in its generation_config.json (Llama 3.1's): written over a model built before them.
    defaults_done = build_dir / f".{assets.model_dir.name}-sampling-defaults.done"
    if not defaults_done.exists():
        import json

        from local.tiny_model import write_generation_config

        config = json.loads((assets.model_dir / "config.json").read_text())
        write_generation_config(
            assets.model_dir, bos_token_id=config["bos_token_id"], eos_token_id=config["eos_token_id"]
        )
        defaults_done.touch()
    return assets
