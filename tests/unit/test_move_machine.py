"""The move's state machine, driven directly: pure, no I/O, no clock.

Each transition of ``move_machine`` has a test here (each row of the failure policy's table
has one in ``test_failures.py``); a hypothesis state machine then feeds random event sequences
and checks the invariants (the machine never dials without bound, CLOSED is final, every wait is a
jittered retry delay).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from realtime_resumption import move_machine as m
from realtime_resumption.failures import RetryPolicy, Stage
from realtime_resumption.gemini.close_codes import read_close
from realtime_resumption.move_machine import InputGate
from realtime_resumption.move_reports import HandleKind, MoveReason
from realtime_resumption.transport import ConnectError, ConnectFailure

DELAYS = (0.0, 0.5, 1.0, 2.0, 4.0)
H1 = "handle-one-0123456789abcdef"


def machine(**policy: object) -> m.MoveMachine:
    policy.setdefault("random", random.Random(7).random)
    return m.MoveMachine(DELAYS, RetryPolicy(**policy), read_close)  # type: ignore[arg-type]


def due(
    now: float = 0.0,
    *,
    reason: MoveReason = MoveReason.PLANNED,
    handle: str | None = H1,
    incumbent: bool = True,
    can_rebuild: bool = True,
    forced: bool = False,
) -> m.Due:
    kind = HandleKind.AFTER_TURN if handle else HandleKind.NONE
    return m.Due(now, reason, handle, kind, incumbent, can_rebuild, forced)


def lost(now: float, handle: str | None = H1, *, can_rebuild: bool = True) -> m.Lost:
    kind = HandleKind.MID_TURN if handle else HandleKind.NONE
    return m.Lost(now, 1006, handle, kind, can_rebuild)


def http(status: int) -> ConnectError:
    return ConnectError(ConnectFailure("refused", f"HTTP {status}", code=status))


def closed(code: int) -> ConnectError:
    return ConnectError(ConnectFailure("closed", f"code {code}", code=code))


def switch(mm: m.MoveMachine, now: float) -> list[m.Action]:
    [settle] = mm.send(m.SetupOk())
    assert settle in (m.Settle(m.SETTLE), m.Settle(m.SETTLE_HELD))
    return mm.send(m.Settled(now))


# --- the transitions ---------------------------------------------------------------------------


def test_a_planned_move_dials_while_the_incumbent_serves_then_switches() -> None:
    mm = machine()
    assert mm.send(m.Wanted()) == []
    assert mm.phase is m.Phase.WAITING
    assert mm.send(due()) == [
        m.Gate(InputGate.OPEN),
        m.Begin(MoveReason.PLANNED, H1, HandleKind.AFTER_TURN),
        m.Dial(H1),
    ]
    assert mm.phase is m.Phase.DIALLING
    assert mm.send(m.SetupOk()) == [m.Settle(m.SETTLE)]
    assert mm.phase is m.Phase.SETTLING
    assert mm.send(m.Settled(3.0)) == [m.Switch(H1)]
    assert mm.phase is m.Phase.IDLE
    assert mm.move is None
    assert mm.probation_until == 3.0 + RetryPolicy().probation


def test_a_loss_resumes_from_the_latest_handle_with_input_held() -> None:
    mm = machine()
    assert mm.send(lost(5.0)) == [
        m.Gate(InputGate.HELD),
        m.Begin(MoveReason.LOST, H1, HandleKind.MID_TURN),
        m.Dial(H1),
    ]


def test_a_loss_with_no_handle_rebuilds_or_gives_up_without_history() -> None:
    assert machine().send(lost(5.0, None))[-1] == m.Dial(None)
    actions = machine().send(lost(5.0, None, can_rebuild=False))
    assert isinstance(actions[-1], m.GiveUp)
    assert "no resumption handle" in actions[-1].why


@pytest.mark.parametrize("phase", ["dialling", "settling"])
def test_a_turn_that_begins_on_the_incumbent_abandons_a_planned_move(phase: str) -> None:
    """No stall: the turn runs on the incumbent; the replacement's snapshot lacks it."""
    mm = machine()
    mm.send(m.Wanted())
    mm.send(due())
    if phase == "settling":
        mm.send(m.SetupOk())
    assert mm.send(m.TurnStarted()) == [m.Abandon()]
    assert (mm.phase, mm.move) == (m.Phase.WAITING, None)
    assert mm.send(m.SetupOk()) == [], "the abandoned dial's outcome means nothing"
    later = mm.send(due(1.0, handle="newer-handle-0123456789"))
    assert later[-1] == m.Dial("newer-handle-0123456789")


