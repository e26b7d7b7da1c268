"""Shows secrets (API keys, resumption handles) in logs and reprs without giving them away."""

from __future__ import annotations

import logging
from typing import Final

_SHOWN = 4

SECRET_HEADERS: Final = frozenset({"x-goog-api-key", "authorization"})
"""Request headers that carry a credential."""

WEBSOCKETS_LOGGERS: Final = ("websockets.client", "websockets.server")


def redact(secret: str | None) -> str:
    """A loggable stand-in for ``secret``: its first few characters and its length.

    ``None`` and the empty string are shown as such, so a log still tells "no handle" apart
    from "a handle"; a short secret shows no characters at all.
    """
    if secret is None:
        return "<none>"
    if not secret:
        return "<empty>"
    if len(secret) <= 2 * _SHOWN:
        return f"<{len(secret)} chars>"
    return f"{secret[:_SHOWN]}…<{len(secret)} chars>"


class Secret(str):
    """A ``str`` whose ``repr`` is redacted: a resumption handle or an API key.

    It is the secret itself everywhere a ``str`` is used (the wire, comparisons, ``f"{s}"``),
    but tracebacks that print their frames' variables (loguru's ``diagnose``), dataclass and
    pydantic reprs, and containers show only ``redact(secret)``.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Secret({redact(self)})"


def secret(value: str) -> Secret:
    """``value`` as a :class:`Secret`."""
    return value if isinstance(value, Secret) else Secret(value)


class SecretHeaderFilter(logging.Filter):
    """Redacts credential headers in websockets' DEBUG handshake lines (``> name: value``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if (
            isinstance(args, tuple)
            and len(args) == 2
            and record.msg in ("> %s: %s", "< %s: %s")
            and str(args[0]).lower() in SECRET_HEADERS
        ):
            record.args = (args[0], redact(str(args[1])))
        return True


_HEADER_FILTER: Final = SecretHeaderFilter()


def filter_websockets_headers() -> None:
    """Keep credentials out of websockets' DEBUG logging (its handshake lines print every
    header, ``x-goog-api-key`` and ``Authorization`` included). Idempotent; the transport
    calls it when it is made."""
    for name in WEBSOCKETS_LOGGERS:
        websockets_logger = logging.getLogger(name)
        if _HEADER_FILTER not in websockets_logger.filters:
            websockets_logger.addFilter(_HEADER_FILTER)
