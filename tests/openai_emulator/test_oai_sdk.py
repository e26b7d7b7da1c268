"""The ``openai`` SDK's own realtime client (GA, and beta) holding calls over real TLS."""

from __future__ import annotations

import base64
from itertools import pairwise

import pytest

from realtime_resumption.testing.openai_emulator import (
    OpenAIEmulator,
    OpenAIEmulatorConfig,
    answer_chunk_id,
    answer_text_ids,
    user_audio,
)

from .oai_helpers import RATE, config, connect, of, say, speech, transcript, until, user_text


@pytest.mark.parametrize("kind", [False, True], ids=["service", "kind"])
async def test_a_spoken_turn_is_detected_committed_transcribed_and_answered(kind: bool) -> None:
    cfg = OpenAIEmulatorConfig.kind(time_scale=0.01) if kind else config()
    assert (cfg.cap_seconds is None) is kind
    async with OpenAIEmulator(cfg) as emu, connect(emu) as conn:
        created = (await until(conn, "session.created"))[0]
        assert created.session.type == "realtime"
        assert created.session.audio.input.turn_detection.type == "server_vad"
        await conn.session.update(
            session={
                "type": "realtime",
                "instructions": "be brief",
                "audio": {"input": {"transcription": {"model": "whisper-1"}}},
            }
        )
        updated = (await until(conn, "session.updated"))[-1]
        assert updated.session.instructions == "be brief"
        assert updated.session.audio.input.transcription.model == "whisper-1"
        await say(conn, speech(0, 10, ["hello", "there"]))
        events = await until(conn, "response.done")
        started = of(events, "input_audio_buffer.speech_started")[0]
        stopped = of(events, "input_audio_buffer.speech_stopped")[0]
        committed = of(events, "input_audio_buffer.committed")[0]
        assert started.item_id == stopped.item_id == committed.item_id
        # The end includes the silence that ended the speech: at this scale 5 ms of it, so
        # the first silent frame (20 ms).
        assert started.audio_start_ms == 0 and stopped.audio_end_ms == 220
        kinds = [e.type for e in events]
        # The GA order: the user item is added then done before the answer starts.
        assert kinds.index("conversation.item.added") < kinds.index("conversation.item.done")
        assert kinds.index("conversation.item.done") < kinds.index("response.created")
        done = of(events, "conversation.item.input_audio_transcription.completed")
        assert [d.transcript for d in done] == ["hello there"]
        audio = of(events, "response.output_audio.delta")
        assert [answer_chunk_id(base64.b64decode(a.delta)) for a in audio] == [
            (1, k) for k in range(10)
        ]
        assert "heard hello there" in transcript(events)
        assert of(events, "response.done")[0].response.status == "completed"
    summary = emu.ledger.summary()
    assert summary.speech_committed == tuple(range(10))
    assert summary.answers_complete == 1 and summary.answers_cut == 0


async def test_one_append_of_speech_then_silence_ends_the_turn_inside_it() -> None:
    # The service's VAD reads the audio, not the appends: 400 ms of quiet, 200 ms of speech
    # and 600 ms of quiet in one append are a turn from 100 ms (300 ms of padding before the
    # speech) to 1100 ms (the speech's end and the 500 ms of silence that ended it).
    quiet_before = [user_audio(seq, speech=False, rate=RATE) for seq in range(20)]
    quiet_after = [user_audio(seq, speech=False, rate=RATE) for seq in range(30, 60)]
    audio = b"".join([*quiet_before, *speech(20, 10, ["one", "append"], silence=0), *quiet_after])
    async with OpenAIEmulator(OpenAIEmulatorConfig.kind()) as emu, connect(emu) as conn:
        await until(conn, "session.created")
        await conn.input_audio_buffer.append(audio=base64.b64encode(audio).decode())
        events = await until(conn, "input_audio_buffer.committed")
        started = of(events, "input_audio_buffer.speech_started")[0]
        stopped = of(events, "input_audio_buffer.speech_stopped")[0]
        committed = of(events, "input_audio_buffer.committed")[0]
        assert started.item_id == stopped.item_id == committed.item_id
        assert (started.audio_start_ms, stopped.audio_end_ms) == (100, 1100)
        await until(conn, "response.created")
    record = emu.ledger.sessions[0]
    item = record.item(committed.item_id)
    assert item is not None and item.speech == tuple(range(20, 30)) and item.text == "one append"


