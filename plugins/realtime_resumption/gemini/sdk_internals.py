"""Every reach of the package into google-genai's and websockets' private members, each probed
once and each with its fallback to the public path.

None of them is needed for a call to work; each buys speed or a refinement:

``AsyncSession._ws`` and ``_api_client`` (google-genai)
    The live session's WebSocket and API client, which the SDK keeps private. With them, the
    transport writes realtime input on the socket and reads model audio from it itself
    (``messages.Writer``, ``server_events.Reader``: the SDK's pydantic models cost most of a
    call's CPU), and the connection tunes the socket (the pong timeout and the kernel's user
    timeout), reads the kernel's round trip, keys the endpoint by the upgrade's ``Host`` and
    drops the TCP connection of a close that hangs. Probed on a session made with two markers:
    the SDK must keep them under those names. Fallback: every message goes through the SDK's
    ``send_*`` and ``receive``, the socket keeps websockets' defaults, no round trip nor
    endpoint is known, and a close that hangs is left to the SDK.

``Connection.paused``, ``send_data``, ``protocol``, ``transport`` and the fragmented-send guard
(websockets ``asyncio``)
    websockets' synchronous core of ``send`` (:class:`DirectSend`): a chunk the socket takes
    without waiting is written with no coroutine. The guard is ``fragmented_send_waiter`` in
    websockets 13, ``send_in_progress`` from 14 on. Probed on the first connection of each
    class. Fallback: every frame is awaited through ``Connection.send``.

``google.genai.live.ws_connect`` (a module-level name the SDK does not export)
    Where the SDK's ``live.connect`` gets its WebSocket; :func:`wrap_ws_connect` puts a wrapper
    there (``gemini.preopen``: the socket opens before the setup is sent). Probed at the first
    install. Fallback: a break-before-make move closes the old connection before it dials.

A reach whose member is missing or changed logs why once (info) and its callers take the public
path for the rest of the process. The versions they are known to take are the CI matrix's
(``.ci/matrix``), whose newest are the upper bounds in ``pyproject.toml``;
``tests/versions/test_sdk_reaches.py`` fails on a cell where one falls back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from google.genai import live
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


# --- google-genai: the session's socket and client ----------------------------------------


def _session_members() -> str | None:
    socket, client = object(), object()
    try:
        session = live.AsyncSession(api_client=client, websocket=socket)  # type: ignore[arg-type]
    except Exception as error:
        return f"AsyncSession(api_client=..., websocket=...) raised {error!r}"
    missing = [
        name
        for name, given in (("_ws", socket), ("_api_client", client))
        if getattr(session, name, None) is not given
    ]
    return f"AsyncSession keeps no {' nor '.join(missing)}" if missing else None


SESSION_MEMBERS: Final = Reach(
    "google-genai's AsyncSession._ws and _api_client",
    "messages go through the SDK's send and receive, the socket keeps its defaults",
    _session_members,
)


def session_socket(session: live.AsyncSession) -> Any | None:
    """The WebSocket the SDK session writes to and reads from; None without the reach."""
    return getattr(session, "_ws", None) if SESSION_MEMBERS.taken() else None


def session_client(session: live.AsyncSession) -> Any | None:
    """The SDK session's API client; None without the reach."""
    return getattr(session, "_api_client", None) if SESSION_MEMBERS.taken() else None


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


# --- google-genai: where live.connect gets its WebSocket ----------------------------------


def _ws_connect() -> str | None:
    return None if callable(getattr(live, "ws_connect", None)) else "live has no ws_connect"


WS_CONNECT: Final = Reach(
    "google-genai's live.ws_connect",
    "a move that must close the old connection first closes it before it dials",
    _ws_connect,
)


def wrap_ws_connect(wrap: Callable[[Any], Any]) -> bool:
    """Have the SDK's ``live.connect`` use ``wrap(ws_connect(...))`` as its WebSocket's context
    manager (installed once; later calls find it installed); False without the reach."""
    if not WS_CONNECT.taken():
        return False
    original: Callable[..., Any] = live.ws_connect  # type: ignore[attr-defined]
    if getattr(original, "_wrapped_by", None) is wrap:
        return True

    def ws_connect(*args: Any, **kwargs: Any) -> Any:
        return wrap(original(*args, **kwargs))

    ws_connect._wrapped_by = wrap  # type: ignore[attr-defined]
    setattr(live, "ws_connect", ws_connect)  # noqa: B010 (a name the SDK does not export)
    return True
