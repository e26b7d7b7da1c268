"""Scripted faults of the OpenAI Realtime emulator: refused dials, slow sessions, drops, closes.

The cap itself is configuration (``OpenAIEmulatorConfig.session_cap``); these are the faults a
test sets off or arms for the next dials.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Protocol

REFUSALS: dict[int, tuple[str, str | None, str]] = {
    401: (
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
    ),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Forbidden."),
    429: (
        "insufficient_quota",
        "insufficient_quota",
        "You exceeded your current quota, please check your plan and billing details.",
    ),
    500: ("server_error", None, "The server had an error while processing your request."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}
"""(type, code, message) of the JSON error body of each refused upgrade, as the API's HTTP
errors are spelt (API reference, "Error codes": 401 invalid key, 429 quota or rate limit)."""


class Served(Protocol):
    """What a fault needs of a served connection (``realtime_session.ServedSession``)."""

    @property
    def session_id(self) -> str | None: ...

    def drop(self) -> None: ...

    def send_error(self, code: str | None, message: str, type_: str) -> None: ...

    def close_with(self, code: int, reason: str) -> None: ...


class Faults:
    """The faults of one emulator; every fault is off until a test sets it."""

    def __init__(self, served: Callable[[], list[Served]]) -> None:
        self._served = served
        self._refusals: deque[int] = deque()
        self._slow: deque[float] = deque()

    def refuse_dials(self, status: int = 429, count: int = 1) -> None:
        """Refuse the next ``count`` upgrades with HTTP ``status`` (one of :data:`REFUSALS`)
        and the API's JSON error body: the client's connect raises, no session starts."""
        if status not in REFUSALS:
            raise ValueError(f"status must be one of {sorted(REFUSALS)}")
        self._refusals.extend([status] * count)

    def take_refusal(self) -> int | None:
        """The status to refuse this upgrade with, if one is armed."""
        return self._refusals.popleft() if self._refusals else None

    def slow_session_created(self, seconds: float, count: int = 1) -> None:
        """The next ``count`` sessions send ``session.created`` ``seconds`` (unscaled) after
        the upgrade instead of the configured latency."""
        if seconds < 0:
            raise ValueError("seconds must be >= 0")
        self._slow.extend([seconds] * count)

    def take_session_created_latency(self) -> float | None:
        """The slow latency armed for this session, if any (unscaled)."""
        return self._slow.popleft() if self._slow else None

    def drop(self, session_id: str | None = None) -> int:
        """Abort the TCP connection of ``session_id`` (every session if None): no close frame,
        the client sees 1006. Returns how many were dropped."""
        chosen = self._chosen(session_id)
        for served in chosen:
            served.drop()
        return len(chosen)

    def error(
        self,
        code: str | None,
        message: str,
        *,
        type_: str = "invalid_request_error",
        session_id: str | None = None,
    ) -> int:
        """Send ``session_id`` (every session if None) an ``error`` event no client event
        caused, as the service does when the account stops paying mid-call (``code``
        ``insufficient_quota``: LiveKit's OpenAI plugin ends its session on it,
        ``_realtime/openai.py`` ``_FATAL_ERROR_CODES``). Returns how many were sent one."""
        chosen = self._chosen(session_id)
        for served in chosen:
            served.send_error(code, message, type_)
        return len(chosen)

    def close(self, code: int, reason: str, session_id: str | None = None) -> int:
        """Close ``session_id`` (every session if None) with ``code`` and ``reason``."""
        chosen = self._chosen(session_id)
        for served in chosen:
            served.close_with(code, reason)
        return len(chosen)

    def _chosen(self, session_id: str | None) -> list[Served]:
        served = [s for s in self._served() if s.session_id is not None]
        if session_id is None:
            return served
        return [s for s in served if s.session_id == session_id]
