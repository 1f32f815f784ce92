"""Triton-side glue: engine settings, the vLLM engine on its own event-loop thread, metrics, the models."""
