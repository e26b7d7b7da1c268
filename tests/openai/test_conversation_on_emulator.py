"""The pure OpenAI pieces on a real call: the ``openai`` SDK's own realtime client over TLS to
the bundled emulator, every server event read by ``read_server_event`` and followed by a
``ConversationState``, then a second session seeded from it.

The emulator's ledger is the ground truth: what each session's conversation holds, what its
input buffer held uncommitted when it closed, and what the seeded session was given.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest
from openai.resources.beta.realtime.realtime import (
    AsyncRealtimeConnection as BetaConnection,
)
from openai.resources.realtime.realtime import AsyncRealtimeConnection
from websockets.exceptions import ConnectionClosedError

from realtime_resumption.openai.conversation_seed import build_seed
from realtime_resumption.openai.conversation_state import ConversationState, HeldItem
from realtime_resumption.openai.realtime_server_events import (
    AudioDelta,
    BufferCommitted,
    FunctionArgumentsDone,
    InputTranscriptCompleted,
    ItemAnnounced,
    ItemTruncated,
    Malformed,
    OutputItem,
    OutputTextDelta,
    ResponseDone,
    ServerError,
    ServerEvent,
    SessionEvent,
    SpeechStarted,
    Unknown,
    read_server_event,
)
from realtime_resumption.openai.session_config import (
    Flavour,
    FunctionTool,
    InputTranscription,
    SessionConfig,
)
from realtime_resumption.testing.openai_emulator import (
    ItemRecord,
    OpenAIEmulator,
    SessionRecord,
    user_audio_seqs,
)
from tests.openai_emulator.oai_helpers import TIMEOUT, config, connect, speech

WEATHER = FunctionTool(
    "weather",
    description="The weather where the caller is.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
CONFIG = SessionConfig(
    instructions="Answer briefly.",
    tools=(WEATHER,),
    transcription=InputTranscription("whisper-1"),
)
NOT_MODELLED = {
    "rate_limits.updated",
    "response.content_part.added",
    "response.content_part.done",
    "response.function_call_arguments.delta",
}
"""The emulator's events the reader leaves as ``Unknown``: none says anything of the
conversation or the input buffer."""


class Call:
    """One session: its connection, everything read from it, and the state it feeds."""

    def __init__(
        self,
        conn: AsyncRealtimeConnection | BetaConnection,
        state: ConversationState,
        flavour: Flavour = "ga",
    ) -> None:
        self.conn = conn
        self.state = state
        self.flavour: Flavour = flavour
        self.events: list[ServerEvent] = []

    async def read_until(self, done: Callable[[ServerEvent], bool]) -> list[ServerEvent]:
        """Read and apply events up to the first that ``done`` accepts (bounded)."""
        read: list[ServerEvent] = []
        async with asyncio.timeout(TIMEOUT):
            while True:
                event = read_server_event(await self.conn.recv_bytes(), self.flavour)
                assert not isinstance(event, Malformed), event
                assert not isinstance(event, ServerError), event
                self.state.receive(event)
                self.events.append(event)
                read.append(event)
                if done(event):
                    return read

    async def say(self, chunks: Sequence[bytes]) -> None:
        for chunk in chunks:
            await self.conn.input_audio_buffer.append(audio=base64.b64encode(chunk).decode())
            self.state.appended(chunk)

    async def turn(self, chunks: Sequence[bytes]) -> list[ServerEvent]:
        """Say ``chunks``; read until the answer is done and the turn's transcript came."""
        await self.say(chunks)
        read = await self.read_until(lambda e: isinstance(e, ResponseDone))
        item_id = next(e.item_id for e in read if isinstance(e, BufferCommitted))
        if not any(isinstance(e, InputTranscriptCompleted) for e in read):
            read += await self.read_until(
                lambda e: isinstance(e, InputTranscriptCompleted) and e.item_id == item_id
            )
        return read

    async def configure(self, config: SessionConfig) -> SessionEvent:
        await self.read_until(lambda e: isinstance(e, SessionEvent) and e.created)
        await self.conn.send(config.session_update(self.flavour))  # type: ignore[arg-type]
        read = await self.read_until(lambda e: isinstance(e, SessionEvent) and not e.created)
        updated = read[-1]
        assert isinstance(updated, SessionEvent)
        return updated


