"""Keeping an OpenAI Realtime call in a ``SessionStore``, so another process can take it over.

:class:`RealtimeKeeper` is the core's :class:`~realtime_resumption.record_keeper.RecordKeeper`
(the lease, the save beats, the hand-over, the end: see there) for an
``OpenAIRealtimeTransport``: its snapshot is the transport's
:class:`~realtime_resumption.openai.realtime_record.RealtimeRecord`, taken by the transport
(``capture``), and a session runs while the transport says so (``serving``). The takeover
itself is the transport's: a new session rebuilt from the record.
"""

from __future__ import annotations

from collections.abc import Callable

from realtime_resumption.openai.realtime_record import RealtimeRecord, RealtimeRecordCodec
from realtime_resumption.record_keeper import RecordKeeper
from realtime_resumption.store import SessionStore, StoreOptions


class RealtimeKeeper(RecordKeeper[RealtimeRecord]):
    """The store I/O of one OpenAI Realtime call; see the module documentation."""

    def __init__(
        self,
        store: SessionStore,
        key: str,
        options: StoreOptions,
        *,
        capture: Callable[[], RealtimeRecord],
        serving: Callable[[], bool],
        report: Callable[[Exception], None],
        describe: str,
    ) -> None:
        super().__init__(
            store,
            key,
            options,
            lambda session_key, writer: RealtimeRecordCodec(
                options.encryption_key, session_key=session_key, writer=writer
            ),
            report=report,
            describe=describe,
        )
        self._capture = capture
        self._serving = serving

    def snapshot(self) -> RealtimeRecord:
        return self._capture()

    def active(self) -> bool:
        return self._serving()