def test_a_turn_that_begins_during_a_forced_move_holds_input_once() -> None:
    mm = machine()
    mm.send(due(reason=MoveReason.DEADLINE, forced=True))
    assert mm.send(m.TurnStarted()) == [m.Gate(InputGate.HELD)]
    assert mm.send(m.TurnStarted()) == []
    assert machine().send(m.TurnStarted()) == [], "no move: nothing to hold"


def test_the_incumbent_lost_mid_move_holds_input_and_the_move_goes_on() -> None:
    mm = machine()
    mm.send(due())
    assert mm.send(lost(1.0)) == [m.Gate(InputGate.HELD)]
    assert mm.phase is m.Phase.DIALLING
    assert mm.send(m.TurnStarted()) == [], "a move with no incumbent is never abandoned"
    assert switch(mm, 2.0)[0] == m.Switch(H1)


def test_a_replacement_settles_briefly_only_while_input_waits_for_it() -> None:
    """A long settle is free while an incumbent takes input, and silence when none does."""
    planned = machine()
    planned.send(due())
    assert planned.send(m.SetupOk()) == [m.Settle(m.SETTLE)]
    dropped = machine()
    dropped.send(lost(1.0))
    assert dropped.send(m.SetupOk()) == [m.Settle(m.SETTLE_HELD)]
    gone_mid_move = machine()
    gone_mid_move.send(due())
    gone_mid_move.send(lost(1.0))
    assert gone_mid_move.send(m.SetupOk()) == [m.Settle(m.SETTLE_HELD)]
    assert m.SETTLE_HELD < m.SETTLE


@pytest.mark.parametrize("known", [True, False], ids=["endpoint-known", "refused-while-open"])
def test_a_move_that_closed_the_incumbent_itself_switches_right_after_the_setup(
    known: bool,
) -> None:
    """Break-before-make: nothing serves while the replacement would settle, and the refusal
    a settle waits for (a resume while the incumbent is open) cannot come once it is closed;
    a later refusal is caught on probation. So no settle: the switch follows the setup."""
    mm = machine()
    if known:
        mm.send(
            m.Due(0.0, MoveReason.PLANNED, H1, HandleKind.AFTER_TURN, True, True, break_first=True)
        )
    else:
        mm.send(due())
        assert mm.send(m.Failed(1.0, Stage.DIAL, closed(1011)))[-2:] == [m.Break(), m.Dial(H1)]
    assert mm.send(m.SetupOk()) == [m.Settle(0.0)]
    assert mm.send(m.Settled(2.0)) == [m.Switch(H1)]
    assert mm.probation_until == 2.0 + RetryPolicy().probation


def test_a_late_refusal_after_a_break_first_switch_is_a_failed_attempt_on_probation() -> None:
    """What the skipped settle would have caught: the connection closes right after the
    switch; the probation makes it a failed attempt of the move (a refused handle: the next
    attempt rebuilds)."""
    mm = machine()
    mm.send(m.Due(0.0, MoveReason.PLANNED, H1, HandleKind.AFTER_TURN, True, True, break_first=True))
    mm.send(m.SetupOk())
    mm.send(m.Settled(2.0))
    actions = mm.send(m.Lost(2.01, 1007, H1, HandleKind.AFTER_TURN, can_rebuild=True))
    assert mm.budget.spent == 1 and H1 in mm.refused
    assert m.Begin(MoveReason.LOST, None, HandleKind.NONE) in actions


