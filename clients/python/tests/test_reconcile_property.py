"""A property test of the session's reconciliation (:mod:`accmon.reconcile`) against a model of the daemon.

The model: a true history of connects and disconnects, numbered 1, 2, 3, …; a session that starts from a snapshot
and receives the history live; and, at random points, the link breaks (the last events sent are lost in flight),
and the session comes back to either

- the daemon's kept session: the known view as of an acknowledgement (any point the session had reached, since an
  ack may be lost with the link), then the events after it, coalesced as the daemon coalesces them (a connection
  that began and ended inside the replay is removed), and the ``restored`` marker; some replayed events are ones
  the session had already handed; or
- a fresh snapshot, when the daemon no longer had the session.

Whatever the history and the breaks, what the app is handed must be each net change exactly once: applied in
order to the starting accessories, never a connect of a connection it has nor a disconnect of one it lacks, never
two events for one change, numbers that never go down, and at the end exactly the true set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Set, Tuple, Union

from hypothesis import given, settings
from hypothesis import strategies as st

from accmon.model import Accessory, AccessoryEvent
from accmon.reconcile import SessionView, daemon_view


@dataclass
class History:
    """The true history: every event with its number, and the connected set after each number."""

    events: List[AccessoryEvent] = field(default_factory=list)
    connected_after: List[Set[int]] = field(default_factory=lambda: [set()])
    next_connection: int = 1

    def add(self, connect: bool, pick: int) -> None:
        current = set(self.connected_after[-1])
        if connect or not current:
            key = self.next_connection
            self.next_connection += 1
            change = "connect"
            current.add(key)
        else:
            key = sorted(current)[pick % len(current)]
            change = "disconnect"
            current.remove(key)
        seq = len(self.events) + 1
        self.events.append(AccessoryEvent(change, Accessory(kind="usb", connection_id=key), seq))
        self.connected_after.append(current)

    @property
    def seq(self) -> int:
        return len(self.events)

    def accessories_at(self, seq: int) -> List[Accessory]:
        return [Accessory(kind="usb", connection_id=key) for key in sorted(self.connected_after[seq])]

    def coalesced_after(self, seq: int) -> List[AccessoryEvent]:
        """The events after `seq`, less each connection whose connect and disconnect are both among them."""
        later = self.events[seq:]
        connected_inside = {e.accessory.connection_id for e in later if e.change == "connect"}
        ended_inside = {e.accessory.connection_id for e in later if e.change == "disconnect"}
        brief = connected_inside & ended_inside
        return [e for e in later if e.accessory.connection_id not in brief]


@dataclass(frozen=True)
class Changes:
    """A step: plugs and unplugs (connect or not, which connection to unplug)."""

    changes: List[Tuple[bool, int]]


@dataclass(frozen=True)
class Break:
    """A step: the link breaks, with the last `lost` events in flight; the daemon comes back with the session it
    kept at the acknowledgement `ack_pick` names (when `restored`), or with a fresh snapshot."""

    lost: int
    ack_pick: int
    restored: bool


Step = Union[Changes, Break]
change_lists = st.lists(st.tuples(st.booleans(), st.integers(0, 50)), min_size=1, max_size=8)
steps = st.lists(
    st.one_of(st.builds(Changes, change_lists), st.builds(Break, st.integers(0, 4), st.integers(0, 1000), st.booleans())),
    min_size=1,
    max_size=25,
)


def simulate(
    initial: List[Tuple[bool, int]], plan: List[Step]
) -> Tuple[History, List[Accessory], List[AccessoryEvent], SessionView]:
    """Runs the model; returns the history, the start, what the app was handed, and the session's view."""
    history = History()
    for connect, pick in initial:
        history.add(connect, pick)
    start = history.accessories_at(history.seq)
    view = SessionView(start, history.seq)
    handed: List[AccessoryEvent] = []
    delivered = history.seq  # how far the live stream has reached the session
    # The points an acknowledgement kept by the daemon may name: the last one it kept, and each event handed since
    # (an ack may be lost with the link, or with the daemon's last 100 ms of state).
    reached: List[int] = [history.seq]
    for step in plan:
        if isinstance(step, Changes):
            for connect, pick in step.changes:
                history.add(connect, pick)
            continue
        # Live delivery up to the break, less the last `lost` events, which were in flight.
        for event in history.events[delivered : max(delivered, history.seq - step.lost)]:
            if view.offer(event):
                handed.append(event)
                reached.append(event.seq)
        delivered = history.seq
        acknowledged = reached[step.ack_pick % len(reached)]
        if step.restored:
            truth, as_of = daemon_view(
                history.accessories_at(acknowledged), acknowledged, history.coalesced_after(acknowledged), history.seq
            )
        else:
            truth = {a.connection_id: a for a in history.accessories_at(history.seq)}
            as_of = history.seq
        reconciled = view.reconcile(truth, as_of, step.restored)
        handed.extend(reconciled)
        reached = ([acknowledged] if step.restored else [as_of]) + ([as_of] if reconciled else [])
    for event in history.events[delivered:]:
        if view.offer(event):
            handed.append(event)
    return history, start, handed, view