async def test_answers_come_at_playback_pace() -> None:
    cfg = config(time_scale=0.1, chunk_ms=100, answer_chunks=5, first_audio_latency=0.0)
    async with OpenAIEmulator(cfg) as emu, connect(emu) as conn:
        await until(conn, "session.created")
        await say(conn, speech(0, 5, silence=3))  # 60 ms of silence: over 500 ms at 1/10
        await until(conn, "response.output_audio.done")
    sent = emu.ledger.sessions[0].answers[0].sent_at
    # A chunk of 100 ms audio every 100 ms, at 1/10: 10 ms apart at least, never a burst.
    assert len(sent) == 5
    assert all(later - earlier >= 0.01 for earlier, later in pairwise(sent))


async def test_a_named_function_is_called_and_its_output_used() -> None:
    tool = {"type": "function", "name": "weather", "parameters": {"type": "object"}}
    async with OpenAIEmulator(config()) as emu, connect(emu) as conn:
        await until(conn, "session.created")
        await conn.session.update(session={"type": "realtime", "tools": [tool]})
        await until(conn, "session.updated")
        await say(conn, speech(0, 5, ["weather", "please"]))
        events = await until(conn, "response.done")
        kinds = [e.type for e in events]
        assert kinds.index("response.output_item.added") < kinds.index(
            "response.function_call_arguments.done"
        )
        call = of(events, "response.function_call_arguments.done")[0]
        assert call.name == "weather" and not of(events, "response.output_audio.delta")
        await conn.conversation.item.create(
            item={"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}
        )
        await conn.response.create()
        answer = await until(conn, "response.done")
        assert "result sunny" in transcript(answer)
        assert not of(answer, "response.function_call_arguments.done")
    assert emu.ledger.sessions[0].answers[0].calls == (call.call_id,)


async def test_speech_over_an_answer_cancels_it_and_truncate_keeps_what_was_heard() -> None:
    async with OpenAIEmulator(config(answer_chunks=40)) as emu, connect(emu) as conn:
        await until(conn, "session.created")
        await say(conn, speech(0, 5, ["first"]))
        events = await until(conn, "response.output_audio.delta")
        item_id = events[-1].item_id
        await until(conn, "response.output_audio.delta")
        await say(conn, speech(100, 5, ["second"], silence=0))
        events = await until(conn, "response.done")
        assert of(events, "input_audio_buffer.speech_started")
        done = of(events, "response.done")[0].response
        assert done.status == "cancelled" and done.status_details.reason == "turn_detected"
        await conn.conversation.item.truncate(item_id=item_id, content_index=0, audio_end_ms=150)
        truncated = (await until(conn, "conversation.item.truncated"))[-1]
        assert truncated.audio_end_ms == 150
    answer = emu.ledger.sessions[0].answers[0]
    assert answer.outcome == "cancelled" and answer.heard_ms == 150
    assert emu.ledger.sessions[0].item(item_id).text.count("[") == 2  # two chunks heard


async def test_cancel_delete_retrieve_and_the_active_response_rule() -> None:
    async with OpenAIEmulator(config(answer_chunks=30)) as emu, connect(emu) as conn:
        await until(conn, "session.created")
        await conn.session.update(
            session={"type": "realtime", "audio": {"input": {"turn_detection": None}}}
        )
        await until(conn, "session.updated")
        await conn.conversation.item.create(item=user_text("tell me"))
        added = (await until(conn, "conversation.item.done"))[-1]
        await conn.response.create()
        await until(conn, "response.created")
        await conn.response.create()
        error = (await until(conn, "error"))[-1]
        assert error.error.code == "conversation_already_has_active_response"
        await conn.response.cancel()
        done = (await until(conn, "response.done"))[-1]
        assert done.response.status == "cancelled"
        await conn.response.cancel()
        error = (await until(conn, "error"))[-1]
        assert error.error.code == "response_cancel_not_active"
        await conn.conversation.item.retrieve(item_id=added.item.id)
        retrieved = (await until(conn, "conversation.item.retrieved"))[-1]
        assert retrieved.item.content[0].text == "tell me"
        await conn.conversation.item.delete(item_id=added.item.id)
        assert (await until(conn, "conversation.item.deleted"))[-1].item_id == added.item.id
    assert emu.ledger.summary().answers_cancelled == 1


async def test_a_word_reaches_a_later_session_only_when_it_is_seeded_with_it() -> None:
    async with OpenAIEmulator(config()) as emu:
        async with connect(emu) as conn:
            await until(conn, "session.created")
            await say(conn, speech(0, 5, ["pineapple"]))
            await until(conn, "response.done")
        for seeded in (True, False):
            async with connect(emu) as conn:
                await until(conn, "session.created")
                if seeded:
                    await conn.conversation.item.create(item=user_text("pineapple"))
                    await until(conn, "conversation.item.done")
                await say(conn, speech(10 if seeded else 20, 5, ["recall"]))
                answer = transcript(await until(conn, "response.done"))
                assert ("pineapple" in answer) is seeded, answer
    sessions = emu.ledger.sessions
    assert [len(s.seeded) for s in sessions] == [0, 1, 0]
    assert emu.ledger.summary().speech_heard_twice == ()


async def test_text_turns_and_answer_ids_in_a_transcript() -> None:
    async with OpenAIEmulator(config(answer_chunks=3)) as emu, connect(emu) as conn:
        await until(conn, "session.created")
        await conn.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        await until(conn, "session.updated")
        await conn.conversation.item.create(item=user_text("hi"))
        await conn.response.create()
        events = await until(conn, "response.done")
        text = "".join(e.delta for e in of(events, "response.output_text.delta"))
        assert answer_text_ids(text) == [(1, 0), (1, 1), (1, 2)]
        assert not of(events, "response.output_audio.delta")
        assert of(await until(conn, "rate_limits.updated"), "rate_limits.updated")


async def test_the_beta_client_gets_the_beta_names() -> None:
    async with OpenAIEmulator(config(answer_chunks=2)) as emu:
        client = emu.client()
        async with client.beta.realtime.connect(
            model="gpt-4o-realtime-preview",
            websocket_connection_options=emu.websocket_options(),
        ) as conn:
            created = await conn.recv()
            assert created.type == "session.created"
            assert created.session.input_audio_format == "pcm16"
            await conn.session.update(session={"instructions": "flat", "voice": "verse"})
            updated = (await until(conn, "session.updated"))[-1]
            assert updated.session.voice == "verse"
            await say(conn, speech(0, 5, ["hi"]))  # type: ignore[arg-type]
            events = await until(conn, "response.done")
            kinds = {e.type for e in events}
            assert {"conversation.item.created", "response.audio.delta"} <= kinds
            assert "response.audio_transcript.delta" in kinds
            assert not kinds & {"conversation.item.added", "conversation.item.done"}
            assert "response.output_audio.delta" not in kinds
    assert emu.ledger.sessions[0].flavour == "beta"


@pytest.mark.parametrize("threshold", [0.5, 0.99])
async def test_the_vad_threshold_decides_what_is_speech(threshold: float) -> None:
    async with OpenAIEmulator(config()) as emu, connect(emu) as conn:
        await until(conn, "session.created")
        detection = {"type": "server_vad", "threshold": threshold}
        await conn.session.update(
            session={"type": "realtime", "audio": {"input": {"turn_detection": detection}}}
        )
        await until(conn, "session.updated")
        await say(conn, speech(0, 5))
        await conn.input_audio_buffer.commit()
        events = await until(conn, "input_audio_buffer.committed")
        assert bool(of(events, "input_audio_buffer.speech_started")) is (threshold == 0.5)
    assert emu.ledger.sessions[0].committed_speech == ([0, 1, 2, 3, 4] if threshold == 0.5 else [])


async def test_the_sdks_azure_client_reaches_the_legacy_surface() -> None:
    async with OpenAIEmulator(config(profile="azure", answer_chunks=2)) as emu:
        client = emu.azure_client()
        async with client.beta.realtime.connect(
            model="my-deployment", websocket_connection_options=emu.websocket_options()
        ) as conn:
            created = await conn.recv()
            assert created.type == "session.created" and created.session.model == "my-deployment"
            await say(conn, speech(0, 5, ["azure"]))  # type: ignore[arg-type]
            events = await until(conn, "response.done")
            assert "conversation.item.created" in {e.type for e in events}
    record = emu.ledger.sessions[0]
    assert (record.path, record.flavour) == ("/openai/realtime", "beta")
    assert emu.config.cap_seconds == 1800
