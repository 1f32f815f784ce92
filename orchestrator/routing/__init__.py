"""The traffic orchestrator: per-region signals -> policy -> Route 53 weights, run every minute."""
