"""Reaching into a library's private members, each reach probed once and with its fallback to
the public path; and the one reach both providers' connections take.

:class:`Reach` is one reach: its probe, run at the first use, and the one log line when it is
not taken. ``gemini.sdk_internals`` holds google-genai's; ``openai.realtime_connection`` the
``openai`` SDK's socket.

``Connection.paused``, ``send_data``, ``protocol``, ``transport`` and the fragmented-send guard
(websockets ``asyncio``)
    websockets' synchronous core of ``send`` (:class:`DirectSend`): a chunk the socket takes
    without waiting is written with no coroutine. The guard is ``fragmented_send_waiter`` in
    websockets 13, ``send_in_progress`` from 14 on. Probed on the first connection of each
    class. Fallback: every frame is awaited through ``Connection.send``.

The versions they are known to take are the CI matrix's (``.ci/matrix``);
``tests/versions/test_sdk_reaches.py`` fails on a cell where one falls back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from loguru import logger
from websockets.asyncio.connection import Connection
from websockets.protocol import State


class Reach:
    """One reach: its probe, run once at the first use, and the one log line of a failure."""

    __slots__ = ("fallback", "name", "probe", "verdict")

    def __init__(self, name: str, fallback: str, probe: Callable[[], str | None]) -> None:
        self.name = name
        self.fallback = fallback
        self.probe = probe
        """None when the members are there, else why not."""
        self.verdict: bool | None = None
        """Whether the reach is taken; None until probed."""

    def taken(self) -> bool:
        """Whether the members are there (probed at the first call, logged if not)."""
        verdict = self.verdict
        if verdict is None:
            try:
                why = self.probe()
            except Exception as error:
                why = f"the probe raised {error!r}"
            verdict = self.verdict = why is None
            if why is not None:
                logger.info("{} not taken ({}): {}", self.name, why, self.fallback)
        return verdict


# --- websockets: the synchronous core of Connection.send ----------------------------------

_SEND_CORE: Final = ("protocol", "paused", "transport", "send_data")
_FRAGMENT_GUARDS: Final = ("send_in_progress", "fragmented_send_waiter")
"""The name of the future set while a fragmented message is under way, newest first."""
_GUARDS: dict[type, str | None] = {}
"""Class of WebSocket -> the name of its fragment guard, None when it has no send core."""


def _guard_of(ws: object) -> str | None:
    kind = type(ws)
    if kind in _GUARDS:
        return _GUARDS[kind]
    guard: str | None = None
    if not isinstance(ws, Connection):
        why = "not a websockets.asyncio connection"
    elif missing := [name for name in _SEND_CORE if not hasattr(ws, name)]:
        why = f"it has no {', '.join(missing)}"
    else:
        guard = next((name for name in _FRAGMENT_GUARDS if hasattr(ws, name)), None)
        why = f"it has none of {', '.join(_FRAGMENT_GUARDS)}" if guard is None else ""
    if guard is None:
        logger.info(
            "websockets' synchronous send core not taken on {} ({}): frames go through send",
            kind.__qualname__,
            why,
        )
    _GUARDS[kind] = guard
    return guard


class DirectSend:
    """Writes a text frame on a ``websockets.asyncio`` connection without a coroutine, when it
    can take it.

    ``Connection.send`` is a coroutine around a synchronous core: it checks the connection is
    open and no fragmented message is under way, frames the text (its sans-I/O ``protocol``),
    hands the bytes to the transport (``send_data``) and waits for the write buffer to drain.
    Below the buffer's high-water mark (not ``paused``) that wait is empty, so the whole send is
    synchronous work; for the 50 audio chunks a second of every call, the coroutine and its
    ``send_context`` cost more than framing the chunk. This does the synchronous core itself and
    declines (returns False, writing nothing) whenever ``send`` would do more: the connection
    not open, a fragmented message under way, the buffer full, the transport closing. The caller
    then awaits ``send`` as usual, which waits, raises ``ConnectionClosed`` or closes as it
    documents.
    """

    __slots__ = ("_connection", "_guard")

    def __init__(self, connection: Connection, guard: str) -> None:
        self._connection = connection
        self._guard = guard

    @classmethod
    def of(cls, ws: object) -> DirectSend | None:
        """A direct sender for ``ws``; None when it is not a ``websockets.asyncio`` connection
        with the members this relies on (probed once per class of connection)."""
        if ws is None:
            return None
        guard = _guard_of(ws)
        return None if guard is None else cls(ws, guard)  # type: ignore[arg-type]

    def send_text(self, text: str) -> bool:
        """Write ``text`` as one Text frame now; False, having written nothing, when only
        ``Connection.send`` may write it (it would wait or fail).

        Raises ``OSError`` (having aborted the connection) when the transport refused the
        bytes, as ``send`` would after closing."""
        connection = self._connection
        if (
            connection.protocol.state is not State.OPEN
            or getattr(connection, self._guard) is not None
            or connection.paused
            or connection.transport.is_closing()
        ):
            return False
        connection.protocol.send_text(text.encode())
        try:
            connection.send_data()
        except Exception as error:
            # ``send`` closes the connection on a failed write; the connection's own close
            # path then reports the close to whoever reads.
            connection.transport.abort()
            raise OSError(f"the WebSocket transport refused a write: {error!r}") from error
        return True
