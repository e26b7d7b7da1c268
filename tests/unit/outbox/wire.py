"""The outbox tests' writer: a stand-in for the transport's write loop, and the shortcuts that
submit and write messages through it."""

from __future__ import annotations

from realtime_resumption.outbox import MessageKind, Outbox, OutboxLimits

A = MessageKind.AUDIO
TXT = MessageKind.TEXT
TOOL = MessageKind.TOOL_RESPONSE
CHUNK = 0.02


class Wire:
    """The transport's writer in miniature: writes what the outbox queues, counting indexes
    per connection as the server does (setup is 0)."""

    def __init__(self, outbox: Outbox[str]) -> None:
        self.outbox = outbox
        self.written: dict[int, list[str]] = {}
        self.index: dict[int, int] = {}

    def flush(self, now: float) -> list[str]:
        out: list[str] = []
        conn = self.outbox.live_connection
        while (entry := self.outbox.next_unsent()) is not None:
            assert conn is not None
            index = self.index.get(conn, 0) + 1
            self.outbox.mark_sent(entry, conn, index, now)
            self.index[conn] = index
            self.written.setdefault(conn, []).append(entry.message)
            out.append(entry.message)
        return out


def make(**limits: object) -> tuple[Outbox[str], Wire]:
    outbox: Outbox[str] = Outbox(OutboxLimits(**limits))
    return outbox, Wire(outbox)


def send(outbox: Outbox[str], wire: Wire, now: float, *names: str) -> None:
    """Submit each of ``names`` at ``now`` (``a...`` audio, ``r...`` a tool result, anything
    else text) and write what the outbox queues."""
    for name in names:
        kind = A if name.startswith("a") else TOOL if name.startswith("r") else TXT
        outbox.submit(name, kind, now, audio_seconds=CHUNK if kind is A else 0.0)
    wire.flush(now)
