"""One line, one write: a process's lines stay whole when threads write to stdout and stderr at once.

print() writes its text and its line end as two writes. When another thread flushes the same stream between
them, the text goes out without its newline, and the next line written to the same file continues it: seen
in the serving tests (stdout and stderr in one log), where the orphan guard's metric line was glued to the
end of the target-group thread's stderr message, so the line no longer began with the EMF object and was
not read as one. Written as one string with its newline, each line reaches the stream whole.
"""

from __future__ import annotations

import sys
from typing import TextIO


def emit(text: str, stream: TextIO | None = None) -> None:
    """Write text and its newline in one call, then flush (stdout when no stream is given)."""
    out = sys.stdout if stream is None else stream
    out.write(text + "\n")
    out.flush()
