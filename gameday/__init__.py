"""Game day, offline: the whole deployment through a peak day with faults, minute by minute, driven by
the synthesized templates of a config and the real traffic orchestrator on moto."""
