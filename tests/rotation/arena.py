"""The rotation scenarios' shared pieces: fast settings, a rig (emulator session, transport and
scripted caller) and the invariants every scenario checks against the emulator's ledger.

Durations: the emulator runs at 1/20 (a 10-chunk answer takes 20 ms, the end-of-turn silence is
25 ms of audio, a goAway with ``NOTICE`` gives 2 s), and so do the transport's own windows (the
tool-call grace, the replay margin); the caller streams 20 ms chunks four times faster than
real time; the transport retries within a fraction of a second.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from google import genai
from loguru import logger

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.generation import TOOL_CALL_GRACE
from realtime_resumption.move_reports import HandleKind, MoveOutcome, MoveReason
from realtime_resumption.outbox import OutboxLimits
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig
from realtime_resumption.testing.emulator.caller import CallerRecord, ScriptedCaller
from realtime_resumption.testing.emulator.ledger import LedgerSummary

Profile = Literal["gemini", "vertex"]
PROFILES: tuple[Profile, ...] = ("gemini", "vertex")

MODEL = "gemini-live-2.5-flash-preview"
SCALE = 0.05
NOTICE = 40.0
"""goAway timeLeft before scaling: 2 s on the wire. The transport's deadline margin is 1 s, so
a turn has 1 s to reach a resumable point (answers take 20 ms)."""
TOOL = "lookup"
CHUNK_MS = 20
PACE = 0.25
TURN_SILENCE = 0.5 * SCALE + 2 * CHUNK_MS / 1000
"""The emulator's end-of-turn silence (0.5 s of audio, scaled) and two chunks more."""
TOOL_DELAY = 0.02
VERTEX_HANDLE_DELAY = (0.5, 0.5)
"""Vertex's post-turn handle 25 ms after turnComplete: a goAway fits in between."""
WAIT = 8.0
"""Bound of every wait in a scenario; a healthy one never comes near it."""


def service_time_limits(scale: float) -> OutboxLimits:
    """The shipped ``OutboxLimits`` with its windows of service time at ``scale``: the handle
    margin and the round-trip tolerance (40 ms of the service's time: a token of audio, 1/32 s,
    taken in after it arrived) shrink with the emulator's clock, as the tool-call grace does.
    Unscaled, at 1/20 time the 40 ms would cover 0.8 s of compressed speech, and a question
    answered in the emulator's 20 ms would lie within it of the handle after its answer: the
    session would hear it twice and answer it again. What does not shrink, the event loop's
    lag, the transport adds itself (twice the loop's lag, in the measured jitter); the emulated
    network's round trip ``limits_for`` adds."""
    shipped = OutboxLimits()
    return replace(
        shipped,
        handle_margin=shipped.handle_margin * scale,
        round_trip_tolerance=shipped.round_trip_tolerance * scale,
    )


INPUT_BUFFER = service_time_limits(SCALE)
"""The shipped limits at the emulator's time (``service_time_limits``). A scenario's transport
gets them with the emulated network's round trip added to the tolerance (``limits_for``);
scenarios that load the machine (the storm) keep the shipped margins unscaled."""

ROUND_TRIP = 0.006
"""The network round trip on the wall clock (the emulator's default): a round trip does not
shrink with the emulator's time, so it is given to the emulator divided by ``SCALE``."""

RESUMPTION = ResumptionOptions(
    deadline_margin=1.0, retry_delays=(0.0, 0.05, 0.1, 0.2), attempt_timeout=1.0
)
"""Retries a fraction of a second apart. ``attempt_timeout`` bounds a dial (the settle after
it has its own bound): well above the slowest setup a scenario scripts (4 s on the emulator's
clock, 0.2 s here), so a loaded machine does not turn a slow setup into a failed attempt."""

QUESTION = ("what", "is", "new")
WARM_UP = ("hello", "there")
CHECK = ("are", "you", "still", "there")
ASK_TOOL = ("please", TOOL, "flights")


