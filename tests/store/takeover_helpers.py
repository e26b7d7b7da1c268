"""Helpers for the takeover tests: transports with a store, and a worker that dies mid-call."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.gemini.live_options import StoreOptions
from realtime_resumption.gemini.stored_session import RecordCodec, RecordError, SessionSnapshot
from realtime_resumption.store import SessionStore
from realtime_resumption.testing.emulator import Emulator, user_audio
from realtime_resumption.testing.emulator.audio import UserAudioDecoder

from ..transport.transport_helpers import (
    GRACE,
    MODEL,
    Recorder,
    connected_and_answered,
)

KEY = "call-7"
CHUNK = 0.02
"""Seconds of user audio per chunk (a microphone's real-time pace)."""
OPTIONS = StoreOptions(write_interval=0.25, lease_ttl=1.0, lease_wait=3.0)
SAVED_WITHIN = 5.0
"""Seconds a test waits for a saver to store what it checks: its next beat is at most
``write_interval`` away, the rest is a loaded machine's slack."""


def make_transport(
    emu: Emulator,
    store: SessionStore,
    options: StoreOptions = OPTIONS,
    *,
    key: str = KEY,
    **more: Any,
) -> GeminiLiveTransport:
    """A transport on ``emu`` keeping its call in ``store`` under ``key``."""
    more.setdefault("model", MODEL)
    more.setdefault("tool_call_grace", GRACE)
    return GeminiLiveTransport(
        client=emu.client(vertex=emu.config.profile == "vertex"),
        store=store,
        session_key=key,
        store_options=options,
        **more,
    )


async def stream_speech(
    transport: GeminiLiveTransport,
    first: int,
    count: int,
    *,
    speech: bool = True,
    words: Iterable[str] = (),
    sent: list[int] | None = None,
) -> None:
    """The user talking (silent with ``speech=False``): ``count`` 20 ms chunks numbered from
    ``first``, in real time, the first ones carrying ``words`` (what the emulator recognises
    in them). ``sent`` gets each chunk's seq as the transport takes it."""
    spoken = list(words)
    for seq in range(first, first + count):
        word = spoken.pop(0) if spoken else None
        transport.send_audio(user_audio(seq, speech=speech, word=word))
        if sent is not None:
            sent.append(seq)
        await asyncio.sleep(CHUNK)


async def answered_call(
    emu: Emulator, store: SessionStore, options: StoreOptions = OPTIONS, **more: Any
) -> tuple[GeminiLiveTransport, Recorder]:
    """A worker's call on ``store`` (``make_transport``'s ``more``): connected, past its first
    answer and the session's first handle. Returns the transport and what it reported."""
    transport = make_transport(emu, store, options, **more)
    rec = await connected_and_answered(transport)
    return transport, rec


async def take_over_and_talk(
    emu: Emulator, store: SessionStore, first: int, options: StoreOptions = OPTIONS
) -> Recorder:
    """The next worker takes the call over: it connects, the user says ten chunks numbered from
    ``first``, and it hangs up. Returns what its transport reported."""
    b = make_transport(emu, store, options)
    rec_b = Recorder(b)
    await b.connect()
    await stream_speech(b, first, 10)
    await asyncio.sleep(0.1)
    await b.disconnect()
    return rec_b


async def crash(transport: GeminiLiveTransport, *, hung: bool = False) -> None:
    """The worker dies: nothing it runs goes on (its saver stops where it is, its connection
    is cut without a close handshake) and it never disconnects, so its lease and record stay
    in the store. ``hung``: it stops without dying, its connection left open. This reaches
    into the transport: a process that dies has no API for it."""
    persister = transport._persister
    assert persister is not None
    await persister.stop()
    # A dead process runs no teardown: whatever later closes its objects leaves the store be.
    transport._persister = None
    conn = transport._s.current
    assert conn is not None
    if not hung:
        conn._abort_socket()  # the kernel drops a killed process's sockets: no close handshake
    transport.abort_incumbent()
    # What the process still ran dies with it.
    for task in transport._s.tasks:
        task.cancel()


async def start_worker(mode: str, emu: Emulator, redis_url: str) -> asyncio.subprocess.Process:
    """A worker process (``tests/store/worker.py``) taking the call under ``KEY`` in ``mode``,
    its chunks numbered from 1000; it prints a line per chunk its transport accepted."""
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.store.worker",
        mode,
        emu.base_url,
        emu.ca_file,
        redis_url,
        KEY,
        "1000",
        stdout=asyncio.subprocess.PIPE,
        cwd=Path(__file__).parents[2],
    )
    assert worker.stdout is not None
    return worker


async def stored_handle(store: SessionStore, key: str = KEY) -> str | None:
    """The handle of the record stored under ``key`` (in clear); None without one."""
    record = await store.load(key)
    return RecordCodec(session_key=key).decode(record).handle if record is not None else None


async def current(store: SessionStore, handle: str | None, key: str = KEY) -> bool:
    """Whether the stored record is there and holds the session's latest handle (the store
    came back empty, and the session had new handles while it was down)."""
    return await store.load(key) is not None and await stored_handle(store, key) == handle


async def saved(
    store: SessionStore, holds: Callable[[SessionSnapshot], bool], key: str = KEY
) -> SessionSnapshot:
    """The session stored under ``key`` (in clear), once it ``holds``: what a worker's saver
    has written by then. Bounded by ``SAVED_WITHIN``, not a fixed sleep: the saver's beats
    signal nothing, and a loaded machine delays them. A record it cannot read (one the saver
    is still to replace) counts as not yet."""
    codec = RecordCodec(session_key=key)
    async with asyncio.timeout(SAVED_WITHIN):
        while True:
            record = await store.load(key)
            with contextlib.suppress(RecordError):
                if record is not None and holds(snapshot := codec.decode(record)):
                    return snapshot
            await asyncio.sleep(0.02)


def stored_speech(snapshot: SessionSnapshot) -> set[int]:
    """The seqs of the user's audio chunks in a stored session's input."""
    decoder = UserAudioDecoder()
    return {
        chunk.seq
        for message in snapshot.input
        if message.kind == "audio" and isinstance(message.payload, bytes)
        for chunk in decoder.feed(message.payload)
    }