def test_a_transient_failure_retries_the_same_handle_after_a_jittered_delay() -> None:
    mm = machine(random=lambda: 1.0)
    mm.send(due())
    actions = mm.send(m.Failed(1.0, Stage.DIAL, http(503)))
    assert isinstance(actions[0], m.Retried)
    assert actions[1] == m.Wait(0.5 * 1.5)
    assert mm.phase is m.Phase.BACKOFF
    assert mm.send(m.BackoffOver()) == [m.Dial(H1)]
    assert mm.budget.spent == 1


def test_a_takeover_rebuilds_once_the_attempts_with_its_handle_are_spent() -> None:
    mm = m.MoveMachine((0.0, 0.5, 1.0), RetryPolicy(random=lambda: 0.5), read_close)
    takeover = m.Due(
        0.0,
        MoveReason.TAKEOVER,
        H1,
        HandleKind.AFTER_TURN,
        incumbent=False,
        can_rebuild=True,
        forced=True,
        rebuild_when_spent=True,
    )
    assert mm.send(takeover)[-1] == m.Dial(H1)
    dials = []
    actions = mm.send(m.Failed(1.0, Stage.DIAL, http(503)))
    for _ in range(3):
        waits = [a.seconds for a in actions if isinstance(a, m.Wait)]
        if waits:
            actions = mm.send(m.BackoffOver())
        dials.append(actions[-1])
        if actions[-1] == m.Dial(None):
            break
        actions = mm.send(m.Failed(2.0, Stage.DIAL, http(503)))
    # Two more dials with the handle (three in all, one per delay), then a rebuild, not a
    # give-up.
    assert dials == [m.Dial(H1), m.Dial(H1), m.Dial(None)]
    assert actions[0] == m.Retried(
        "every attempt with the handle failed; last: the provider refused the connection (HTTP 503)"
    )
    assert H1 in mm.refused and mm.phase is m.Phase.DIALLING
    # A move without the flag gives up there.
    plain = m.MoveMachine((0.0, 0.5, 1.0), RetryPolicy(random=lambda: 0.5), read_close)
    plain.send(m.Due(0.0, MoveReason.LOST, H1, HandleKind.AFTER_TURN, False, True, True))
    for _ in range(2):
        plain.send(m.Failed(1.0, Stage.DIAL, http(503)))
        plain.send(m.BackoffOver())
    assert isinstance(plain.send(m.Failed(2.0, Stage.DIAL, http(503)))[-1], m.GiveUp)


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failures_are_fatal_at_once_and_cost_no_budget(status: int) -> None:
    mm = machine()
    mm.send(due())
    actions = mm.send(m.Failed(1.0, Stage.DIAL, http(status)))
    assert len(actions) == 1 and isinstance(actions[0], m.GiveUp)
    assert f"HTTP {status}" in actions[0].why and "API key" in actions[0].why
    assert mm.budget.spent == 0
    assert mm.phase is m.Phase.CLOSED


def test_a_refused_handle_rebuilds_and_is_never_tried_again() -> None:
    mm = machine()
    mm.send(due())
    mm.send(m.SetupOk())
    actions = mm.send(m.Failed(1.0, Stage.SETTLING, code=1008))
    assert actions[-1] == m.Dial(None)
    assert H1 in mm.refused
    assert mm.budget.spent == 0
    switch(mm, 2.0)
    assert H1 not in mm.refused, "a fresh session forgets the old session's refusals"


def test_a_refused_handle_without_history_loses_the_session() -> None:
    mm = machine()
    mm.send(due(can_rebuild=False))
    actions = mm.send(m.Failed(1.0, Stage.DIAL, closed(1007), can_rebuild=False))
    assert isinstance(actions[-1], m.GiveUp)


