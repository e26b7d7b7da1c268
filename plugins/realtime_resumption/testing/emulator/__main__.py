"""Command line: serve the emulator until Ctrl-C.

python -m realtime_resumption.testing.emulator --profile gemini --rotate-every 30 --notice 5
python -m realtime_resumption.testing.emulator --model gemini-3.8-live --time-scale 0.01
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from . import command_line
from .config import INSTRUCTION_CHANGES, PROFILES, REFUSAL_TIMINGS, EmulatorConfig
from .faults import REFUSALS
from .models import model_names
from .server import Emulator

_EPILOG = """\
model profiles:
  --model NAME      the service as it behaves for one live model; its settings become the
                    defaults, and any flag below still wins over them:
                    gemini-2.5-flash-native-audio-preview-12-2025 (also
                    gemini-live-2.5-flash-native-audio, gemini-live-2.5-flash-preview, 2.5):
                    the defaults below, connections of 10 minutes (--rotate-every 600);
                    gemini-3.8-live (3.8): connections of 58 minutes closed without a goAway
                    (1011 "Deadline expired"), and the resume after that close refused with
                    1007; gemini-3.1-flash-live-preview (3.1; --profile gemini only):
                    resuming with a system instruction over 200 tokens, or after video, is
                    refused (1007), a new system instruction mid-session too. Without --model: the defaults
                    below, no connection lifetime.

