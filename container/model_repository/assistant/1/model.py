"""Triton entry point for the `assistant` model; the code is in container/serving/."""

import sys
from pathlib import Path

# The stub does not honour PYTHONPATH; the container folder is three levels up (<repo>/<model>/<version>/).
_CONTAINER_DIR = str(Path(__file__).resolve().parents[3])
if _CONTAINER_DIR not in sys.path:
    sys.path.insert(0, _CONTAINER_DIR)

from serving.models import AssistantModel as TritonPythonModel  # noqa: E402

__all__ = ["TritonPythonModel"]