def test_a_changed_setup_refused_on_a_fresh_session_too_is_rolled_back() -> None:
    mm = machine()
    mm.send(due(reason=MoveReason.CONFIG))
    # Refused with the handle: the handle is the suspect first (a new instruction is refused
    # only on a resume by some models), so the move rebuilds with the new setup.
    first = mm.send(m.Failed(1.0, Stage.DIAL, closed(1007), setup_changed=True))
    assert first[-1] == m.Dial(None)
    # Refused on a fresh session too: the setup is invalid whatever the session.
    actions = mm.send(m.Failed(2.0, Stage.DIAL, closed(1007), setup_changed=True))
    assert isinstance(actions[0], m.RollBack)
    assert actions[-1] == m.Dial(H1), "back to the handle the move set out with"
    assert H1 not in mm.refused
    assert mm.budget.spent == 0
    assert switch(mm, 3.0) == [m.Switch(H1)]


def test_an_unchanged_setup_refused_on_a_fresh_session_is_no_rollback() -> None:
    mm = machine()
    mm.send(due(handle=None))
    actions = mm.send(m.Failed(1.0, Stage.DIAL, closed(1007), setup_changed=False))
    assert not [a for a in actions if isinstance(a, m.RollBack)]
    assert mm.budget.spent == 1


@pytest.mark.parametrize("stage", [Stage.DIAL, Stage.SETTLING])
def test_1011_with_the_incumbent_open_is_no_refused_handle(stage: Stage) -> None:
    """The live service refuses a resume while the old connection is open with a 1011 right
    after the setup frame (stage DIAL) or after setupComplete (SETTLING): the same handle is
    dialled again at once after the incumbent closes, and never counted against it."""
    mm = machine()
    mm.send(due())
    if stage is Stage.SETTLING:
        mm.send(m.SetupOk())
    actions = mm.send(m.Failed(1.0, stage, closed(1011)))
    assert actions[0] == m.RefusedWhileOpen()
    assert actions[2:] == [m.Break(), m.Dial(H1)]
    assert mm.break_first
    assert mm.strikes == {} and H1 not in mm.refused
    assert mm.budget.spent == 0
    mm.send(m.SetupOk())
    assert mm.send(m.Settled(2.0)) == [m.Switch(H1)], "resumed with the same handle"


def test_a_1011_without_an_incumbent_is_a_strike_against_the_handle() -> None:
    mm = machine()
    mm.send(lost(0.0))
    actions = mm.send(m.Failed(1.0, Stage.DIAL, closed(1011)))
    assert m.RefusedWhileOpen() not in actions
    assert mm.strikes == {H1: 1}


def test_an_endpoint_known_to_refuse_breaks_first_at_once() -> None:
    mm = machine()
    actions = mm.send(
        m.Due(0.0, MoveReason.PLANNED, H1, HandleKind.AFTER_TURN, True, True, break_first=True)
    )
    assert actions[-2:] == [m.Break(), m.Dial(H1)]
    assert m.RefusedWhileOpen() not in actions


def test_once_the_incumbent_is_broken_the_move_holds_input_and_never_yields() -> None:
    """After the Break the incumbent is gone: a turn that begins (on what the user says
    meanwhile) neither abandons the move nor gates input again, a loss of the old connection
    changes nothing, a 1011 is a strike against the handle, not a refusal while open, and the
    next attempt dials without breaking again."""
    mm = machine()
    mm.send(m.Due(0.0, MoveReason.PLANNED, H1, HandleKind.AFTER_TURN, True, True, break_first=True))
    assert mm.send(m.TurnStarted()) == []
    actions = mm.send(m.Failed(1.0, Stage.DIAL, closed(1011)))
    assert m.RefusedWhileOpen() not in actions
    assert mm.strikes == {H1: 1}
    assert mm.phase is m.Phase.BACKOFF
    assert mm.send(m.BackoffOver()) == [m.Dial(H1)], "broken once: no second Break"
    assert mm.send(lost(1.5)) == []