@settings(max_examples=600, deadline=None, database=None)
@given(initial=st.lists(st.tuples(st.booleans(), st.integers(0, 50)), max_size=6), plan=steps)
def test_the_app_sees_each_net_change_exactly_once(initial: List[Tuple[bool, int]], plan: List[Step]) -> None:
    history, start, handed, view = simulate(initial, plan)
    known: Set[int] = {accessory.connection_id for accessory in start}
    changes: Set[Tuple[str, int]] = set()
    last_seq = 0
    for event in handed:
        key = event.accessory.connection_id
        if event.change == "connect":
            assert key not in known, f"connect of connection {key}, which the app has"
            known.add(key)
        else:
            assert key in known, f"disconnect of connection {key}, which the app does not have"
            known.remove(key)
        assert (event.change, key) not in changes, f"{event.change} of connection {key} handed twice"
        changes.add((event.change, key))
        assert event.seq >= last_seq, "sequence numbers went down"
        last_seq = event.seq
    truth = history.connected_after[history.seq]
    assert known == truth
    assert {a.connection_id for a in view.accessories} == truth


def test_a_replay_of_events_already_handed_hands_nothing_again() -> None:
    """The case the property covers, spelt out: the ack of seq 2 was lost, the daemon replays 3 and 4."""
    history = History()
    history.add(True, 0)  # 1: connect 1
    view = SessionView(history.accessories_at(1), 1)
    for connect in (True, True, False):  # 2: connect 2, 3: connect 3, 4: disconnect of the first (1)
        history.add(connect, 0)
    handed = [event for event in history.events[1:] if view.offer(event)]
    assert [(e.change, e.accessory.connection_id) for e in handed] == [("connect", 2), ("connect", 3), ("disconnect", 1)]
    truth, as_of = daemon_view(history.accessories_at(2), 2, history.coalesced_after(2), 4)
    assert view.reconcile(truth, as_of, restored=True) == []
    assert view.offer(history.events[3]) is False  # a replayed event the app has had
    assert view.last_handed == 4


def test_a_fresh_snapshot_after_the_session_was_lost_hands_the_difference() -> None:
    view = SessionView([Accessory(connection_id=1), Accessory(connection_id=2)], 10)
    events = view.reconcile({2: Accessory(connection_id=2), 5: Accessory(connection_id=5)}, 3, restored=False)
    assert [(e.change, e.accessory.connection_id, e.seq) for e in events] == [("disconnect", 1, 3), ("connect", 5, 3)]
    assert view.last_handed == 3  # a fresh subscription's numbering is taken as it comes
    assert view.offer(AccessoryEvent("connect", Accessory(connection_id=6), 4))

