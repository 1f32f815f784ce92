from __future__ import annotations

# The artifacts bucket and its fixture serve the serving tests too: they live in tests/container/conftest.py.
from tests.container.conftest import ARTIFACTS_BUCKET as ARTIFACTS_BUCKET