def test_1011_with_the_incumbent_open_switches_to_break_before_make_once() -> None:
    mm = machine()
    mm.send(due())
    mm.send(m.SetupOk())
    actions = mm.send(m.Failed(1.0, Stage.SETTLING, code=1011))
    assert actions[2:] == [m.Break(), m.Dial(H1)]
    assert mm.break_first
    assert mm.budget.spent == 0
    mm.send(m.SetupOk())
    retry = mm.send(m.Failed(2.0, Stage.SETTLING, code=1011))
    assert isinstance(retry[-1], m.Wait), "the first strike with the handle: a retry"
    mm.send(m.BackoffOver())
    mm.send(m.SetupOk())
    assert mm.send(m.Failed(3.0, Stage.SETTLING, code=1011))[-1] == m.Dial(None)


def test_a_connection_that_dies_on_probation_is_a_failed_attempt_of_its_move() -> None:
    mm = machine(random=lambda: 0.5)
    mm.send(due())
    switch(mm, 10.0)
    actions = mm.send(lost(10.2))
    assert actions[-1] == m.Wait(DELAYS[1]), "the next attempt waits the next delay"
    assert mm.budget.spent == 1
    assert mm.send(m.BackoffOver()) == [m.Dial(H1)]


@pytest.mark.parametrize(("after", "failed"), [(0.9, True), (1.1, False)])
def test_the_shipped_probation_is_one_second(after: float, failed: bool) -> None:
    """The README's figure (Limits: a connection that dies within ``RetryPolicy.probation``,
    1 s, of its switch is a failed attempt of its move), with the shipped policy."""
    mm = m.MoveMachine(DELAYS, RetryPolicy(random=lambda: 0.5), read_close)
    mm.send(due())
    switch(mm, 10.0)
    actions = mm.send(lost(10.0 + after))
    assert (mm.budget.spent == 1) is failed
    assert isinstance(actions[-1], m.Wait if failed else m.Dial)


def test_a_server_that_drops_every_connection_after_its_switch_spends_the_streak() -> None:
    mm = machine(random=lambda: 0.5)
    mm.send(due())
    now, dials = 0.0, 1
    for _ in range(10 * len(DELAYS)):  # bounded: a machine that never gives up fails below
        if mm.phase is m.Phase.CLOSED:
            break
        now += 0.1
        switch(mm, now)
        now += 0.1
        actions = mm.send(lost(now))
        while actions and isinstance(actions[-1], m.Wait):
            now += actions[-1].seconds
            actions = mm.send(m.BackoffOver())
        dials += sum(isinstance(a, m.Dial) for a in actions)
    assert dials == len(DELAYS)
    assert isinstance(actions[-1], m.GiveUp) and "every attempt failed" in actions[-1].why


def test_a_connection_that_answered_a_turn_is_off_probation_at_once() -> None:
    mm = machine()
    mm.send(due())
    switch(mm, 10.0)
    assert mm.send(m.Served()) == []
    assert mm.send(lost(10.2))[-1] == m.Dial(H1), "a real loss: no backoff, no charge"
    assert mm.budget.spent == 0


def test_a_loss_after_the_probation_starts_a_fresh_streak() -> None:
    mm = machine()
    mm.send(due())
    switch(mm, 10.0)
    mm.send(lost(10.2))
    mm.send(m.BackoffOver())
    switch(mm, 11.0)
    assert mm.send(lost(20.0))[-1] == m.Dial(H1)
    assert mm.budget.streak == 0


