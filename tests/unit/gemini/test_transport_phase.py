"""The transport's phases: which transitions start where, and what each phase takes."""

from __future__ import annotations

import pytest

from realtime_resumption.gemini.messages import ClientMessage
from realtime_resumption.gemini.transport_phase import Lifecycle, LifecycleError, Phase
from realtime_resumption.outbox import ReplayScope


def test_a_connect_holds_the_sends_until_its_dial_starts_then_opens() -> None:
    life = Lifecycle()
    assert not life.takes_input(session_up=False)
    life.begin()
    message = ClientMessage.audio_stream_end()
    assert life.takes_input(session_up=False)
    assert life.hold(message, ReplayScope.SESSION)
    life.claimed(stored=True)
    life.dial()
    assert not life.hold(message, ReplayScope.SESSION)  # queued for the dial, not held
    assert life.take_held() == [(message, ReplayScope.SESSION)]
    assert life.take_held() == []
    life.opened()
    assert life.phase is Phase.OPEN
    assert life.taken_over


def test_a_second_connect_while_one_is_under_way_is_a_bug() -> None:
    life = Lifecycle()
    life.begin()
    with pytest.raises(LifecycleError, match="starting"):
        life.begin()
    life.dial()
    with pytest.raises(LifecycleError, match="dialling"):
        life.dial()
    assert life.busy


def test_a_disconnect_during_the_dial_stays_closed_whatever_the_dial_does() -> None:
    life = Lifecycle()
    life.dial()
    life.close()
    assert life.closed and not life.takes_input(session_up=False)
    life.opened()
    assert life.phase is Phase.CLOSED
    life.failed()
    assert life.phase is Phase.CLOSED


def test_a_failed_connect_drops_what_it_held_and_is_idle_again() -> None:
    life = Lifecycle()
    life.begin()
    life.hold(ClientMessage.audio_stream_end(), ReplayScope.SESSION)
    life.failed()
    assert life.phase is Phase.IDLE
    assert life.take_held() == []


def test_a_disconnect_before_the_dial_keeps_what_was_held_for_it() -> None:
    life = Lifecycle()
    life.begin()
    message = ClientMessage.audio_stream_end()
    life.hold(message, ReplayScope.SESSION)
    life.close()
    assert not life.takes_input(session_up=False)
    life.dial()  # a connect without a store dials once the close finished
    assert life.take_held() == [(message, ReplayScope.SESSION)]


def test_a_call_handed_over_takes_nothing_and_stays_handed_over_through_disconnect() -> None:
    life = Lifecycle()
    life.dial()
    life.opened()
    assert life.takes_input(session_up=True)
    life.hand_over()
    assert not life.takes_input(session_up=True)
    life.close()
    assert life.handed_over
    life.begin()  # a new connect starts afresh
    assert not life.handed_over and not life.taken_over


def test_once_what_was_held_is_taken_nothing_more_is_held_or_taken_until_the_dial() -> None:
    life = Lifecycle()
    life.begin()
    life.hold(ClientMessage.audio_stream_end(), ReplayScope.SESSION)
    assert len(life.take_held()) == 1  # a takeover took it for its session
    assert not life.takes_input(session_up=False)
    assert not life.hold(ClientMessage.audio_stream_end(), ReplayScope.SESSION)
    life.dial()
    assert life.takes_input(session_up=False)
    assert life.take_held() == []
