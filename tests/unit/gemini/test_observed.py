"""The transport's seam for its telemetry: a view of the framework's callbacks with an
observer in front (``gemini.observed``)."""

from __future__ import annotations

from collections.abc import Callable

from realtime_resumption.gemini.observed import observed


class Owner:
    def __init__(self) -> None:
        self.on_move: Callable[[int], None] | None = None
        self.on_audio_output: Callable[[bytes], None] | None = None

    def method(self) -> str:
        return "owner's"

    def __repr__(self) -> str:
        return "Owner#1"


class Observer:
    def __init__(self) -> None:
        self.seen: list[int] = []

    def on_move(self, number: int) -> None:
        self.seen.append(number)
        if number < 0:
            raise RuntimeError("observer broke")


def test_a_watched_callback_calls_the_observer_then_the_framework() -> None:
    owner, observer = Owner(), Observer()
    view = observed(owner, observer)
    calls: list[int] = []
    view.on_move(1)  # no framework callback yet: the observer still sees it
    owner.on_move = calls.append  # set after the view was made
    view.on_move(2)
    view.on_move(-3)  # the observer raises: logged, the framework's callback still runs
    assert observer.seen == [1, 2, -3]
    assert calls == [2, -3]
    assert owner.on_move == calls.append  # the transport's attribute is the framework's


def test_other_names_read_the_owner_as_it_is_now() -> None:
    owner, observer = Owner(), Observer()
    view = observed(owner, observer)
    assert view.on_audio_output is None
    chunks: list[bytes] = []
    owner.on_audio_output = chunks.append
    assert view.on_audio_output == chunks.append
    assert view.method() == "owner's"
    assert repr(view) == str(view) == f"{view}" == "Owner#1"
    assert set(vars(owner)) == {"on_move", "on_audio_output"}  # the view adds nothing