def limits_for(config: EmulatorConfig) -> OutboxLimits:
    """``INPUT_BUFFER`` for an emulator with ``config``: the emulator delays frames in user
    space, which the transport's round trip (the kernel's, for the socket) does not see, so the
    tolerance carries that round trip as it carries the live service's own time."""
    tolerance = INPUT_BUFFER.round_trip_tolerance + config.scaled(config.round_trip)
    return replace(INPUT_BUFFER, round_trip_tolerance=tolerance)


def rotation_config(profile: Profile, model: str | None = None, **changes: Any) -> EmulatorConfig:
    """A fast emulator in ``profile``, behaving as for ``model`` (a model profile's name; None:
    the bare ``EmulatorConfig``)."""
    changes.setdefault("time_scale", SCALE)
    changes.setdefault("notice", NOTICE)
    changes.setdefault("round_trip", ROUND_TRIP / changes["time_scale"])
    if profile == "vertex":
        changes.setdefault("handle_delay", VERTEX_HANDLE_DELAY)
    if model is not None:
        return EmulatorConfig.model(model, profile=profile, **changes)
    return EmulatorConfig(profile=profile, **changes)


SPEECH_TWICE_PER_MOVE = 3
"""Chunks of the user's speech a move may make the session hear twice. The server issues its
handles after a turn, while the user is quiet, so the arrival rule's margin holds silence,
which is not replayed: the matrix and the interleavings measure 0 per move, at loop lags up
to 120 ms (load average 2.5). Replaying every retained frame (a deliberate breakage) gave 3 to
12. A fixed figure from the ledger's ground truth, never from the settings under test."""

SILENCE_TWICE_PER_MOVE = 3
"""Chunks of silence a move may make the session hear twice: silence within the arrival
margin is not replayed, so the measured figure is 0 (4 to 50 with every retained frame
replayed)."""


class Rig:
    """One conversation: a transport on the emulator, driven by a scripted caller."""

    def __init__(
        self,
        emu: Emulator,
        transport: GeminiLiveTransport,
        caller: ScriptedCaller,
    ) -> None:
        self.emu = emu
        self.transport = transport
        self.caller = caller
        self.transparent = emu.config.profile == "vertex"
        self.closed = False

    @property
    def record(self) -> CallerRecord:
        return self.caller.record

    @property
    def session_id(self) -> str:
        """The session the conversation started in (faults target it)."""
        return self.record.session_ids[0]

    @property
    def current_session(self) -> str:
        """The session announced last (differs after a rebuild)."""
        session = self.record.session_id
        assert session is not None
        return session

    async def start(self) -> None:
        """Connect and start the microphone."""
        await self.transport.connect()
        self.caller.start_microphone()

    async def warm_up(self, words: Sequence[str] = WARM_UP) -> None:
        """One answered turn, then wait for the resumable handle that follows it."""
        await self.caller.ask(words, timeout=WAIT)
        await self.wait_idle_handle()

    async def wait_idle_handle(self) -> None:
        """Wait for a resumable handle issued after the latest turn completed."""

        def after_turn(r: CallerRecord) -> bool:
            ends = [e.at for e in r.events if e.kind == "turn_complete"]
            return any(
                u.has_handle and u.resumable and (not ends or u.at > ends[-1])
                for u in r.resumption_updates
            )

        await self.caller.wait_until(after_turn, timeout=WAIT, what="a handle after the turn")

    async def wait_quiet(self, moves: int) -> None:
        """Wait until ``moves`` moves reported, none is running and no answer is open."""
        await self.caller.wait_until(
            lambda r: len(r.moves) >= moves and not r.move_in_progress and not r.open_generations,
            timeout=WAIT,
            what=f"quiet after {moves} move(s)",
        )

    async def alive(self) -> None:
        """A further user turn is answered."""
        await self.caller.ask(CHECK, timeout=WAIT)

    async def settle_audio(self) -> None:
        """Stop the microphone and give the last accepted chunks time to reach the emulator
        (bounded: audio a lost session never delivers does not hold the test)."""
        await self.caller.stop_microphone()
        if not self.record.audio:
            return
        last = self.record.audio[-1].seq
        sessions = self.emu.ledger.sessions
        try:
            async with asyncio.timeout(2.0):
                while not any(  # noqa: ASYNC110 - the ledger has no change notification
                    last in sessions[sid].audio_received
                    for sid in self.record.session_ids
                    if sid in sessions
                ):
                    await asyncio.sleep(0.005)
        except TimeoutError:
            pass

    async def drain(self) -> None:
        """Stop the microphone and wait until the session has answered all it heard: no
        speech pending in the emulator, no answer running there or open here. Audio a move
        replayed although the session had it (heard twice) can make a turn of its own;
        closing before its answer ends would cut it."""
        await self.settle_audio()

        def answered(r: CallerRecord) -> bool:
            if r.open_generations or r.move_in_progress:
                return False
            for sid in dict.fromkeys(r.session_ids):
                session = self.emu.ledger.sessions.get(sid)
                if session is None:
                    continue
                if session.state is not None and session.state.pending.speech:
                    return False
                if any(t.outcome == "running" for t in session.turns.values()):
                    return False
            return True

        await self.caller.wait_until(answered, timeout=WAIT, what="every turn answered")

    async def close(self) -> None:
        """Stop the caller, disconnect, and give the transport its callbacks back."""
        if self.closed:
            return
        self.closed = True
        await self.settle_audio()
        await self.transport.disconnect()
        await self.caller.aclose()


