"""Shows secrets (API keys, resumption handles) in logs and reprs without giving them away."""

from __future__ import annotations

import logging
from typing import Final

from websockets.frames import Close, Frame, Opcode

from realtime_resumption.handles import HandleRef

_SHOWN = 4

SECRET_HEADERS: Final = frozenset({"x-goog-api-key", "authorization"})
"""Request headers that carry a credential."""

WEBSOCKETS_LOGGERS: Final = ("websockets.client", "websockets.server")


def redact(secret: str | HandleRef | None) -> str:
    """A loggable stand-in for ``secret``: its first few characters and its length.

    ``None`` and the empty string are shown as such, so a log still tells "no handle" apart
    from "a handle"; a short secret shows no characters at all. A :class:`HandleRef` holds no
    secret: it is shown as it is.
    """
    if secret is None:
        return "<none>"
    if isinstance(secret, HandleRef):
        return repr(secret)
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
    """Keeps secrets out of websockets' DEBUG lines: the credential headers of the handshake
    (``> name: value``), the reason of a close frame (``< CLOSE 1011 (internal error)
    reason``: a server may echo a handle or a key there), and data frames that hold a
    resumption handle (their preview shows the head and the tail of the JSON, where a handle
    may sit). The transport's own lines show close reasons with its secrets redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not isinstance(args, tuple):
            return True
        if (
            len(args) == 2
            and record.msg in ("> %s: %s", "< %s: %s")
            and str(args[0]).lower() in SECRET_HEADERS
        ):
            record.args = (args[0], redact(str(args[1])))
        elif len(args) == 1 and record.msg in ("> %s", "< %s") and isinstance(args[0], Frame):
            record.args = (_frame_line(args[0]),)
        return True


def _frame_line(frame: Frame) -> str | Frame:
    """What websockets' DEBUG line shows of ``frame``: the frame itself unless it may hold a
    secret."""
    if frame.opcode is Opcode.CLOSE:
        try:
            close = Close.parse(frame.data)
        except Exception:
            return f"CLOSE [{len(frame.data)} bytes]"
        reason = f" {redact(close.reason)}" if close.reason else ""
        return f"CLOSE {Close(close.code, '')}{reason} [{len(frame.data)} bytes]"
    if frame.opcode in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT) and b"andle" in frame.data:
        size = len(frame.data)
        return f"{frame.opcode.name} <withheld: it holds a resumption handle> [{size} bytes]"
    return frame


_HEADER_FILTER: Final = SecretHeaderFilter()


def filter_websockets_headers() -> None:
    """Keep secrets out of websockets' DEBUG logging: its handshake lines print every header
    (``x-goog-api-key`` and ``Authorization`` included), its frame lines print close reasons
    and the ends of data frames (see ``SecretHeaderFilter``). Idempotent; the transport calls
    it when it is made."""
    for name in WEBSOCKETS_LOGGERS:
        websockets_logger = logging.getLogger(name)
        if _HEADER_FILTER not in websockets_logger.filters:
            websockets_logger.addFilter(_HEADER_FILTER)
