"""Every reach of the Gemini transport into google-genai's and websockets' private members, each probed
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

websockets' synchronous core of ``Connection.send``
    :class:`~realtime_resumption.reaches.DirectSend` (``reaches.py``, which both providers'
    connections use): a chunk the socket takes without waiting is written with no coroutine.

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

from realtime_resumption.reaches import Reach

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