class Arena:
    """Emulators and rigs of one test; ``finish`` tears them down and checks nothing is left."""

    def __init__(self) -> None:
        self.emulators: list[Emulator] = []
        self.rigs: list[Rig] = []
        self._models: dict[int, str] = {}
        self._baseline: set[asyncio.Task[Any]] = set()

    async def emulator(
        self, profile: Profile, model: str | None = None, **changes: Any
    ) -> Emulator:
        """A started emulator (stopped at teardown); see ``rotation_config``."""
        emu = Emulator(rotation_config(profile, model, **changes))
        await emu.start()
        self.emulators.append(emu)
        if model is not None:
            self._models[id(emu)] = model
        self._baseline = asyncio.all_tasks()
        return emu

    def rig(
        self,
        emu: Emulator,
        *,
        client: genai.Client | None = None,
        resumption: ResumptionOptions = RESUMPTION,
        first_seq: int = 0,
        pace: float = PACE,
        input_buffer: OutboxLimits | None = None,
        transport_options: dict[str, Any] | None = None,
    ) -> Rig:
        """A transport on ``emu`` (Vertex: ``transparent``) with a scripted caller, for the
        model the emulator stands in for. Its function is declared blocking, so that a call
        holds its answer on every model (on gemini-3.8-live calls are non-blocking unless
        declared so): the matrix's ``tool_call`` phase is a move while a call holds the answer
        (``test_rotation_tools`` moves non-blocking calls)."""
        vertex = emu.config.profile == "vertex"
        transport = GeminiLiveTransport(
            client=client if client is not None else emu.client(vertex=vertex),
            model=self._models.get(id(emu), MODEL),
            tools=[{"name": TOOL, "behavior": "BLOCKING"}],
            tool_call_grace=TOOL_CALL_GRACE * SCALE,
            transparent=vertex,
            resumption=resumption,
            input_buffer=input_buffer if input_buffer is not None else limits_for(emu.config),
            **(transport_options or {}),
        )
        caller = ScriptedCaller(
            transport,
            chunk_ms=CHUNK_MS,
            pace=pace,
            turn_silence=TURN_SILENCE,
            tool_delay=TOOL_DELAY,
            first_seq=first_seq,
        )
        rig = Rig(emu, transport, caller)
        self.rigs.append(rig)
        return rig

    async def finish(self) -> LedgerSummary | None:
        """Close every rig, wait for the emulator to see every connection closed, and check
        that no task is left; returns the first emulator's ledger summary."""
        await asyncio.gather(*(rig.close() for rig in self.rigs))
        for emu in self.emulators:
            await emu.wait_disconnected(timeout=WAIT)
        current = asyncio.current_task()
        extra = {t for t in asyncio.all_tasks() - self._baseline if t is not current}
        if extra:
            # The emulator's connection handlers finish just after their close is recorded.
            _, pending = await asyncio.wait(extra, timeout=2.0)
            names = sorted(t.get_name() for t in pending)
            assert not pending, f"tasks left after disconnect: {names}"
        return self.emulators[0].ledger.summary() if self.emulators else None

    async def teardown(self) -> None:
        rigs = [rig for rig in self.rigs if not rig.closed]
        for rig in rigs:
            rig.closed = True
        # Every microphone stops before any rig disconnects, and the rigs disconnect together:
        # one by one, a storm's streaming rigs kept the loop busy while each of the others
        # closed, and a failed storm took minutes to tear down.
        await asyncio.gather(*(rig.caller.stop_microphone() for rig in rigs))
        await asyncio.gather(*(self._disconnect(rig) for rig in rigs))
        for emu in self.emulators:
            await emu.stop()

    @staticmethod
    async def _disconnect(rig: Rig) -> None:
        try:
            async with asyncio.timeout(WAIT):
                await rig.transport.disconnect()
                await rig.caller.aclose()
        except Exception:  # teardown after a failure must not mask it
            logger.exception("teardown of a rig failed")


