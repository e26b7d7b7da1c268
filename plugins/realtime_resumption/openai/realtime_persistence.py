"""Keeping an OpenAI Realtime call in a ``SessionStore``, so another process can take it over.

:class:`RealtimeKeeper` is the core's :class:`~realtime_resumption.record_keeper.RecordKeeper`
(the lease, the save beats, the hand-over, the end: see there) for an
``OpenAIRealtimeTransport``: its snapshot is the call's
:class:`~realtime_resumption.openai.realtime_record.RealtimeRecord` (the configuration, the
conversation, the function calls in flight, the input no item holds, an answer owed), read
from the transport's parts without changing them; a session runs while a session serves the
call or a move brings the next one up.

Its takeover carries on a call another process left: a new session given the stored
conversation (opened as a move with no incumbent, ``RealtimeMoves.open``: its dials retried
as every dial is), then the input no item held, an answer it owed, and its open function
calls issued again (``on_tool_call``). Reported as a move (``takeover``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from loguru import logger

from realtime_resumption.move_reports import HandleKind, MoveOutcome, MoveReason
from realtime_resumption.openai.call_state import CallState, OpenSession, call_arguments
from realtime_resumption.openai.conversation_seed import build_seed
from realtime_resumption.openai.realtime_moves import RealtimeMoves
from realtime_resumption.openai.realtime_record import (
    RealtimeInput,
    RealtimeRecord,
    RealtimeRecordCodec,
)
from realtime_resumption.openai.realtime_sends import RECORD_BLOCK_MS, RealtimeSends
from realtime_resumption.record_keeper import RecordKeeper
from realtime_resumption.store import SessionStore, StoreOptions
from realtime_resumption.transport import ConnectError, ToolCall


class RealtimeKeeper(RecordKeeper[RealtimeRecord]):
    """The store I/O of one OpenAI Realtime call, its snapshot and its takeover; see the
    module documentation."""

    def __init__(
        self,
        store: SessionStore,
        key: str,
        options: StoreOptions,
        *,
        state: CallState,
        sends: RealtimeSends,
        moves: RealtimeMoves,
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
        self._s = state
        self._sends = sends
        self._moves = moves

    def active(self) -> bool:
        return not self._s.closed and self._moves.serving()

    # --- the snapshot -----------------------------------------------------------------------

    def snapshot(self) -> RealtimeRecord:
        """The call's state now, as the store keeps it. Reads only: the session goes on as
        it is."""
        s = self._s
        session = s.session or self._moves.source
        items = session.state.items if session is not None else ()
        confirmed = {item.id for item in items}
        resend = [event for event in s.unconfirmed.values() if event["item"]["id"] not in confirmed]
        # The items first: sent before the input still uncommitted is committed after them.
        pending = [RealtimeInput(event) for event in resend]
        if session is not None:
            pending += self._record_audio(session)
        for event, audio in self._sends.held:
            if audio is None:
                pending.append(RealtimeInput(event))
            else:
                pending.append(RealtimeInput({"type": event["type"]}, audio))
        calls = {item.call_id: item for item in items if item.kind == "function_call"}
        tool_calls = tuple(
            ToolCall(call_id, name, call_arguments(calls[call_id].arguments))
            for call_id, name in s.calls.items()
            if call_id in calls
        )
        answer = False
        if session is not None:
            state = session.state
            # An output sent again asks for its answer itself only when one was asked for.
            answered = {
                event["item"].get("call_id")
                for event in resend
                if event["item"].get("type") == "function_call_output"
            }
            waiting = set(state.calls_awaiting_output()) - answered
            owed = (
                state.response_in_progress is not None
                or state.awaiting_response
                or s.response_requested
            )
            answer = owed and not waiting
        return RealtimeRecord(
            handle=None,
            handle_kind=HandleKind.NONE,
            handle_issued_at=None,
            input=tuple(pending),
            tool_calls=tool_calls,
            conversation=(),
            setup=s.config,
            saved_at=time.time(),
            items=items,
            answer=answer,
        )

    def _record_audio(self, session: OpenSession) -> list[RealtimeInput]:
        """The input ``session`` holds uncommitted, as the chunks sent (the first cut where
        it begins): from one beat to the next the same values lead, so only the audio sent
        since is appended to the record. While the user is quiet it begins on a block
        (``RECORD_BLOCK_MS``), never before what an item holds or a clear removed."""
        state = session.state
        start = state.uncommitted_from
        if state.input_idle:
            block = RECORD_BLOCK_MS * self._s.bytes_per_ms
            start = max(state.committed_to, start - start % block)
        return [
            RealtimeInput.append(chunk if offset >= start else chunk[start - offset :])
            for offset, chunk in session.sent
            if offset + len(chunk) > start
        ]

    # --- the takeover -----------------------------------------------------------------------

    async def take_over(self, stored: RealtimeRecord, delays: tuple[float, ...] | None) -> None:
        """Carry on the call another process left in the store (see the module
        documentation); its gap counts from the record's last write; ``delays`` the pauses
        before each dial (None: the options' ``retry_delays``). Raises ``ConnectError``
        when no session could be opened (the move is then reported ``lost``)."""
        s, moves, sends = self._s, self._moves, self._sends
        now = s.now()
        moves.report_takeover(now - max(0.0, time.time() - stored.saved_at))
        seed = build_seed(
            stored.items,
            budget_tokens=s.options.seed_budget_tokens,
            input_format=s.config.input_format,
            flavour=s.flavour,
        )
        try:
            session = await moves.open(MoveReason.TAKEOVER, seed.items, delays=delays)
        except ConnectError as exc:
            moves.finish_report(MoveOutcome.LOST, error=str(exc))
            raise
        except BaseException:
            moves.drop_report()
            raise
        for event in seed.events:
            session.conn.post(event)
        moves.install(session)
        carried = {item.call_id for item in seed.items if item.call_id is not None}
        replayed = audio_bytes = 0
        for message in stored.input:
            if message.audio is not None:
                audio_bytes += len(message.audio)
                replayed += sends.replay_audio(session, message.audio, message.event)
                continue
            event = message.wire()
            item = event.get("item", {})
            if item.get("type") == "function_call_output" and item.get("call_id") not in carried:
                continue  # its call did not fit the seed: the service would refuse it
            sends.post(session, event, None)
            replayed += 1
        if stored.answer:
            sends.post(session, {"type": "response.create"}, None)
        calls = [call for call in stored.tool_calls if call.id in carried]
        for call in calls:
            s.calls[call.id] = call.name
        per_ms = s.bytes_per_ms
        moves.finish_report(
            MoveOutcome.REBUILT,
            messages_replayed=replayed,
            audio_seconds_replayed=audio_bytes / per_ms / 1000,
        )
        logger.info("{}: took the call over ({} input event(s) replayed)", s.callbacks, replayed)
        s.emit("on_session_ready", session.state.session_id or "")
        if calls:
            # The process that issued them is gone: the app runs them here, and their outputs
            # go to this session. They come in an answer of their own, as the model's calls do
            # (a framework runs a call only inside one): its turn is over, the answer goes on
            # once their results are in, as after a live ``response.done``.
            now = s.now()
            s.apply(s.tracker.tool_calls(now, [call.id for call in calls]))
            s.emit("on_tool_call", calls)
            s.apply(s.tracker.generation_complete(now))
            s.apply(s.tracker.turn_complete(now, tools_pending=True, tool_call_may_follow=False))
        moves.timing.update_boundary()
