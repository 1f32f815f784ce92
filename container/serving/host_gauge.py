"""The per-host gauge across engine replicas: each replica posts its counts, the first one writes the line.

Replicas are separate processes (one Triton model instance each), and the scaling signal is per host: every
replica writes its counts to a small file under a folder named for the Triton server process, and replica 0
sums the fresh ones into the host's line. With one replica no file is written.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from assistant.metrics import HostGauge
from serving.replicas import ReplicaPlacement

# A replica that has not posted for this long is left out of the sum (its engine is unloading).
STALE_AFTER_S = 60.0


@dataclass
class HostGaugeBoard:
    folder: Path
    model_name: str
    replica: ReplicaPlacement

    @classmethod
    def for_server(cls, model_name: str, replica: ReplicaPlacement) -> HostGaugeBoard:
        # The stub's parent is the Triton server: its replicas share the folder, other servers don't.
        folder = Path(tempfile.gettempdir()) / f"llm-host-gauge-{os.getppid()}"
        return cls(folder, model_name, replica)

    @property
    def _own_file(self) -> Path:
        return self.folder / f"{self.model_name}-{self.replica.index}.json"

    def post(self, in_flight: int, queued: int, kv_cache_usage: float, slots: int) -> HostGauge | None:
        """Record this replica's counts; return the host's gauge if this replica writes it."""
        own = HostGauge(in_flight, queued, kv_cache_usage, slots)
        if self.replica.count == 1:
            return own
        self.folder.mkdir(parents=True, exist_ok=True)
        staging = self._own_file.with_suffix(".tmp")
        staging.write_text(json.dumps(own.__dict__))
        staging.replace(self._own_file)
        if self.replica.index != 0:
            return None
        return sum_fresh(self.folder.glob(f"{self.model_name}-*.json"), now=time.time())

    def leave(self) -> None:
        with contextlib.suppress(OSError):
            self._own_file.unlink(missing_ok=True)
            self.folder.rmdir()  # only succeeds once the last replica has left


def sum_fresh(paths, *, now: float) -> HostGauge:
    in_flight = queued = slots = 0
    usages: list[float] = []
    for path in paths:
        try:
            if now - path.stat().st_mtime > STALE_AFTER_S:
                continue
            posted = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        in_flight += posted["in_flight"]
        queued += posted["queue_depth"]
        slots += posted["serving_slots"]
        usages.append(posted["kv_cache_usage"])
    # Each replica has its own KV cache of the same size: the host's use is their mean.
    usage = sum(usages) / len(usages) if usages else 0.0
    return HostGauge(in_flight, queued, usage, slots)