# --- invariants -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expect:
    """What a scenario must end with."""

    outcomes: tuple[MoveOutcome, ...] = (MoveOutcome.RESUMED,)
    """One per move, in order."""
    reasons: tuple[MoveReason, ...] | None = None
    handle_kinds: tuple[HandleKind, ...] | None = None
    cut_allowed: bool = False
    """An answer may be cut: no resumable point could exist before the connection ended."""

    @property
    def lost(self) -> bool:
        return MoveOutcome.LOST in self.outcomes


def check_invariants(rig: Rig, ledger: LedgerSummary, expect: Expect) -> None:
    """Every invariant of a rotation scenario, from the caller's record and the ledger."""
    record = rig.record
    summary = rig.caller.summary()
    comparison = summary.compare(ledger)
    problems: list[str] = []
    moves = list(record.moves)

    # Exactly one outcome per move, the expected ones.
    if len(record.moves_started) != len(moves):
        problems.append(f"{len(record.moves_started)} move(s) started, {len(moves)} reported")
    if [m.number for m in moves] != list(range(1, len(moves) + 1)):
        problems.append(f"move numbers {[m.number for m in moves]}")
    outcomes = tuple(m.outcome for m in moves)
    if outcomes != expect.outcomes:
        problems.append(f"outcomes {[str(o) for o in outcomes]}, expected {expect.outcomes}")
    if expect.reasons is not None and tuple(m.reason for m in moves) != expect.reasons:
        problems.append(f"reasons {[str(m.reason) for m in moves]}, expected {expect.reasons}")
    if expect.handle_kinds is not None and (
        tuple(m.handle_kind for m in moves) != expect.handle_kinds
    ):
        problems.append(
            f"handle kinds {[str(m.handle_kind) for m in moves]}, expected {expect.handle_kinds}"
        )
    dropped = [m.audio_chunks_dropped for m in moves]
    if any(dropped):
        problems.append(f"audio chunks dropped below the buffer bound: {dropped}")

    # Generations paired.
    if comparison.unpaired_generations:
        spans = [record.generations[g] for g in comparison.unpaired_generations]
        problems.append(f"unpaired generations: {spans}")

    # No tool result sent to a session that never issued (or no longer awaited) the call.
    sessions = [rig.emu.ledger.sessions[s] for s in summary.sessions]
    if comparison.stranded_tool_responses:
        problems.append(f"stranded tool responses: {comparison.stranded_tool_responses}")
    # A result the caller sent before the cancellation of its call reached it crossed that
    # cancellation on the wire (the user barged in on the tool call): the session ignores
    # it, and no client could have known. Any other result a session no longer awaited is
    # a move's (or the transport's) doing.
    crossed = _results_crossing_their_cancellation(record)
    unawaited = [r for s in sessions for r in s.unawaited_tool_responses if r not in crossed]
    if unawaited:
        problems.append(f"tool responses to a session that no longer awaited them: {unawaited}")

    # No answer cut when a resumable point existed before the deadline.
    if not expect.cut_allowed:
        cut = {s: ledger.sessions[s].answers_cut for s in summary.sessions}
        if any(cut.values()):
            problems.append(f"answers cut (ledger): {cut}")
        if comparison.chunks_missing:
            problems.append(f"answer chunks never heard: {dict(comparison.chunks_missing)}")

    # Zero speech lost, in order; exactly once where the provider says what it consumed.
    # Silence may be missing by design (see ``tests/ledger_checks``).
    cutoff = moves[0].started_at if expect.lost and moves else float("inf")
    if expect.lost and moves:
        accepted = {a.seq for a in record.audio if a.at < cutoff}
        missing = [seq for seq in comparison.audio_missing if seq in accepted]
    else:
        missing = list(comparison.audio_missing)
    spoken = {a.seq for a in record.audio if a.speech}
    speech = [seq for seq in missing if seq in spoken]
    if speech:
        problems.append(
            f"user speech lost: {len(speech)} chunk(s) {_ranges(speech)}; never received: "
            f"{_ranges(comparison.audio_unreceived)}"
        )
    # Zero typed input lost: each accepted text reached a session state that keeps it.
    typed = [text for at, text, ok in record.typed if ok and (not expect.lost or at < cutoff)]
    kept = _user_texts(rig, summary.sessions)
    lost_texts = [text for text in typed if not any(text in kept_text for kept_text in kept)]
    if lost_texts:
        problems.append(f"typed input lost: {lost_texts}")
    if rig.transparent and comparison.audio_duplicated:
        problems.append(
            f"audio duplicated despite transparent resumption: {_ranges(comparison.audio_duplicated)}"
        )
    for session in summary.sessions:
        consumed = list(dict.fromkeys(ledger.sessions[session].audio_consumed))
        if consumed != sorted(consumed):
            problems.append(f"audio out of order in session {session}")

    # Sends never raise while the session lives.
    failures = list(record.send_failures)
    if expect.lost and moves and moves[-1].outcome == MoveOutcome.LOST:
        failures = [f for f in failures if f.at < moves[-1].finished_at]
    if failures:
        problems.append(f"{len(failures)} send(s) raised, first: {failures[0]}")

    # Lost for good: reported, an error and a close.
    if expect.lost:
        finished = moves[-1].finished_at if moves else float("inf")
        if not any(at >= finished for at, _ in record.errors):
            problems.append("no on_error after the session was lost")
        if not any(at >= finished for at, _, _ in record.closes):
            problems.append("no on_close after the session was lost")

    assert not problems, "\n".join([*problems, str(summary), str(comparison), _moves(rig)])