def test_the_budget_bounds_a_session_in_count() -> None:
    mm = machine(attempts=3)
    mm.send(due())
    mm.send(m.Failed(0.0, Stage.DIAL, http(503)))
    mm.send(m.BackoffOver())
    mm.send(m.Failed(1.0, Stage.DIAL, http(503)))
    mm.send(m.BackoffOver())
    actions = mm.send(m.Failed(2.0, Stage.DIAL, http(503)))
    assert isinstance(actions[-1], m.GiveUp) and "budget (3 failed attempts)" in actions[-1].why


def test_the_budget_bounds_a_session_in_time() -> None:
    mm = m.MoveMachine((0.0,) * 50, RetryPolicy(within=30.0), read_close)
    mm.send(due())
    now = 0.0
    actions: list[m.Action] = []
    while mm.phase is not m.Phase.CLOSED:
        actions = mm.send(m.Failed(now, Stage.DIAL, TimeoutError("slow")))
        if isinstance(actions[-1], m.Wait):
            mm.send(m.BackoffOver())
        now += 10.0
    assert now <= 50.0
    assert isinstance(actions[-1], m.GiveUp) and "30 s" in actions[-1].why


def test_dispose_closes_and_nothing_moves_after() -> None:
    mm = machine()
    mm.send(due())
    assert mm.send(m.Dispose()) == []
    assert (mm.phase, mm.move) == (m.Phase.CLOSED, None)
    for event in (m.Wanted(), due(), lost(1.0), m.TurnStarted(), m.SetupOk(), m.BackoffOver()):
        assert mm.send(event) == []


def test_a_forced_config_move_with_the_incumbent_gates_media_and_holds_a_turn() -> None:
    """A setup change forced by the deadline neither yields nor lets the incumbent begin an
    answer the switch would cut: audio only until a turn begins, then input is held for the
    replacement, which gets the turn replayed (no Abandon)."""
    mm = machine()
    mm.send(m.Wanted())
    assert mm.send(due(reason=MoveReason.CONFIG, forced=True)) == [
        m.Gate(InputGate.MEDIA_ONLY),
        m.Begin(MoveReason.CONFIG, H1, HandleKind.AFTER_TURN),
        m.Dial(H1),
    ]
    assert mm.send(m.TurnStarted()) == [m.Gate(InputGate.HELD)]
    assert mm.phase is m.Phase.DIALLING
    assert switch(mm, 1.0) == [m.Switch(H1)]


def test_a_handle_refused_on_probation_is_never_resumed_again() -> None:
    """A close 1008 right after the switch: a failed attempt of the move (backoff first), and
    the next dial rebuilds, reported as a rebuild, rather than resuming the refused handle."""
    mm = machine(random=lambda: 0.5)
    mm.send(due())
    switch(mm, 10.0)
    actions = mm.send(m.Lost(10.2, 1008, H1, HandleKind.AFTER_TURN, True))
    assert actions == [
        m.Gate(InputGate.HELD),
        m.Begin(MoveReason.LOST, None, HandleKind.NONE),
        m.Wait(DELAYS[1]),
    ]
    assert mm.refused == {H1}
    assert mm.probation_until is None
    assert mm.send(m.BackoffOver()) == [m.Dial(None)]


def test_a_transient_loss_on_probation_keeps_the_handle() -> None:
    mm = machine(random=lambda: 0.5)
    mm.send(due())
    switch(mm, 10.0)
    mm.send(m.Lost(10.2, 1006, H1, HandleKind.AFTER_TURN, True))
    assert mm.refused == set()
    assert mm.send(m.BackoffOver()) == [m.Dial(H1)]


def test_a_loss_exactly_at_the_end_of_probation_is_a_fresh_move() -> None:
    """The probation covers losses *before* its end (``probation_until``)."""
    mm = machine(probation=1.0)
    mm.send(due())
    switch(mm, 10.0)
    assert mm.probation_until == 11.0
    assert mm.send(lost(11.0))[-1] == m.Dial(H1)
    assert mm.budget.spent == 0