def _view(item: HeldItem) -> tuple[str, str, str]:
    """An item as the emulator's ledger records it: id, kind, words (a call: its name)."""
    words = item.name or "" if item.kind == "function_call" else item.text
    return item.id, item.kind, words


def _ledger_view(record: ItemRecord) -> tuple[str, str, str]:
    kind = record.role if record.type == "message" else record.type
    return record.id, str(kind), record.text


def _held(session: SessionRecord) -> list[tuple[str, str, str]]:
    return [_ledger_view(i) for i in session.items if not i.deleted]


def _chunks(audio: bytes, size: int = 960) -> list[bytes]:
    """``audio`` in 20 ms appends, as a transport streams it."""
    return [audio[i : i + size] for i in range(0, len(audio), size)]


async def _seed(call: Call, events: Sequence[dict[str, Any]]) -> None:
    """Send the seed's events and read until the server has every item it names."""
    remaining = {e["item"]["id"] for e in events}
    for event in events:
        await call.conn.send(event)  # type: ignore[arg-type]

    def all_seeded(event: ServerEvent) -> bool:
        # GA says an item is whole with .done, beta with its one .created.
        if isinstance(event, ItemAnnounced) and event.stage in ("done", "created"):
            remaining.discard(event.item.id)
        return not remaining

    await call.read_until(all_seeded)


def _transcript(events: Sequence[ServerEvent]) -> str:
    return "".join(e.delta for e in events if isinstance(e, OutputTextDelta))


