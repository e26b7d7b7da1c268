"""Runs one lane's call on its own emulator and keeps everything the figures need."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from loguru import logger

from realtime_resumption.testing.emulator import Emulator, EmulatorConfig
from realtime_resumption.testing.emulator.caller import CallerRecord
from realtime_resumption.testing.emulator.ledger import Ledger

from .call import CallRecord, Conductor, Ear, Mark, Plan
from .stacks import Lane, StackContext

_DISCONNECT_TIMEOUT = 5.0


@dataclass
class LaneRun:
    """One lane's call: the script's record, what the caller heard and said, the ledger."""

    lane: Lane
    record: CallRecord
    ear: Ear
    microphone: CallerRecord
    ledger: Ledger
    config: EmulatorConfig
    duration: float
    origin: float
    """The event-loop time of the ledger clock's zero (the microphone records loop times)."""


def emulator_config(plan: Plan, model: str | None = None) -> EmulatorConfig:
    """The emulator every lane gets: the Gemini API profile, answers of ``plan``'s length; with
    ``model``, the service as it behaves for that model (``EmulatorConfig.model``)."""
    if model is not None:
        return EmulatorConfig.model(model, profile="gemini", answer_chunks=plan.answer_chunks)
    return EmulatorConfig(profile="gemini", answer_chunks=plan.answer_chunks)


async def run_lane(
    lane: Lane, plan: Plan, emulator: Emulator, started: float, on_mark: Callable[[Mark], None]
) -> LaneRun:
    """The scripted call on ``lane``'s stack, on ``emulator`` (running, its own; ``started``
    is the event-loop time it began serving at)."""
    loop = asyncio.get_running_loop()

    def clock() -> float:
        return loop.time() - started

    ear = Ear(clock)
    record = CallRecord()
    conductor = Conductor(emulator, clock, plan, record, ear, on_mark)
    context = StackContext(emulator.http_options(), ear, record, clock, conductor.mark)
    stack = lane.factory(context)
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
    plan: Plan,
    on_mark: Callable[[Lane], Callable[[Mark], None]],
    model: str | None = None,
) -> list[LaneRun]:
    """Every lane's call at once, each on an emulator of its own (see ``emulator_config``)."""
    loop = asyncio.get_running_loop()
    async with contextlib.AsyncExitStack() as stack:
        emulators = []
        # Started one after another: making an emulator's certificate holds the event loop,
        # and each lane's clock must start when its emulator's ledger clock does.
        for _ in lanes:
            emulator = await stack.enter_async_context(Emulator(emulator_config(plan, model)))
            emulators.append((emulator, loop.time()))
        return list(
            await asyncio.gather(
                *(
                    run_lane(lane, plan, emulator, started, on_mark(lane))
                    for lane, (emulator, started) in zip(lanes, emulators, strict=True)
                )
            )
        )