def test_the_incumbent_lost_mid_move_makes_a_1011_a_strike_not_a_refusal_while_open() -> None:
    """With the incumbent gone nothing of the session is open: a 1011 says nothing about
    break-before-make, and no Break closes a connection that is no more."""
    mm = machine(random=lambda: 0.5)
    mm.send(due())
    mm.send(lost(1.0))
    actions = mm.send(m.Failed(2.0, Stage.DIAL, closed(1011)))
    assert m.RefusedWhileOpen() not in actions and not mm.break_first
    assert mm.strikes == {H1: 1}
    assert actions[-1] == m.Wait(DELAYS[1])
    assert mm.send(m.BackoffOver()) == [m.Dial(H1)]


def test_only_1011_closes_are_strikes_against_the_handle() -> None:
    """A transient failure, then a first 1011 with the handle: a retry with the same handle,
    not the second strike that would rebuild."""
    mm = machine(random=lambda: 0.5)
    mm.send(lost(0.0))
    mm.send(m.Failed(1.0, Stage.DIAL, http(503)))
    assert mm.strikes == {}
    mm.send(m.BackoffOver())
    actions = mm.send(m.Failed(2.0, Stage.DIAL, closed(1011)))
    assert mm.strikes == {H1: 1}
    assert isinstance(actions[-1], m.Wait)
    assert mm.send(m.BackoffOver()) == [m.Dial(H1)]


def test_a_1011_on_a_rebuild_is_a_plain_retry() -> None:
    """No handle, so no strike and no talk of a refused handle."""
    mm = machine()
    mm.send(lost(0.0, None))
    actions = mm.send(m.Failed(1.0, Stage.DIAL, closed(1011)))
    assert mm.strikes == {}
    retried = actions[0]
    assert isinstance(retried, m.Retried)
    assert retried.why == "the connection closed during setup (code 1011)"


def test_a_move_after_a_lasting_connection_starts_a_fresh_streak() -> None:
    """A connection that outlived its probation ends the streak: the next move dials at once.
    A move due while the connection is still on probation goes on with the streak."""
    for now, first in ((20.0, m.Dial(H1)), (10.5, m.Wait(DELAYS[1]))):
        mm = machine(random=lambda: 0.5)
        mm.send(due())
        mm.send(m.Failed(1.0, Stage.DIAL, http(503)))
        mm.send(m.BackoffOver())
        switch(mm, 10.0)
        mm.send(m.Wanted())
        assert mm.send(due(now))[-1] == first, now
        assert mm.budget.streak == (0 if now == 20.0 else 1)


def test_every_retry_and_give_up_says_why() -> None:
    """The reasons reach the logs and the lost session's error: each names its cause."""
    # A transient failure, retried; the streak spent, the session lost.
    mm = m.MoveMachine((0.0, 0.5), RetryPolicy(random=lambda: 0.5), read_close)
    mm.send(due())
    retried = mm.send(m.Failed(1.0, Stage.DIAL, http(503)))[0]
    assert isinstance(retried, m.Retried) and "HTTP 503" in retried.why
    mm.send(m.BackoffOver())
    lost_ = mm.send(m.Failed(2.0, Stage.DIAL, http(503)))[-1]
    assert isinstance(lost_, m.GiveUp)
    assert lost_.why == "every attempt failed; last: the provider refused the connection (HTTP 503)"
    # A refused handle rebuilt; without history, lost.
    mm = machine()
    mm.send(due())
    retried = mm.send(m.Failed(1.0, Stage.DIAL, closed(1008)))[0]
    assert isinstance(retried, m.Retried) and "code 1008" in retried.why
    mm = machine()
    mm.send(due(can_rebuild=False))
    [lost_] = mm.send(m.Failed(1.0, Stage.DIAL, closed(1007), can_rebuild=False))
    assert isinstance(lost_, m.GiveUp)
    assert "code 1007" in lost_.why and "no history" in lost_.why
    # A refusal while the incumbent was open.
    mm = machine()
    mm.send(due())
    retried = mm.send(m.Failed(1.0, Stage.DIAL, closed(1011)))[1]
    assert isinstance(retried, m.Retried) and "code 1011" in retried.why
    # A setup refused on a fresh session too, rolled back.
    mm = machine()
    mm.send(due(reason=MoveReason.CONFIG, handle=None))
    rollback = mm.send(m.Failed(1.0, Stage.DIAL, closed(1007), setup_changed=True))[0]
    assert rollback == m.RollBack("a fresh session was refused it too (code 1007)")
    # The budget spent by a connection that died on probation.
    mm = machine(attempts=1)
    mm.send(due())
    switch(mm, 10.0)
    [lost_] = mm.send(lost(10.2))
    assert isinstance(lost_, m.GiveUp)
    assert "budget (1 failed attempts)" in lost_.why and "code 1006" in lost_.why


