"""The ledger's accounting: user speech per item, heard twice, lost, seeded items, answers."""

from __future__ import annotations

import base64
import time

from realtime_resumption.testing.openai_emulator import OpenAIEmulator

from .oai_helpers import config, connect, say, speech, until


def _audio_item(chunks: list[bytes]) -> dict[str, object]:
    audio = base64.b64encode(b"".join(chunks)).decode()
    return {"type": "message", "role": "user", "content": [{"type": "input_audio", "audio": audio}]}


async def test_speech_carried_to_a_new_session_in_an_item_is_not_heard_twice() -> None:
    async with OpenAIEmulator(config()) as emu:
        async with connect(emu) as conn:
            await until(conn, "session.created")
            await say(conn, speech(0, 5, ["first"]))
            await until(conn, "response.done")
        async with connect(emu) as conn:
            await until(conn, "session.created")
            # A client that moves on gives the new session the user's audio as an item: the
            # conversation carried, once in each session.
            await conn.conversation.item.create(item=_audio_item(speech(3, 2, silence=0)))
            await until(conn, "conversation.item.done")
            await say(conn, speech(10, 4))
            await until(conn, "response.done")
            # Given again to the session that committed it, it is in its conversation twice.
            await conn.conversation.item.create(item=_audio_item(speech(12, 2, silence=0)))
            await until(conn, "conversation.item.done")
        async with connect(emu) as conn:
            await until(conn, "session.created")
            # Said again (the input buffer commits it in another session): heard twice.
            await say(conn, speech(0, 2))
            await until(conn, "input_audio_buffer.committed")
    summary = emu.ledger.summary()
    assert summary.speech_committed == (0, 1, 2, 3, 4, 3, 4, 10, 11, 12, 13, 12, 13, 0, 1)
    assert summary.speech_heard_twice == (0, 1, 12, 13)
    assert summary.seeded_items == 2 and emu.ledger.sessions[1].seeded[0].speech == (3, 4)
    assert summary.speech_lost(list(range(16))) == [5, 6, 7, 8, 9, 14, 15]


async def test_cleared_and_uncommitted_speech_reach_no_item() -> None:
    async with OpenAIEmulator(config()) as emu:
        async with connect(emu) as conn:
            await until(conn, "session.created")
            await conn.session.update(
                session={"type": "realtime", "audio": {"input": {"turn_detection": None}}}
            )
            await until(conn, "session.updated")
            await say(conn, speech(0, 6, silence=0))
            await conn.input_audio_buffer.clear()
            await until(conn, "input_audio_buffer.cleared")
            await say(conn, speech(6, 6, silence=0))
            await conn.input_audio_buffer.commit()
            committed = (await until(conn, "input_audio_buffer.committed"))[-1]
            await say(conn, speech(12, 3, silence=0))
            await conn.session.update(session={"type": "realtime"})
            await until(conn, "session.updated")
        await emu.wait_disconnected()
    record = emu.ledger.sessions[0]
    assert record.cleared_speech == [0, 1, 2, 3, 4, 5]
    assert record.item(committed.item_id).speech == (6, 7, 8, 9, 10, 11)  # type: ignore[union-attr]
    assert record.uncommitted_speech == (12, 13, 14)
    assert record.received_speech == list(range(15))
    assert emu.ledger.summary().speech_uncommitted == (12, 13, 14)


async def test_delivered_chunks_and_a_truncated_answer() -> None:
    async with OpenAIEmulator(config(answer_chunks=4)) as emu:
        async with connect(emu) as conn:
            await until(conn, "session.created")
            await say(conn, speech(0, 5))
            done = (await until(conn, "response.done"))[-1]
            item_id = done.response.output[0].id
            await conn.conversation.item.truncate(
                item_id=item_id, content_index=0, audio_end_ms=10_000
            )
            error = (await until(conn, "error"))[-1]
            assert error.error.message == "Audio content of 400ms is already shorter than 10000ms"
            await conn.conversation.item.truncate(
                item_id=item_id, content_index=0, audio_end_ms=250
            )
            await until(conn, "conversation.item.truncated")
            # What the truncate left is the item's audio now: past it is refused too.
            await conn.conversation.item.truncate(
                item_id=item_id, content_index=0, audio_end_ms=300
            )
            error = (await until(conn, "error"))[-1]
            assert error.error.message == "Audio content of 250ms is already shorter than 300ms"
    answer = emu.ledger.sessions[0].answers[0]
    assert (answer.produced, answer.delivered, answer.heard_ms) == (4, 4, 250)
    assert answer.outcome == "truncated"
    summary = emu.ledger.summary()
    assert (summary.answers_truncated, summary.answers_cut) == (1, 0)
    # The transcript keeps the three chunks that started before 250 ms.
    assert emu.ledger.sessions[0].item(item_id).text.count("[") == 3  # type: ignore[union-attr]


async def test_session_created_says_when_the_cap_expires_it() -> None:
    async with OpenAIEmulator(config(time_scale=1.0)) as emu, connect(emu) as conn:
        created = (await until(conn, "session.created"))[-1]
        assert abs(created.session.expires_at - (time.time() + 3600)) < 60


async def test_the_gap_in_the_callers_audio_between_sessions() -> None:
    async with OpenAIEmulator(config()) as emu:
        async with connect(emu) as first, connect(emu) as second:
            await until(first, "session.created")
            await until(second, "session.created")
            await say(first, speech(0, 3, silence=0))
            # An update answered after the appends: the first session has taken them all.
            await first.session.update(session={"type": "realtime"})
            await until(first, "session.updated")
            await say(second, speech(3, 3, silence=0))
            await second.session.update(session={"type": "realtime"})
            await until(second, "session.updated")
    (gap,) = emu.ledger.input_gaps()
    earlier, later = emu.ledger.sessions
    assert later.first_audio_at is not None and earlier.last_audio_at is not None
    assert gap == later.first_audio_at - earlier.last_audio_at > 0
    # The longest pause in the input counts across sessions: that gap is one.
    assert emu.ledger.longest_input_pause >= gap
    assert (earlier.received_speech, later.received_speech) == ([0, 1, 2], [3, 4, 5])