def check_move_figures(rig: Rig, ledger: LedgerSummary, *, slow_setup: float | None) -> int:
    """The ledger's per-move figures against the caller's move reports: no move lost speech,
    none made the session hear more than ``SPEECH_TWICE_PER_MOVE`` chunks of speech or
    ``SILENCE_TWICE_PER_MOVE`` of silence twice, none made it hear audio it was not sent
    again (with ``transparent`` none heard any twice), and, when every resumed setup took ``slow_setup`` wall seconds, a planned
    move that held nothing (``gap_ms`` 0) kept the input flowing while the replacement set
    up: its input lag (the stall beyond the stream's usual spacing) stays under that setup.

    A move pairs with the ledger's next move of the session it resumed; a rebuild starts the
    next session. When a replacement was set up and then given up (the user began a turn on
    the incumbent), the ledger counts a move the transport never made; the moves
    are then not paired. Returns how many moves were paired."""
    sessions = [ledger.sessions[s] for s in dict.fromkeys(rig.record.session_ids)]
    problems: list[str] = []
    paired = 0
    for summary in sessions:
        problems.extend(
            f"move {m.index} of {summary.session_id} lost speech {_ranges(m.speech_lost)}"
            for m in summary.moves
            if m.speech_lost
        )
        problems.extend(
            f"move {m.index} of {summary.session_id}: {len(m.speech_duplicates)} chunk(s) of "
            f"speech and {len(m.silence_duplicates)} of silence heard twice (bounds "
            f"{SPEECH_TWICE_PER_MOVE} and {SILENCE_TWICE_PER_MOVE})"
            for m in summary.moves
            if len(m.speech_duplicates) > SPEECH_TWICE_PER_MOVE
            or len(m.silence_duplicates) > SILENCE_TWICE_PER_MOVE
        )

        if rig.transparent:
            problems.extend(
                f"move {m.index} of {summary.session_id} made audio heard twice despite "
                f"transparent resumption: {_ranges(m.audio_duplicates)}"
                for m in summary.moves
                if m.audio_duplicates
            )
    expected = sum(len(s.moves) for s in sessions)
    resumed = [m for m in rig.record.moves if m.outcome == MoveOutcome.RESUMED]
    if expected == len(resumed):
        ledger_moves = iter(m for s in sessions for m in s.moves)
        for report, move in zip(resumed, ledger_moves, strict=True):
            paired += 1
            if len(move.audio_duplicates) > report.messages_replayed:
                problems.append(
                    f"move {report.number}: {len(move.audio_duplicates)} chunk(s) heard twice, "
                    f"only {report.messages_replayed} message(s) replayed"
                )
            lag = move.input_lag
            if (
                slow_setup is not None
                and report.reason == MoveReason.PLANNED
                and report.gap_ms == 0
                and lag is not None
                and lag >= slow_setup
            ):
                problems.append(
                    f"move {report.number} held nothing, yet input lagged {lag * 1000:.0f} ms "
                    f"while a {slow_setup * 1000:.0f} ms setup ran"
                )
    assert not problems, "\n".join([*problems, f"paired {paired}", str(ledger), _moves(rig)])
    return paired


