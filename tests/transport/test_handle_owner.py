"""A resumption handle's text lives in one place: the session's ``HandleBook``.

The parts that must know a handle (the session state, the decider, the move machine, the
outbox's resumption points, the tool-call tracker) hold ``HandleRef`` numbers; after a real
move on the emulator none of them reaches a handle's text, and the book holds it.
"""

from __future__ import annotations

import asyncio
import gc
import types
from collections.abc import Iterable

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.gemini.connection import LiveConnection
from realtime_resumption.gemini.state import TransportState
from realtime_resumption.handles import HandleBook, HandleRef
from realtime_resumption.testing.emulator import Emulator
from realtime_resumption.transport import ContentTurn

from .transport_helpers import Recorder, make_transport

HELLO = [ContentTurn("user", "hello there")]
_OPAQUE = (
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
    types.ModuleType,
    type,
    asyncio.AbstractEventLoop,
    asyncio.Future,
)
"""Objects that lead out of a part (code, the loop, tasks): not followed."""


def _strings(root: object, *, skip: Iterable[object] = ()) -> set[str]:
    """Every ``str`` reachable from ``root`` through containers and the package's own objects,
    stopping at the handle book, the connections, the transport and ``skip``."""
    stop = {id(obj) for obj in skip}
    seen: set[int] = set()
    found: set[str] = set()
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or id(obj) in stop:
            continue
        seen.add(id(obj))
        if isinstance(obj, str):
            found.add(obj)
            continue
        if isinstance(obj, (*_OPAQUE, bytes, int, float)):
            continue
        if obj is not root and isinstance(
            # the book is the owner; the state is checked on its own
            obj,
            (HandleBook, TransportState, LiveConnection, GeminiLiveTransport),
        ):
            continue
        todo.extend(gc.get_referents(obj))
    return found


def _handle_texts(rec: Recorder) -> set[str]:
    """The handles the transport reported, by their text."""
    return {handle for handle, _, _ in rec.of("on_resumption_update") if handle}


async def test_only_the_book_keeps_a_handle_text(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    await transport.connect()
    transport.send_content(HELLO)
    await rec.wait_for("on_turn_complete")
    await rec.wait(lambda r: transport.resumption_handle is not None)
    await transport.reconnect()  # a move: every part has met the session's handles
    transport.send_content(HELLO)
    await rec.wait_for("on_turn_complete", 2)
    # The handle follows the turn's completion; updates without a handle (the Gemini API's
    # while the model answers) do not count.
    await rec.wait(lambda r: len(_handle_texts(r)) >= 2)
    texts = _handle_texts(rec)
    assert len(texts) >= 2

    s = transport._s
    rotation = transport._rotation
    parts: dict[str, tuple[object, list[object]]] = {
        # The redaction list knows every secret, handles included: it keeps them out of logs.
        "state": (s, [s.secrets, s.callbacks]),
        "decider": (rotation._timing, []),
        "move machine": (rotation._machine, []),
        "outbox": (transport._input._outbox, []),
        "tool calls": (transport._tools, []),
    }
    for name, (part, skip) in parts.items():
        assert not _strings(part, skip=skip) & texts, f"the {name} keeps a handle's text"

    assert isinstance(s.latest, HandleRef)
    assert isinstance(rotation._timing.latest_handle, HandleRef)
    assert transport.resumption_handle == s.handles.text(s.latest)
    assert transport.resumption_handle in _strings(s.handles)
    await transport.disconnect()
    # The session's end forgets no handle a later connect resumes from.
    assert transport.resumption_handle is not None
