"""Runs one lane's call on its own emulator and keeps everything the figures need."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from loguru import logger

from realtime_resumption.testing.emulator import Emulator, EmulatorConfig
from realtime_resumption.testing.emulator.caller import CallerRecord

from .call import CallRecord, Conductor, Ear, GeminiConductor, Mark, Plan
from .stacks import Lane, StackContext

_DISCONNECT_TIMEOUT = 5.0


class ServedEmulator(Protocol):
    """What the runner needs of an emulator (the Gemini one, the OpenAI one)."""

    @property
    def ledger(self) -> Any: ...
    @property
    def config(self) -> Any: ...
    async def wait_disconnected(self, timeout: float = ...) -> None: ...


E = TypeVar("E", bound=ServedEmulator)


@dataclass(frozen=True)
class Call(Generic[E]):
    """What one kind of call is made of: its emulator, its script, what a stack is given."""

    emulator: Callable[[], AbstractAsyncContextManager[E]]
    """A new emulator for a lane (entered, it serves)."""
    conductor: Callable[
        [E, Callable[[], float], CallRecord, Ear, Callable[[Mark], None]], Conductor
    ]
    """The script on that emulator: (emulator, clock, record, ear, on_mark)."""
    context: Callable[
        [E, Ear, CallRecord, Callable[[], float], Callable[[str, str], None]], StackContext
    ]
    """What a stack is given: (emulator, ear, record, clock, mark)."""


@dataclass
class LaneRun:
    """One lane's call: the script's record, what the caller heard and said, the ledger."""

    lane: Lane
    record: CallRecord
    ear: Ear
    microphone: CallerRecord
    ledger: Any
    """The emulator's ledger (the Gemini or the OpenAI one, as the call's emulator)."""
    config: Any
    """The emulator's configuration."""
    duration: float
    origin: float
    """The event-loop time of the ledger clock's zero (the microphone records loop times)."""


def emulator_config(plan: Plan, model: str | None = None) -> EmulatorConfig:
    """The emulator every lane gets: the Gemini API profile, answers of ``plan``'s length; with
    ``model``, the service as it behaves for that model (``EmulatorConfig.model``)."""
    if model is not None:
        return EmulatorConfig.model(model, profile="gemini", answer_chunks=plan.answer_chunks)
    return EmulatorConfig(profile="gemini", answer_chunks=plan.answer_chunks)


def gemini_call(plan: Plan, model: str | None = None) -> Call[Emulator]:
    """``make demo``'s call: ``plan`` on the Gemini emulator (as for ``model``)."""
    config = emulator_config(plan, model)
    return Call(
        emulator=lambda: Emulator(config),
        conductor=lambda emu, clock, record, ear, on_mark: GeminiConductor(
            emu, clock, plan, record, ear, on_mark
        ),
        context=lambda emu, ear, record, clock, mark: StackContext(
            emu.http_options(), ear, record, clock, mark
        ),
    )


async def run_lane(
    lane: Lane, call: Call[E], emulator: E, started: float, on_mark: Callable[[Mark], None]
) -> LaneRun:
    """The scripted call on ``lane``'s stack, on ``emulator`` (running, its own; ``started``
    is the event-loop time it began serving at)."""
    loop = asyncio.get_running_loop()

    def clock() -> float:
        return loop.time() - started

    ear = Ear(clock)
    record = CallRecord()
    conductor = call.conductor(emulator, clock, record, ear, on_mark)
    stack = lane.factory(call.context(emulator, ear, record, clock, conductor.mark))
    try:
        await stack.start()
        await conductor.run(stack)
    finally:
        await stack.stop()
    try:
        await emulator.wait_disconnected(_DISCONNECT_TIMEOUT)
    except TimeoutError:
        logger.warning("{}: a connection stayed open after the call", lane.title)
    return LaneRun(
        lane,
        record,
        ear,
        conductor.microphone,
        emulator.ledger,
        emulator.config,
        clock(),
        started,
    )


async def run_lanes(
    lanes: Sequence[Lane],
    call: Call[E],
    on_mark: Callable[[Lane], Callable[[Mark], None]],
) -> list[LaneRun]:
    """Every lane's call at once, each on an emulator of its own."""
    loop = asyncio.get_running_loop()
    async with contextlib.AsyncExitStack() as stack:
        emulators = []
        # Started one after another: making an emulator's certificate holds the event loop,
        # and each lane's clock must start when its emulator's ledger clock does.
        for _ in lanes:
            emulator = await stack.enter_async_context(call.emulator())
            emulators.append((emulator, loop.time()))
        return list(
            await asyncio.gather(
                *(
                    run_lane(lane, call, emulator, started, on_mark(lane))
                    for lane, (emulator, started) in zip(lanes, emulators, strict=True)
                )
            )
        )