async def test_a_call_followed_event_by_event_seeds_a_second_session_with_the_same_conversation() -> (
    None
):
    async with OpenAIEmulator(config(answer_chunks=10, chunk_ms=100)) as emu:
        async with connect(emu) as conn:
            first = Call(conn, ConversationState())
            updated = await first.configure(CONFIG)
            # The session reports back exactly the configuration it was given.
            assert updated.config == CONFIG and first.state.config == CONFIG

            await first.turn(speech(0, 8, ["pineapple", "here"]))
            assert first.state.at_turn_boundary

            # An answer the user heard 250 ms of: truncated where playback stopped.
            read = await first.turn(speech(20, 6, ["long", "story"]))
            answer = next(
                e.item.id
                for e in read
                if isinstance(e, ItemAnnounced) and e.item.role == "assistant"
            )
            await conn.conversation.item.truncate(item_id=answer, content_index=0, audio_end_ms=250)
            await first.read_until(lambda e: isinstance(e, ItemTruncated))
            truncated = first.state.item(answer)
            assert truncated is not None and truncated.heard_ms == 250
            assert truncated.text.count("[") == 3  # the chunks that started before 250 ms

            # A function call, its output, and the answer that uses it.
            read = await first.turn(speech(40, 5, ["weather", "please"]))
            call = next(e for e in read if isinstance(e, FunctionArgumentsDone))
            assert first.state.calls_awaiting_output() == (call.call_id,)
            assert not first.state.at_turn_boundary
            await conn.conversation.item.create(
                item={"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}
            )
            await conn.response.create()
            read = await first.read_until(lambda e: isinstance(e, ResponseDone))
            assert "result sunny" in _transcript(read)
            assert first.state.at_turn_boundary

            # The user starts the next question; the session ends before it is committed.
            await first.say(speech(60, 4, ["recall"], silence=0))
            await first.read_until(lambda e: isinstance(e, SpeechStarted))
            assert first.state.user_speaking and not first.state.at_turn_boundary
            uncommitted = first.state.uncommitted_audio()
            held = first.state.items

        await emu.wait_disconnected(TIMEOUT)
        old = emu.ledger.sessions[0]
        # The state holds what the service's conversation holds, item by item, in order.
        assert [_view(i) for i in held] == _held(old)
        assert [i.kind for i in held].count("function_call_output") == 1
        # What it would append to a new session is exactly the speech no item holds.
        assert old.uncommitted_speech
        sent = set(user_audio_seqs(uncommitted))
        assert set(old.uncommitted_speech) <= sent
        assert not sent & set(old.committed_speech)

        seed = build_seed(held)
        assert seed.dropped == ()
        assert seed.ids == {i.id: i.id for i in held}
        async with connect(emu) as conn:
            second = Call(conn, ConversationState(conversation=seed.items))
            await second.configure(CONFIG)
            await _seed(second, seed.events)
            await second.say([*_chunks(uncommitted), *speech(64, 0, silence=2)])
            read = await second.read_until(lambda e: isinstance(e, ResponseDone))
            answer_words = _transcript(read)

        await emu.wait_disconnected(TIMEOUT)
        new = emu.ledger.sessions[1]
        seeded = [_ledger_view(i) for i in new.seeded]
        # The new session holds the same conversation under the same ids.
        assert seeded == _held(old)
        # The old id of the truncated answer still addresses it, with the words heard.
        assert seed.new_id(answer) == answer
        assert new.item(answer) is not None and new.item(answer).text == old.item(answer).text  # type: ignore[union-attr]
        # The question cut by the close reached the new session once, whole, and its answer
        # recalls a word said in the first session.
        spoken = [i for i in new.items if i.source == "speech"]
        assert [i.speech for i in spoken] == [old.uncommitted_speech]
        assert "pineapple" in answer_words
        assert emu.ledger.summary().speech_heard_twice == ()
        # The new session's state agrees with the service's conversation too.
        assert [_view(i) for i in second.state.items] == _held(new)
        unknown = {e.type for e in first.events + second.events if isinstance(e, Unknown)}
        assert unknown <= NOT_MODELLED, unknown - NOT_MODELLED


async def test_a_turn_never_transcribed_reaches_the_next_session_as_its_own_speech() -> None:
    """Transcription off: the state keeps each turn's speech, cut on the speech events'
    times, and the seed gives it to the new session as audio."""
    plain = SessionConfig(instructions="Answer briefly.")
    async with OpenAIEmulator(config(answer_chunks=3)) as emu:
        async with connect(emu) as conn:
            first = Call(conn, ConversationState())
            await first.configure(plain)
            await first.say(speech(0, 6, ["pineapple"]))
            await first.read_until(lambda e: isinstance(e, ResponseDone))
            held = first.state.items
        await emu.wait_disconnected(TIMEOUT)
        old = emu.ledger.sessions[0]
        spoken = held[0]
        assert spoken.transcript_pending and spoken.text == ""
        # The item's audio: the speech, and the silent chunk that ended it (speech_stopped's
        # audio_end_ms includes the silence).
        assert user_audio_seqs(spoken.audio) == [*old.items[0].speech, 6]

        seed = build_seed(held)
        assert seed.events[0]["item"]["content"][0]["type"] == "input_audio"
        async with connect(emu) as conn:
            second = Call(conn, ConversationState(conversation=seed.items))
            await second.configure(plain)
            await _seed(second, seed.events)
            await second.say(speech(10, 4, ["recall"]))
            answer_words = _transcript(
                await second.read_until(lambda e: isinstance(e, ResponseDone))
            )
        await emu.wait_disconnected(TIMEOUT)
        new = emu.ledger.sessions[1]
        assert [i.speech for i in new.seeded if i.role == "user"] == [old.items[0].speech]
        assert "pineapple" in answer_words
        # The new session's state still holds that speech: a later move can carry it again.
        assert second.state.items[0].audio == spoken.audio


async def test_a_beta_session_is_followed_and_seeded_in_the_beta_spelling() -> None:
    """The SDK's beta client (the legacy Azure surface's protocol): beta event names, the flat
    session, and assistant turns seeded as ``text`` parts."""
    beta = SessionConfig(
        instructions="Answer briefly.", transcription=InputTranscription("whisper-1")
    )
    async with OpenAIEmulator(config(answer_chunks=3)) as emu:
        client = emu.client()
        options = emu.websocket_options()
        async with client.beta.realtime.connect(
            model="gpt-4o-realtime-preview",
            websocket_connection_options=options,  # type: ignore[arg-type]
        ) as conn:
            first = Call(conn, ConversationState(), "beta")
            updated = await first.configure(beta)
            # The beta session states a temperature; the emulator reports the default 0.8.
            assert updated.config == replace(beta, temperature=0.8)
            await first.turn(speech(0, 6, ["pineapple"]))
            held = first.state.items
        await emu.wait_disconnected(TIMEOUT)
        old = emu.ledger.sessions[0]
        assert {e.type for e in first.events} >= {
            "conversation.item.created",
            "response.audio.delta",
        }
        assert [_view(i) for i in held] == _held(old)

        seed = build_seed(held, flavour="beta")
        async with client.beta.realtime.connect(
            model="gpt-4o-realtime-preview",
            websocket_connection_options=options,  # type: ignore[arg-type]
        ) as conn:
            second = Call(conn, ConversationState(conversation=seed.items), "beta")
            await second.configure(beta)
            await _seed(second, seed.events)
            await second.say(speech(10, 4, ["recall"]))
            answer_words = _transcript(
                await second.read_until(lambda e: isinstance(e, ResponseDone))
            )
        await emu.wait_disconnected(TIMEOUT)
        new = emu.ledger.sessions[1]
        assert [_ledger_view(i) for i in new.seeded] == _held(old)
        assert "pineapple" in answer_words


async def test_a_question_whose_answer_a_drop_cut_is_answered_by_the_next_session() -> None:
    """The socket drops as the answer starts: the state knows the answer under way, the seed
    leaves out the answer the user heard nothing of, and says the model's turn is due."""
    # The model's work before its first audio outlasts the transcription several times over.
    async with OpenAIEmulator(config(answer_chunks=5, first_audio_latency=1.0)) as emu:
        async with connect(emu) as conn:
            first = Call(conn, ConversationState())
            await first.configure(CONFIG)
            await first.turn(speech(0, 5, ["pineapple"]))
            await first.say(speech(10, 5, ["recall"]))
            # Drop once the answer's item is announced and the question's transcript came
            # (in whichever order), before any of its audio.
            seen: set[type] = set()

            def answer_started(event: ServerEvent) -> bool:
                assert not isinstance(event, AudioDelta)
                seen.add(type(event))
                return {InputTranscriptCompleted, OutputItem} <= seen

            await first.read_until(answer_started)
            assert emu.faults.drop() == 1
            with pytest.raises(ConnectionClosedError):
                await first.read_until(lambda e: False)
        cut = first.state.response_in_progress
        assert cut is not None
        answer = next(i for i in first.state.items if i.response_id == cut)
        first.state.truncate(answer.id, 0)  # nothing of it was played
        await emu.wait_disconnected(TIMEOUT)
        old = emu.ledger.sessions[0]
        assert old.close_code == 1006 and old.answers[-1].outcome == "cut"

        seed = build_seed(first.state.items)
        assert seed.dropped == (answer.id,) and seed.awaits_answer
        async with connect(emu) as conn:
            second = Call(conn, ConversationState(conversation=seed.items))
            await second.configure(CONFIG)
            await _seed(second, seed.events)
            await conn.response.create()
            answer_words = _transcript(
                await second.read_until(lambda e: isinstance(e, ResponseDone))
            )
        await emu.wait_disconnected(TIMEOUT)
        new = emu.ledger.sessions[1]
        # The cut question is answered, with the word of the turn before it.
        assert "heard recall" in answer_words and "pineapple" in answer_words
        assert new.answers[-1].outcome == "complete"
        assert emu.ledger.summary().speech_heard_twice == ()
