"""The emulator in a process of its own, as the real service is: its CPU, event loop and
interpreter lock are not the client's, so a benchmark's timing figures are the client's and
the network's alone. Either emulator: Gemini Live's (an ``EmulatorConfig``) or OpenAI
Realtime's (an ``OpenAIEmulatorConfig``).

The child (this file run as a script, given the emulator's kind and its configuration's fields
as JSON) serves until told to quit, driven by JSON lines on stdin: a fault (``{"fault": "go_away",
"kwargs": {...}}``, answered with its result's count), the ledger (``{"ledger": true}``,
answered with it pickled), its loop's lag since the last ask (``{"lag": true}``),
``{"quit": true}``. Both processes read the same monotonic clock, so the ledger's times (from
``started_at``) compare with the client's ``loop.time()``.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import os
import pickle
import ssl
import sys
from pathlib import Path
from typing import Any

from google.genai import types
from loguru import logger
from loop_ticker import LoopTicker

from realtime_resumption.testing.emulator import Emulator, EmulatorConfig
from realtime_resumption.testing.openai_emulator import OpenAIEmulator, OpenAIEmulatorConfig

_SCRIPT = str(Path(__file__).resolve())
WAIT = 60.0
"""Bound of every exchange with the child (its start, a fault, the ledger, its exit)."""


class EmulatorProcess:
    """``async with EmulatorProcess(config) as server:`` the emulator ``config`` is for (Gemini
    Live's or OpenAI Realtime's) in a child process."""

    def __init__(self, config: EmulatorConfig | OpenAIEmulatorConfig) -> None:
        self._config = config
        self._kind = "openai" if isinstance(config, OpenAIEmulatorConfig) else "gemini"
        self._process: asyncio.subprocess.Process | None = None
        self.http_options: types.HttpOptions | None = None
        """google-genai's options for the Gemini emulator (None for OpenAI's)."""
        self.ca_file = ""
        self.base_url = ""
        """The emulator's base URL (OpenAI's: ``https://.../v1``, the SDK's ``base_url``)."""
        self.started_at = 0.0
        """The child's loop time when the emulator started: ledger times count from it."""

    async def __aenter__(self) -> EmulatorProcess:
        config = self._config
        fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
        self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            _SCRIPT,
            self._kind,
            json.dumps(fields),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=2**28,  # the ledger is one line
        )
        hello = await self._ask(None)
        self.ca_file, self.base_url = hello["ca_file"], hello["base_url"]
        self.started_at = hello["started_at"]
        if self._kind == "gemini":
            self.http_options = types.HttpOptions(
                base_url=self.base_url, async_client_args={"ssl": self.ssl_context()}
            )
        return self

    def ssl_context(self) -> ssl.SSLContext:
        """A client SSL context that trusts the emulator's CA."""
        return ssl.create_default_context(cafile=self.ca_file)

    async def __aexit__(self, *exc: object) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None
        try:
            process.stdin.write(b'{"quit": true}\n')
            await process.stdin.drain()
            await asyncio.wait_for(process.wait(), WAIT)
        except (TimeoutError, ConnectionError):
            process.kill()
            await process.wait()

    def cpu_seconds(self) -> float | None:
        """The child's CPU time so far (user and system, from ``/proc``); None where the
        system has no ``/proc``: how much of the machine the server side took."""
        process = self._process
        if process is None:
            return None
        try:
            stat = Path(f"/proc/{process.pid}/stat").read_text()
        except OSError:
            return None
        # The fields after the command name, which is in parentheses and may hold spaces.
        fields = stat.rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    async def fault(self, name: str, **kwargs: Any) -> int:
        """Apply ``emu.faults.<name>(**kwargs)`` in the child; how many connections it hit."""
        reply = await self._ask({"fault": name, "kwargs": kwargs})
        count: int = reply["count"]
        return count

    async def loop_lag(self) -> list[float]:
        """The child's event loop lag samples (``LoopTicker``) since the last call: a server
        whose loop lags takes the client's input in late."""
        reply = await self._ask({"lag": True})
        samples: list[float] = reply["lag"]
        return samples

    async def ledger(self) -> Any:
        """A copy of the child's ledger, now (the emulator's ``Ledger``: Gemini's or OpenAI's)."""
        reply = await self._ask({"ledger": True})
        return pickle.loads(base64.b64decode(reply["ledger"]))

    async def _ask(self, command: dict[str, Any] | None) -> dict[str, Any]:
        process = self._process
        assert process is not None and process.stdin and process.stdout
        if command is not None:
            process.stdin.write(json.dumps(command).encode() + b"\n")
            await process.stdin.drain()
        line = await asyncio.wait_for(process.stdout.readline(), WAIT)
        if not line:
            raise RuntimeError("the emulator's process ended")
        reply: dict[str, Any] = json.loads(line)
        return reply


def _answer(
    emu: Emulator | OpenAIEmulator, ticker: LoopTicker, command: dict[str, Any]
) -> dict[str, Any]:
    if "lag" in command:
        return {"lag": ticker.take()}
    if "fault" in command:
        result = getattr(emu.faults, command["fault"])(**command.get("kwargs", {}))
        # Gemini's faults return a result with its count; OpenAI's return the count.
        return {"count": result if isinstance(result, int) else getattr(result, "count", 0)}
    if "ledger" in command:
        return {"ledger": base64.b64encode(pickle.dumps(emu.ledger)).decode()}
    raise ValueError(f"unknown command {command!r}")


async def _serve(kind: str, fields: dict[str, Any]) -> None:
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    for name in ("setup_latency", "handle_delay"):
        if isinstance(fields.get(name), list):
            fields[name] = tuple(fields[name])  # JSON has no tuples
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    emulator: Emulator | OpenAIEmulator
    if kind == "openai":
        emulator = OpenAIEmulator(OpenAIEmulatorConfig(**fields))
    else:
        emulator = Emulator(EmulatorConfig(**fields))
    async with emulator as emu:
        # OpenAI's emulator keeps no start time of its own: it starts with the context.
        started_at = emu.started_at if isinstance(emu, Emulator) else loop.time()
        hello = {"base_url": emu.base_url, "ca_file": emu.ca_file, "started_at": started_at}
        print(json.dumps(hello), flush=True)
        ticker = LoopTicker()
        ticker.start()
        try:
            while line := (await reader.readline()).strip():
                command = json.loads(line)
                if command.get("quit"):
                    break
                print(json.dumps(_answer(emu, ticker, command)), flush=True)
        finally:
            await ticker.stop()


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[1], json.loads(sys.argv[2])))
