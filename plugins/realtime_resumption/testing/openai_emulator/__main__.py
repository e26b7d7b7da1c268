"""Command line: serve the OpenAI Realtime emulator until Ctrl-C.

python -m realtime_resumption.testing.openai_emulator --profile azure --time-scale 0.1
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ..emulator import command_line
from .realtime_server import OpenAIEmulator
from .scripted_faults import REFUSALS
from .service_config import PROFILES, SESSION_CAP, OpenAIEmulatorConfig

_EPILOG = f"""\
the service (the defaults are its own; each has a kinder setting):
  session cap       --session-cap S (default: the profile's, {SESSION_CAP["openai"]:g} s on
                    openai, {SESSION_CAP["azure"]:g} s on azure; --no-session-cap): counted
                    from session.created, the session is closed 1001 "Your session hit the
                    maximum duration of N minutes."; --cap-error-event sends the older
                    session_expired error event first.
  pacing            answers come as --answer-chunks chunks of --chunk-ms audio each, at
                    playback pace, the first --first-audio-latency after response.created;
                    the input transcript --transcription-latency after its commit.
  session.created   --session-created-latency S after the upgrade (default 0.1).
  network           --round-trip S: everything on the wire arrives half of it late.
  API key           --api-key K: only K is accepted (401 for any other; default: any).

faults (all can also be scripted from Python through OpenAIEmulator.faults):
  refused dials     --refuse-next K [--refuse-status {"|".join(map(str, REFUSALS))}]: the next
                    K upgrades are refused with that HTTP status and the API's JSON error.
  slow sessions     --slow-sessions K --slow-seconds S: the next K sessions send
                    session.created S after the upgrade.
  drops             --drop-every S: every S seconds, abort every session's TCP connection
                    (the client sees 1006).

Clients trust the CA file (SSL_CERT_FILE, or an SSL context) and dial the base URL
(the openai SDK: base_url, and websocket_base_url with wss; Pipecat: base_url=<wss URL>/realtime;
LiveKit: base_url). Every duration is multiplied by --time-scale.
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m realtime_resumption.testing.openai_emulator",
        description="A local OpenAI Realtime server (TLS WebSocket) with scripted faults.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = OpenAIEmulatorConfig()
    p.add_argument("--profile", choices=PROFILES, default=d.profile, help="service (cap)")
    p.add_argument("--host", default=d.host, help="address to listen on (default %(default)s)")
    p.add_argument("--port", type=int, default=d.port, help="port (default: any free port)")
    p.add_argument("--time-scale", type=float, default=d.time_scale, help="scales durations")
    p.add_argument("--session-cap", type=_cap, default=d.session_cap, metavar="S|profile")
    p.add_argument("--no-session-cap", dest="session_cap", action="store_const", const=None)
    p.add_argument("--cap-error-event", action="store_true", help="session_expired, then close")
    p.add_argument("--answer-chunks", type=int, default=d.answer_chunks)
    p.add_argument("--chunk-ms", type=int, default=d.chunk_ms)
    p.add_argument("--first-audio-latency", type=float, default=d.first_audio_latency)
    p.add_argument("--transcription-latency", type=float, default=d.transcription_latency)
    p.add_argument("--session-created-latency", type=float, default=d.session_created_latency)
    p.add_argument("--round-trip", type=float, default=d.round_trip, metavar="S")
    p.add_argument("--api-key", default=None, help="the only key accepted")
    p.add_argument("--refuse-next", type=int, default=0, metavar="K")
    p.add_argument("--refuse-status", type=int, choices=sorted(REFUSALS), default=429)
    p.add_argument("--slow-sessions", type=int, default=0, metavar="K")
    p.add_argument("--slow-seconds", type=float, default=5.0, metavar="S")
    p.add_argument("--drop-every", type=float, metavar="S")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("-v", "--verbose", action="store_true", help="log every session (debug)")
    return p


def _cap(text: str) -> float | str:
    if text == "profile":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not seconds or 'profile': {text!r}") from None


def _config(args: argparse.Namespace) -> OpenAIEmulatorConfig:
    return OpenAIEmulatorConfig(
        profile=args.profile,
        host=args.host,
        port=args.port,
        time_scale=args.time_scale,
        session_cap=args.session_cap,
        cap_error_event=args.cap_error_event,
        answer_chunks=args.answer_chunks,
        chunk_ms=args.chunk_ms,
        first_audio_latency=args.first_audio_latency,
        transcription_latency=args.transcription_latency,
        session_created_latency=args.session_created_latency,
        round_trip=args.round_trip,
        api_key=args.api_key,
        seed=args.seed,
    )


async def _serve(args: argparse.Namespace) -> None:
    stop = command_line.stop_signal()
    async with OpenAIEmulator(_config(args)) as emu:
        if args.refuse_next:
            emu.faults.refuse_dials(args.refuse_status, args.refuse_next)
        if args.slow_sessions:
            emu.faults.slow_session_created(args.slow_seconds, args.slow_sessions)
        print(f"base URL: {emu.base_url}", flush=True)
        print(f"realtime: {emu.realtime_url}", flush=True)
        print(f"CA file:  {emu.ca_file}", flush=True)
        print("serving; Ctrl-C to stop", flush=True)
        periodic = []
        if args.drop_every:
            seconds = emu.config.scaled(args.drop_every)
            periodic.append(command_line.every(seconds, emu.faults.drop, "dropped {} session(s)"))
        await command_line.serve_until(stop, periodic)
        print(emu.ledger.summary(), flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``python -m realtime_resumption.testing.openai_emulator``."""
    args = _parser().parse_args(argv)
    command_line.log_to_stderr(args.verbose)
    try:
        _config(args)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    if args.refuse_next < 0 or args.slow_sessions < 0 or args.slow_seconds < 0:
        raise SystemExit("error: --refuse-next, --slow-sessions and --slow-seconds must be >= 0")
    if args.drop_every is not None and not args.drop_every > 0:
        raise SystemExit("error: --drop-every must be > 0")
    command_line.run(_serve(args))


if __name__ == "__main__":
    main()