realism (the defaults are the service's):
  setup             --setup-latency S (or LOW,HIGH: drawn per setup, seeded): setup
                    message to setupComplete (default 0.3 s).
  network           --round-trip S: everything on the wire (upgrade, frames, pings and
                    pongs, close), both ways, arrives half of it late, in order
                    (default 0.006 s).
  first update      --update-after-setup: send a resumption update right after
                    setupComplete (the service does not; its first handle follows an answer).

the service as teams measured it in 2026 (the defaults; each has a kinder setting):
  resume while open --refuse-resume-while-open (default; --no-refuse-resume-while-open
                    accepts it): a setup with the handle of a session that still has an
                    open connection is closed 1011; --refuse-resume-while-open-when
                    before_setup_complete (default: right after the setup frame, no
                    setupComplete) or after_setup_complete.
  late pongs        --pong-latency S (or LOW,HIGH: drawn per pong, seeded; default 8,30;
                    0: prompt): WebSocket pongs leave that late, in order; data does not
                    wait behind them.
  session cap       --session-cap S (default 900: the documented 15 minutes of audio;
                    --no-session-cap): a session without contextWindowCompression
                    (slidingWindow) gets goAway --notice before S of connected time
                    (across its resumed connections), then the profile's deadline close;
                    a later resume of it is refused with --refuse-close-code (1007).
  handle validity   --handle-validity S: handles stay valid while their session has an
                    open connection and S after it ended (default: 7200, Gemini API;
                    86400, Vertex AI, as documented); past it they are refused (1007).
  goAway overstay   --overstay-1008: at a goAway deadline close 1008 "client failed to
                    close the connection after receiving a GoAway signal" (one report)
                    instead of the profile's deadline close.
  unknown voice     a setup whose prebuilt voice is not one of the 30 documented voices is
                    refused with 1007 before setupComplete; --any-voice takes any name.

faults (all can also be scripted from Python through Emulator.faults):
  rotation          --rotate-every N --notice M: every connection gets goAway{timeLeft: M}
                    at age N-M and is closed at age N (Gemini: 1011 "Deadline expired
                    before operation could complete.", Vertex: 1000 "The operation was
                    cancelled."). --silence-after-go-away: nothing more is sent after it.
                    --rotate-without-go-away: no goAway, the close at age N alone;
                    --refuse-resume-after-deadline: then every later resume of the session
                    is refused with --refuse-close-code (1007).
                    --resume-instruction-limit T: a resume whose system instruction is over
                    T tokens (four characters a token) is refused the same way;
                    --refuse-resume-after-video: a resume of a session that was sent video
                    too.
  scripted goAway   --go-away-at-turn T / --go-away-at-chunk K: goAway right after chunk K
                    of answer turn T (either alone: any turn / any chunk);
                    --go-away-on-tool-call: right after a toolCall; --go-away-when-idle:
                    when a connection next becomes idle after an answer. Each fires once.
  drop              --drop-every S: every S seconds, abort every live TCP connection (the
                    client sees 1006).
  goAway storm      --storm-every S: every S seconds, goAway (the configured notice) to
                    every open session at once.
  refused attempts  --refuse-next K [--refuse-how http401|http403|http429|http503|close1011]:
                    refuse the next K attempts with that HTTP status at the upgrade, or
                    close 1011 right after setupComplete; --refuse-all: every attempt.
  slow setups       --slow-setups K --slow-setup-seconds S [--slow-resumed-only]: the next
                    K setups (resumed ones only) take S seconds (a "reconnect penalty").
  flapping server   --flap-close-after S [--flap-code C]: close every connection S seconds
                    after its setupComplete (default code 1011); --flap-drop-on-first-message:
                    abort it right after the client's first message following setup.
  hanging attempt   --hang-next K: accept the next K attempts and their setup, never send
                    setupComplete.
  dead resumes      --dead-after-resume K: the next K resumed connections are set up and
                    send their first resumption update, then never answer anything (no
                    transcription, no model output, no turnComplete); what the client sends
                    is still recorded. From Python, first_update=False: not even the update.
  late tool call    --tool-call-after-turn-complete: an answer that calls tools sends its
                    first chunk and turnComplete, then the toolCall, and finishes after the
                    tool response (the call arrives after the turn boundary).
  new instruction   --instruction-change accept|ignore|refuse: what a session does with a
                    new system instruction mid-session (a resume with a different one, or a
                    contextUpdate): apply it (default), keep the old one, or close 1007
                    (reported of Gemini 3.x models). Tools and voice always follow the new
                    connection's setup.
  rejected handles  --handle-lifetime S: handles older than S since they were issued
                    are refused too (a test's stale handles; default: no such limit).
                    Refused handles get --refuse-close-code (default 1007) right after
                    setup (--refuse-after-setup-complete: after setupComplete). From
                    Python, faults.expire_handles() expires every handle issued so far.

Clients trust the CA file (SSL_CERT_FILE, or HttpOptions(async_client_args={"ssl": ctx}))
and use the base URL as HttpOptions.base_url; any API key or bearer token is accepted.
Every duration is multiplied by --time-scale.
"""


def _model_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(
        "--model",
        choices=model_names(),
        default=None,
        metavar="NAME",
        help="a live model's behaviour (see model profiles below)",
    )
    return p


def _parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, with defaults from the ``--model`` profile when one is named."""
    model, _ = _model_parser().parse_known_args(argv)
    try:
        base = EmulatorConfig.model(model.model) if model.model else EmulatorConfig()
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    return _parser(base).parse_args(argv)


def _parser(d: EmulatorConfig | None = None) -> argparse.ArgumentParser:
    """The parser, its defaults taken from ``d`` (the bare ``EmulatorConfig()`` without)."""
    p = argparse.ArgumentParser(
        prog="python -m realtime_resumption.testing.emulator",
        description="A local Gemini Live server (TLS WebSocket) with scripted faults.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_model_parser()],
    )
    d = d if d is not None else EmulatorConfig()
    p.add_argument("--profile", choices=PROFILES, default=d.profile, help="service behaviour")
    p.add_argument("--host", default=d.host, help="address to listen on (default %(default)s)")
    p.add_argument("--port", type=int, default=d.port, help="port (default: any free port)")
    p.add_argument(
        "--time-scale", type=float, default=d.time_scale, help="multiplies every duration"
    )
    p.add_argument("--answer-chunks", type=int, default=d.answer_chunks, help="chunks per answer")
    p.add_argument(
        "--chunk-interval",
        type=float,
        default=d.chunk_interval,
        help="seconds between answer chunks",
    )
    p.add_argument("--chunk-ms", type=int, default=d.chunk_ms, help="audio per answer chunk (ms)")
    p.add_argument(
        "--vad-silence",
        type=float,
        default=d.vad_silence,
        help="silence that ends a user audio turn (s)",
    )
    p.add_argument(
        "--voice-activity",
        action="store_true",
        default=d.voice_activity,
        help="send voiceActivity messages",
    )
    p.add_argument(
        "--setup-latency",
        type=_latency,
        default=d.setup_latency,
        metavar="S|LOW,HIGH",
        help="seconds from setup to setupComplete (default %(default)s)",
    )
    p.add_argument(
        "--round-trip",
        type=float,
        default=d.round_trip,
        metavar="S",
        help="network round trip (default %(default)s s)",
    )
    p.add_argument(
        "--update-after-setup",
        action="store_true",
        default=d.update_after_setup,
        help="send a resumption update right after setupComplete",
    )
    p.add_argument(
        "--handle-validity",
        type=float,
        default=d.handle_validity,
        metavar="S",
        help="seconds a handle stays valid after its session ended (default: the profile's)",
    )
    p.add_argument(
        "--handle-lifetime",
        type=float,
        default=d.handle_lifetime,
        metavar="S",
        help="also refuse handles issued more than S ago (default: no such limit)",
    )
    p.add_argument(
        "--refuse-resume-while-open",
        action=argparse.BooleanOptionalAction,
        default=d.refuse_resume_while_open,
        help="refuse (1011) a resume while the session has an open connection",
    )
    p.add_argument(
        "--refuse-resume-while-open-when",
        choices=REFUSAL_TIMINGS,
        default=d.refuse_resume_while_open_when,
        help="when that refusal comes (default %(default)s)",
    )
    p.add_argument(
        "--pong-latency",
        type=_latency,
        default=d.pong_latency,
        metavar="S|LOW,HIGH",
        help="how late pongs leave (default %(default)s; 0: prompt)",
    )
    p.add_argument(
        "--session-cap",
        type=float,
        default=d.session_cap,
        metavar="S",
        help="session time without compression (default %(default)s)",
    )
    p.add_argument(
        "--no-session-cap",
        dest="session_cap",
        action="store_const",
        const=None,
        help="no session cap",
    )
    p.add_argument(
        "--overstay-1008",
        action="store_true",
        default=d.overstay_1008,
        help="close 1008 at a goAway deadline",
    )
    p.add_argument(
        "--any-voice",
        action="store_true",
        default=not d.refuse_unknown_voice,
        help="take any voice name (default: refuse unknown)",
    )
    p.add_argument(
        "--refuse-close-code",
        type=int,
        default=d.refuse_close_code,
        help="close code for a refused handle",
    )
    p.add_argument(
        "--refuse-after-setup-complete",
        action="store_true",
        default=d.refuse_after_setup_complete,
        help="refuse a bad handle after setupComplete",
    )
    p.add_argument(
        "--rotate-every",
        type=float,
        default=d.rotate_every,
        metavar="N",
        help="rotate connections every N s (a connection's life)",
    )
    p.add_argument(
        "--rotate-without-go-away",
        action=argparse.BooleanOptionalAction,
        default=d.rotate_without_go_away,
        help="rotations close without a goAway first",
    )
    p.add_argument(
        "--refuse-resume-after-deadline",
        action=argparse.BooleanOptionalAction,
        default=d.refuse_resume_after_deadline,
        help="refuse every resume after a close without goAway",
    )
    p.add_argument(
        "--refuse-resume-after-video",
        action=argparse.BooleanOptionalAction,
        default=d.refuse_resume_after_video,
        help="refuse resumes of a session that was sent video",
    )
    p.add_argument(
        "--resume-instruction-limit",
        type=int,
        default=d.resume_instruction_limit,
        metavar="T",
        help="refuse resumes whose system instruction is over T tokens",
    )
    p.add_argument(
        "--notice", type=float, default=d.notice, metavar="M", help="goAway timeLeft (s)"
    )
    p.add_argument(
        "--silence-after-go-away",
        action="store_true",
        default=d.silence_after_go_away,
        help="rotations: silent after goAway",
    )
    p.add_argument(
        "--go-away-at-turn", type=int, metavar="T", help="scripted goAway in answer turn T"
    )
    p.add_argument(
        "--go-away-at-chunk", type=int, metavar="K", help="scripted goAway after chunk K"
    )
    p.add_argument(
        "--go-away-on-tool-call", action="store_true", help="scripted goAway at a tool call"
    )
    p.add_argument("--go-away-when-idle", action="store_true", help="scripted goAway when idle")
    p.add_argument("--drop-every", type=float, metavar="S", help="abort all connections every S s")
    p.add_argument("--storm-every", type=float, metavar="S", help="goAway to all every S s")
    p.add_argument(
        "--refuse-next", type=int, default=0, metavar="K", help="refuse the next K attempts"
    )
    p.add_argument("--refuse-how", choices=REFUSALS, default="http503")
    p.add_argument("--refuse-all", action="store_true", help="refuse every attempt")
    p.add_argument(
        "--slow-setups", type=int, default=0, metavar="K", help="the next K setups are slow"
    )
    p.add_argument(
        "--slow-setup-seconds", type=float, default=4.0, metavar="S", help="a slow setup's time"
    )
    p.add_argument("--slow-resumed-only", action="store_true", help="only resumed setups are slow")
    p.add_argument(
        "--flap-close-after", type=float, metavar="S", help="close S s after every setup"
    )
    p.add_argument("--flap-code", type=int, default=1011, help="close code of --flap-close-after")
    p.add_argument(
        "--flap-drop-on-first-message",
        action="store_true",
        help="abort every connection after its first message",
    )
    p.add_argument("--hang-next", type=int, default=0, metavar="K", help="hang the next K attempts")
    p.add_argument(
        "--dead-after-resume",
        type=int,
        default=0,
        metavar="K",
        help="the next K resumed connections never answer",
    )
    p.add_argument(
        "--tool-call-after-turn-complete",
        action="store_true",
        default=d.tool_call_after_turn_complete,
        help="send a tool call after the answer's first turnComplete",
    )
    p.add_argument(
        "--instruction-change",
        choices=INSTRUCTION_CHANGES,
        default=d.instruction_change,
        help="a new system instruction mid-session (default %(default)s)",
    )
    p.add_argument(
        "--seed", type=int, default=d.seed, help="seed for handle delays and identifiers"
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log every connection (debug)")
    return p


def _config(args: argparse.Namespace) -> EmulatorConfig:
    settings = _settings(args)
    return (
        EmulatorConfig.model(args.model, **settings) if args.model else EmulatorConfig(**settings)
    )


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return dict(
        profile=args.profile,
        host=args.host,
        port=args.port,
        time_scale=args.time_scale,
        answer_chunks=args.answer_chunks,
        chunk_interval=args.chunk_interval,
        chunk_ms=args.chunk_ms,
        vad_silence=args.vad_silence,
        voice_activity=args.voice_activity,
        setup_latency=args.setup_latency,
        round_trip=args.round_trip,
        update_after_setup=args.update_after_setup,
        handle_validity=args.handle_validity,
        handle_lifetime=args.handle_lifetime,
        refuse_resume_while_open=args.refuse_resume_while_open,
        refuse_resume_while_open_when=args.refuse_resume_while_open_when,
        pong_latency=args.pong_latency,
        session_cap=args.session_cap,
        overstay_1008=args.overstay_1008,
        refuse_unknown_voice=not args.any_voice,
        refuse_close_code=args.refuse_close_code,
        refuse_after_setup_complete=args.refuse_after_setup_complete,
        rotate_every=args.rotate_every,
        rotate_without_go_away=args.rotate_without_go_away,
        refuse_resume_after_deadline=args.refuse_resume_after_deadline,
        resume_instruction_limit=args.resume_instruction_limit,
        refuse_resume_after_video=args.refuse_resume_after_video,
        notice=args.notice,
        silence_after_go_away=args.silence_after_go_away,
        tool_call_after_turn_complete=args.tool_call_after_turn_complete,
        instruction_change=args.instruction_change,
        seed=args.seed,
    )


def _script_faults(emu: Emulator, args: argparse.Namespace) -> None:
    faults = emu.faults
    if args.refuse_next:
        faults.refuse_next(args.refuse_next, args.refuse_how)
    if args.refuse_all:
        faults.refuse_all(args.refuse_how)
    if args.slow_setups:
        faults.slow_setups(
            args.slow_setups, args.slow_setup_seconds, resumed_only=args.slow_resumed_only
        )
    if args.flap_close_after is not None or args.flap_drop_on_first_message:
        faults.flap(
            close_after=args.flap_close_after,
            code=args.flap_code,
            drop_on_first_message=args.flap_drop_on_first_message,
        )
    if args.hang_next:
        faults.hang_next(args.hang_next)
    if args.dead_after_resume:
        faults.dead_after_resume(args.dead_after_resume)
    if args.go_away_at_turn is not None or args.go_away_at_chunk is not None:
        faults.go_away_at(turn=args.go_away_at_turn, chunk=args.go_away_at_chunk)
    if args.go_away_on_tool_call:
        faults.go_away_at(on_tool_call=True)
    if args.go_away_when_idle:
        faults.go_away_at(when_idle=True)


def _latency(text: str) -> float | tuple[float, float]:
    low, sep, high = text.partition(",")
    try:
        return (float(low), float(high)) if sep else float(low)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not seconds or LOW,HIGH: {text!r}") from None


async def _serve(args: argparse.Namespace) -> None:
    stop = command_line.stop_signal()
    async with Emulator(_config(args)) as emu:
        _script_faults(emu, args)
        print(f"base URL: {emu.base_url}", flush=True)
        print(f"CA file:  {emu.ca_file}", flush=True)
        print("serving; Ctrl-C to stop", flush=True)
        scaled = emu.config.scaled
        periodic = []
        if args.drop_every:
            periodic.append(
                command_line.every(
                    scaled(args.drop_every), emu.faults.drop, "dropped {} connection(s)"
                )
            )
        if args.storm_every:

            def storm() -> int:
                return emu.faults.go_away().count

            periodic.append(
                command_line.every(scaled(args.storm_every), storm, "goAway to {} connection(s)")
            )
        await command_line.serve_until(stop, periodic)
        print(emu.ledger.summary() or "no sessions", flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``python -m realtime_resumption.testing.emulator``."""
    args = _parse(argv)
    command_line.log_to_stderr(args.verbose)
    try:
        _config(args)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    for flag in ("refuse_next", "hang_next", "dead_after_resume", "slow_setups"):
        if getattr(args, flag) < 0:
            raise SystemExit(f"error: --{flag.replace('_', '-')} must be >= 0")
    if args.slow_setup_seconds < 0 or (args.flap_close_after or 0) < 0:
        raise SystemExit("error: --slow-setup-seconds and --flap-close-after must be >= 0")
    if not 1000 <= args.flap_code <= 4999:
        raise SystemExit("error: --flap-code must be a WebSocket close code (1000-4999)")
    command_line.run(_serve(args))


if __name__ == "__main__":
    main()
