"""What Gemini Live's close codes mean, read into the failure policy's terms.

The service closes a refused resume or setup with a WebSocket close code and a reason meant for
people; only the code is read (``failures.CloseMeaning``), never the reason:

- 1007 (invalid frame payload data): the request cannot be taken, a resumption handle the
  service no longer knows or a setup it refuses (an unknown voice, say);
- 1008 (policy violation): the handle is not found;
- 1011 (internal error): a refused resume or a transient failure, which the service does not
  tell apart; right after the setup of a resume while an earlier connection of the session is
  still open, the service refusing a resume while that one is open.
"""

from __future__ import annotations

from typing import Final

from realtime_resumption.failures import CloseMeaning

INVALID_ARGUMENT: Final = 1007
"""The close for a request the service cannot take: a refused handle, or a setup it refuses."""

HANDLE_NOT_FOUND: Final = 1008
"""The close for a handle the service does not know."""

REFUSED_OR_OVERLOADED: Final = 1011
"""The close for a refused resume or a transient failure."""

_MEANINGS: Final = {
    INVALID_ARGUMENT: CloseMeaning.REQUEST_REFUSED,
    HANDLE_NOT_FOUND: CloseMeaning.HANDLE_REFUSED,
    REFUSED_OR_OVERLOADED: CloseMeaning.REFUSED_OR_OVERLOADED,
}


def read_close(code: int | None) -> CloseMeaning:
    """What Gemini Live means by closing with ``code`` (a ``failures.CloseReading``)."""
    if code is None:
        return CloseMeaning.CLOSED
    return _MEANINGS.get(code, CloseMeaning.CLOSED)
