"""What the process has learned about each endpoint: whether it refuses a resume while an
earlier connection of the same session is open.

The live service was measured doing so (close 1011 right after the setup frame); a kind server
takes the resume at once. Each session learns it at its first refused move, and the process
remembers it per endpoint (the service's host, on the Gemini API or Vertex AI), so later moves
and sessions go straight to break-before-make instead of paying a refused dial each. The memory
lasts :data:`REMEMBER_FOR` seconds: a transient 1011 (the same code is also the service's
"internal error") then costs make-before-break for an hour at most, and a service that starts
accepting it is noticed again.
"""

from __future__ import annotations

import time
from typing import Final

REMEMBER_FOR: Final = 3600.0
"""Seconds an endpoint stays in break-before-make mode after its last refusal."""


class EndpointModes:
    """Endpoints known to refuse a resume while the incumbent is open (keys hold no secret:
    the flavour and the host)."""

    def __init__(self, remember_for: float = REMEMBER_FOR) -> None:
        self._remember_for = remember_for
        self._refused_at: dict[str, float] = {}

    def break_first(self, endpoint: str | None, now: float | None = None) -> bool:
        """Whether a move to ``endpoint`` should close the incumbent before dialling."""
        if endpoint is None:
            return False
        at = self._refused_at.get(endpoint)
        if at is None:
            return False
        if _now(now) - at > self._remember_for:
            del self._refused_at[endpoint]
            return False
        return True

    def refused_while_open(self, endpoint: str | None, now: float | None = None) -> None:
        """``endpoint`` refused a resume while the incumbent was open."""
        if endpoint is not None:
            self._refused_at[endpoint] = _now(now)

    def forget(self) -> None:
        """Forget every endpoint."""
        self._refused_at.clear()


def _now(now: float | None) -> float:
    return time.monotonic() if now is None else now


ENDPOINTS: Final = EndpointModes()
"""The process's memory (every transport shares it)."""
