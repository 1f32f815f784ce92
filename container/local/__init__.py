"""Run the serving stack on this machine: a tiny model, a demo catalog index, a real Triton server."""