def _results_crossing_their_cancellation(record: CallerRecord) -> set[str]:
    cancelled_at: dict[str, float] = {}
    for event in record.events:
        if event.kind == "tool_cancel":
            for call_id in event.detail.split():
                cancelled_at.setdefault(call_id, event.at)
    return {
        a.call_id
        for a in record.tool_answers
        if a.outcome == "sent" and a.at < cancelled_at.get(a.call_id, -math.inf)
    }


def _user_texts(rig: Rig, sessions: Sequence[str]) -> list[str]:
    """The user turns (and pending input) in the final state of each session."""
    texts: list[str] = []
    for session in sessions:
        state = rig.emu.ledger.sessions[session].state
        if state is not None:
            texts.extend(turn.user_text for turn in state.history)
            texts.append(state.pending.text)
    return texts


def _ranges(seqs: Sequence[int]) -> str:
    if not seqs:
        return "[]"
    ordered = sorted(set(seqs))
    spans: list[str] = []
    start = prev = ordered[0]
    for seq in [*ordered[1:], None]:
        if seq is not None and seq == prev + 1:
            prev = seq
            continue
        spans.append(f"{start}" if start == prev else f"{start}-{prev}")
        if seq is not None:
            start = prev = seq
    return "[" + ", ".join(spans) + "]"


def _moves(rig: Rig) -> str:
    lines = [f"  {m.as_dict()}" for m in rig.record.moves]
    connections = [
        f"  {sid} conn {c.index}: resumed_from={c.resumed_handle_index} refused={c.refused} "
        f"setup={c.setup_at} closed={c.closed_at} code={c.close_code} by={c.closed_by}"
        for sid in dict.fromkeys(rig.record.session_ids)
        for c in rig.emu.ledger.sessions[sid].connections
    ]
    return "\n".join(["moves:", *lines, "connections:", *connections])
