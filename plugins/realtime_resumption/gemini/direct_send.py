"""Writing a text frame on the session's WebSocket without a coroutine, when it can take it.

``websockets``' ``Connection.send`` is a coroutine around a synchronous core: it checks the
connection is open and no fragmented message is under way, frames the text (its sans-I/O
``protocol``), hands the bytes to the transport (``send_data``) and waits for the write buffer
to drain. When the buffer is below its high-water mark (not ``paused``) that wait is empty, so
the whole send is synchronous work; for the 50 audio chunks a second of every call, the
coroutine and the ``send_context`` async context manager around it cost more than framing the
chunk. :class:`DirectSend` does the synchronous core itself and declines (returns False,
writing nothing) whenever ``send`` would do more than that: the connection not open, a
fragmented message under way, the buffer full, the transport closing. The caller then awaits
``send`` as usual, which waits, raises ``ConnectionClosed`` or closes as it documents.

Only a ``websockets.asyncio`` connection with every member used here gets a direct sender
(:meth:`DirectSend.of`); anything else (another WebSocket library, a version that renamed
them) writes through ``send`` alone. The guard of a fragmented message is the one member whose
name changed within the supported range: ``fragmented_send_waiter`` in websockets 13,
``send_in_progress`` from 14 on (the same future, set while a fragmented message is sent).
"""

from __future__ import annotations

from typing import Final

from websockets.asyncio.connection import Connection
from websockets.protocol import State

_MEMBERS: Final = ("protocol", "paused", "transport", "send_data")
_FRAGMENT_GUARDS: Final = ("send_in_progress", "fragmented_send_waiter")
"""The name of the future set while a fragmented message is under way, newest first."""


class DirectSend:
    """Synchronous text sends on one ``websockets.asyncio`` connection (see the module)."""

    __slots__ = ("_connection", "_guard")

    def __init__(self, connection: Connection, guard: str) -> None:
        self._connection = connection
        self._guard = guard

    @classmethod
    def of(cls, ws: object) -> DirectSend | None:
        """A direct sender for ``ws``; None when it is not a ``websockets.asyncio`` connection
        with the members this relies on."""
        if not isinstance(ws, Connection) or not all(hasattr(ws, name) for name in _MEMBERS):
            return None
        guard = next((name for name in _FRAGMENT_GUARDS if hasattr(ws, name)), None)
        return None if guard is None else cls(ws, guard)

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