# --- random event sequences --------------------------------------------------------------------


class Moves(RuleBasedStateMachine):
    """Random events in any order; the machine's promises hold after each."""

    def __init__(self) -> None:
        super().__init__()
        self.mm = machine(attempts=8)
        self.now = 0.0
        self.dials_since_switch = 0
        self.closed = False

    def _send(self, event: m.Event) -> None:
        was_closed = self.mm.phase is m.Phase.CLOSED
        actions = self.mm.send(event)
        if was_closed:
            assert actions == []
        for action in actions:
            if isinstance(action, m.Dial):
                self.dials_since_switch += 1
            elif isinstance(action, m.Switch):
                self.dials_since_switch = 0
            elif isinstance(action, m.Wait):
                assert 0 <= action.seconds <= max(DELAYS) * 1.5
            elif isinstance(action, m.GiveUp):
                assert self.mm.phase is m.Phase.CLOSED
        if any(isinstance(a, (m.Dial, m.Break)) for a in actions):
            assert self.mm.phase is m.Phase.DIALLING

    @rule(dt=st.floats(0, 3))
    def tick(self, dt: float) -> None:
        self.now += dt

    @rule(incumbent=st.booleans(), handle=st.sampled_from([H1, "other-handle-xyz", None]))
    def due(self, incumbent: bool, handle: str | None) -> None:
        self._send(due(self.now, handle=handle, incumbent=incumbent))

    @rule()
    def wanted(self) -> None:
        self._send(m.Wanted())

    @rule()
    def setup_ok(self) -> None:
        self._send(m.SetupOk())

    @rule()
    def settled(self) -> None:
        self._send(m.Settled(self.now))

    @rule(
        code=st.sampled_from([None, 1000, 1006, 1007, 1008, 1011]),
        stage=st.sampled_from([Stage.DIAL, Stage.SETTLING]),
        status=st.sampled_from([None, 429, 503]),
    )
    def failed(self, code: int | None, stage: Stage, status: int | None) -> None:
        error = http(status) if status is not None else None
        self._send(m.Failed(self.now, stage, error, code))

    @rule()
    def backoff_over(self) -> None:
        self._send(m.BackoffOver())

    @rule(handle=st.sampled_from([H1, None]), can_rebuild=st.booleans())
    def lost(self, handle: str | None, can_rebuild: bool) -> None:
        self._send(lost(self.now, handle, can_rebuild=can_rebuild))

    @rule()
    def served(self) -> None:
        self._send(m.Served())

    @rule()
    def turn_started(self) -> None:
        self._send(m.TurnStarted())

    @invariant()
    def bounded(self) -> None:
        mm = self.mm
        assert mm.budget.spent <= mm.policy.attempts
        # Per streak: one dial per retry delay, plus a rebuild and a break-before-make each.
        assert self.dials_since_switch <= mm.policy.attempts + len(DELAYS) + 2 + 8
        assert (mm.move is None) == (mm.phase in (m.Phase.IDLE, m.Phase.WAITING, m.Phase.CLOSED))


TestMoves = Moves.TestCase
TestMoves.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
