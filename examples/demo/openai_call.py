"""The OpenAI call (``--openai``): the same caller on OpenAI Realtime stacks, across the cap.

OpenAI Realtime closes every session 60 minutes after ``session.created`` (1001, "Your session
hit the maximum duration of 60 minutes.") and keeps nothing of it: a client that goes on opens
a new, empty session and gives it the conversation. Each stack gets its own bundled OpenAI
emulator, its clock scaled so a 60-minute cap passes every ``OpenAIPlan.cap`` seconds, while
the caller streams 20 ms of 24 kHz audio in real time: a word to remember, a tool call, a
question spoken across the first cap, a second cap passing between questions, an abrupt drop,
and a last question asking the session to recall the word.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from realtime_resumption.testing.emulator.caller import SentAudio
from realtime_resumption.testing.openai_emulator import (
    SESSION_CAP,
    AnswerRecord,
    OpenAIEmulator,
    OpenAIEmulatorConfig,
    SessionRecord,
)

from .call import (
    AFTER_DROP,
    WEATHER_Q,
    CallRecord,
    Conductor,
    Ear,
    Mark,
    Question,
    StackIO,
)
from .run import Call
from .stacks import OpenAIEndpoint, StackContext

OPENAI_RATE = 24_000
"""The microphone's rate: OpenAI Realtime's input format (a framework resampling anything else
would lose the chunks' numbers)."""

REMEMBER = Question(("my", "word", "is", "pineapple"), "at_rest")
ACROSS_CAP = Question(("tell", "me", "about", "the", "sea"), "across_cap")
AFTER_CAP = Question(("how", "about", "lisbon"), "after_cap")
AFTER_SECOND_CAP = Question(("and", "in", "porto"), "after_cap")
RECALL = Question(("please", "recall", "my", "word", "goodbye"), "final")
"""The last question: its answer says again every earlier user turn (the emulator's ``recall``
rule), ``REMEMBER``'s word among them if the session was given it."""
WORD = REMEMBER.words[-1]

_HEARD = re.compile(r"heard (.*?)(?:, recall |, result |$)", re.S)


@dataclass(frozen=True)
class OpenAIPlan:
    """The OpenAI call's timings, in wall-clock seconds. ``OpenAIPlan()`` is the demo's."""

    cap: float = 15.0
    """Seconds between a session's ``session.created`` and its cap: the emulator's clock runs
    at ``cap / 3600`` (a 60-minute cap every ``cap`` seconds)."""
    caps: int = 2
    """Caps the script passes before the drop (the first across a question)."""
    across: float = 3.5
    """The question across the first cap starts this long before it: before ours' move window
    opens (``openai_lanes.MOVE_MARGIN``), so ours finds no turn boundary and moves while the
    caller speaks."""
    across_speech: float = 4.3
    """Seconds of speech of that question (it ends after the cap)."""
    answer_chunks: int = 10
    """Chunks per answer (100 ms each: a 1 s answer)."""
    speech: float = 0.8
    """Seconds of speech per question."""
    pause: float = 0.6
    """Silence between an answer and the next question."""
    answer_timeout: float = 6.0
    """How long a question waits for its answer before the script goes on."""
    settle_timeout: float = 15.0
    """How long the script waits for the first session."""
    remember: bool = True
    """Ask ``REMEMBER`` first (a shorter script asks the tool question only)."""

    @property
    def time_scale(self) -> float:
        """The emulator's clock: seconds of wall time per second of the service's."""
        return self.cap / SESSION_CAP["openai"]

    def scaled(self, seconds: float) -> float:
        """``seconds`` of the service's clock in wall-clock seconds."""
        return seconds * self.time_scale


def emulator_config(plan: OpenAIPlan) -> OpenAIEmulatorConfig:
    """Every lane's emulator: OpenAI's service, its 60-minute cap, clock scaled by ``plan``."""
    return OpenAIEmulatorConfig(time_scale=plan.time_scale, answer_chunks=plan.answer_chunks)


def answer_words(text: str) -> list[str]:
    """The words an answer says it heard (the emulator's ``heard <words>``)."""
    match = _HEARD.search(text)
    return re.findall(r"[a-z_]+", match.group(1)) if match else []


def answers_to(sessions: Sequence[SessionRecord], key: str) -> list[AnswerRecord]:
    """The answers (every session) to a question whose words end with ``key``."""
    found = []
    for session in sessions:
        for answer in session.answers:
            item = session.item(answer.item_id) if answer.item_id else None
            if item is not None and key in answer_words(item.text):
                found.append(answer)
    return found


class OpenAILedgerView:
    """The OpenAI emulator's conversation ledger, as the conductor reads it."""

    def __init__(self, emulator: OpenAIEmulator) -> None:
        self._emu = emulator

    def connected_since(self, since: float) -> bool:
        return any(
            s.created_at is not None and s.created_at >= since for s in self._emu.ledger.sessions
        )

    def answer_turns(self, key: str) -> set[int]:
        return {a.turn for a in answers_to(self._emu.ledger.sessions, key)}

    def answer_running(self, key: str) -> bool:
        return any(a.outcome == "running" for a in answers_to(self._emu.ledger.sessions, key))

    def audio_lost(self, sent: Sequence[SentAudio]) -> list[SentAudio]:
        # The service keeps speech only (silence never reaches an item); speech still in an
        # open session's input buffer is on its way, not lost.
        kept = {seq for s in self._emu.ledger.sessions for seq in s.committed_speech}
        kept.update(
            seq
            for s in self._emu.ledger.sessions
            if s.closed_at is None
            for seq in s.received_speech
        )
        return [a for a in sent if a.speech and a.seq not in kept]

    def notes(self) -> list[tuple[tuple[str, ...], str, str]]:
        notes: list[tuple[tuple[str, ...], str, str]] = []
        for i, (_, _, status) in enumerate(self._emu.ledger.refused):
            notes.append((("refused", str(i)), "refused", f"dial refused ({status})"))
        for s in self._emu.ledger.sessions:
            if s.created_at is not None:
                given = f", {len(s.seeded)} items given" if s.seeded else ""
                notes.append(((s.id, "up"), "connect", f"session {s.index} up{given}"))
            if s.closed_at is not None:
                why = f"{s.close_code} ({s.closed_by})"
                notes.append(((s.id, "closed"), "close", f"session {s.index} closed {why}"))
            for a in s.answers:
                if a.outcome == "cut":
                    notes.append(((s.id, "cut", str(a.turn)), "loss", f"answer {a.turn} cut"))
        return notes


class OpenAIConductor(Conductor):
    """The OpenAI call on a stack and its emulator."""

    def __init__(
        self,
        emulator: OpenAIEmulator,
        clock: Callable[[], float],
        plan: OpenAIPlan,
        record: CallRecord,
        ear: Ear,
        on_mark: Callable[[Mark], None],
    ) -> None:
        super().__init__(
            OpenAILedgerView(emulator), clock, plan, record, ear, on_mark, rate=OPENAI_RATE
        )
        self._emu = emulator
        self._plan = plan

    def _cap_at(self, n: int) -> float:
        """When the ``n``-th cap (from 1) of a call that never left its first session would
        come (ledger clock): the script's moments are the same on every stack."""
        first = self._emu.ledger.sessions[0].created_at
        assert first is not None
        return first + n * self._plan.cap

    async def _until(self, at: float) -> None:
        await asyncio.sleep(max(0.0, at - self._clock()))

    async def _script(self, stack: StackIO) -> None:
        plan = self._plan
        caller = await self._start_call(stack)
        if caller is None:
            return
        if plan.remember:
            await self.ask(REMEMBER)
            await asyncio.sleep(plan.pause)
        await self.ask(WEATHER_Q)
        await asyncio.sleep(plan.pause)
        # The first cap comes while the caller speaks.
        await self._until(self._cap_at(1) - plan.across)
        self.mark("cap", "the first cap comes during the next question")
        await self.ask(ACROSS_CAP, speech=plan.across_speech)
        await asyncio.sleep(plan.pause)
        await self.ask(AFTER_CAP)
        for n in range(2, plan.caps + 1):
            # The next caps pass between questions (a stock session that reconnected at the
            # first cap meets its own next cap a moment later: the script waits it out).
            await self._until(self._cap_at(n) + 2 * plan.pause)
            await self.ask(AFTER_SECOND_CAP)
        await asyncio.sleep(plan.pause)
        self._emu.faults.drop()
        self.mark("drop", "connection dropped")
        await asyncio.sleep(plan.pause)
        await self.ask(AFTER_DROP)
        await asyncio.sleep(plan.pause)
        await self.ask(RECALL)
        await asyncio.sleep(plan.pause)
        await caller.stop_microphone()


class _TrustBundle:
    """One CA file holding every running emulator's CA, as ``SSL_CERT_FILE`` while any runs.

    Stock Pipecat dials with websockets' default TLS context and takes no TLS option; the
    default context reads ``SSL_CERT_FILE`` when it is made, at each dial.
    """

    def __init__(self) -> None:
        self._cas: dict[int, str] = {}
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._saved: str | None = None

    @contextlib.contextmanager
    def trusting(self, emulator: OpenAIEmulator) -> Iterator[None]:
        key = id(emulator)
        if not self._cas:
            self._dir = tempfile.TemporaryDirectory(prefix="demo-ca-")
            self._saved = os.environ.get("SSL_CERT_FILE")
        self._cas[key] = Path(emulator.ca_file).read_text()
        self._write()
        try:
            yield
        finally:
            del self._cas[key]
            if self._cas:
                self._write()
            else:
                if self._saved is None:
                    os.environ.pop("SSL_CERT_FILE", None)
                else:
                    os.environ["SSL_CERT_FILE"] = self._saved
                assert self._dir is not None
                self._dir.cleanup()
                self._dir = None

    def _write(self) -> None:
        assert self._dir is not None
        bundle = Path(self._dir.name) / "emulators.pem"
        bundle.write_text("".join(self._cas.values()))
        os.environ["SSL_CERT_FILE"] = str(bundle)


def openai_call(plan: OpenAIPlan) -> Call[OpenAIEmulator]:
    """The OpenAI call: ``plan`` on OpenAI emulators that stock Pipecat trusts too."""
    config = emulator_config(plan)
    bundle = _TrustBundle()

    @contextlib.asynccontextmanager
    async def emulator() -> AsyncIterator[OpenAIEmulator]:
        async with OpenAIEmulator(config) as emu:
            with bundle.trusting(emu):
                yield emu

    def context(
        emu: OpenAIEmulator,
        ear: Ear,
        record: CallRecord,
        clock: Callable[[], float],
        mark: Callable[[str, str], None],
    ) -> StackContext:
        endpoint = OpenAIEndpoint(emu.base_url, emu.realtime_url, emu.client_ssl_context())
        return StackContext(None, ear, record, clock, mark, openai=endpoint)

    return Call(
        emulator=emulator,
        conductor=lambda emu, clock, record, ear, on_mark: OpenAIConductor(
            emu, clock, plan, record, ear, on_mark
        ),
        context=context,
    )
