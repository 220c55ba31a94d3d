"""What a :class:`~accmon.Session` has handed to the app, and how it reconciles that with the daemon's view after a
reconnection, so that the app sees each net change exactly once (docs/SESSIONS.md §6). Pure: no I/O.

The rules, as ``AccmonSession`` applies them:

- an event is handed unless it is a repeat: its ``seq`` is not above the last one handed, or it is a ``connect`` of
  a connection the app has, or a ``disconnect`` of one it does not have;
- after a reconnection, the app's view is compared with the daemon's (the restored session with its replayed
  events, or a fresh snapshot when the daemon no longer had the session), and only the difference is handed:
  ``disconnect``\\ s first, then ``connect``\\ s, in connection order, each numbered with the ``seq`` the daemon's view
  is current to.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Tuple

from .model import Accessory, AccessoryEvent

__all__ = ["SessionView", "daemon_view"]


class SessionView:
    """The accessories handed to the app so far, and the highest ``seq`` handed."""

    def __init__(self, accessories: Iterable[Accessory] = (), seq: int = 0) -> None:
        self._view: Dict[int, Accessory] = {}
        for accessory in accessories:
            self._view.setdefault(accessory.connection_id, accessory)
        #: The highest sequence number handed to the app.
        self.last_handed = seq

    @property
    def accessories(self) -> List[Accessory]:
        """The app's view: the accessories it was told are connected, in connection order."""
        return [self._view[key] for key in sorted(self._view)]

    def offer(self, event: AccessoryEvent) -> bool:
        """Applies `event` to the view and returns True, unless it is a repeat (then False, view unchanged)."""
        if event.seq <= self.last_handed:
            return False
        return self._apply(event)

    def _apply(self, event: AccessoryEvent) -> bool:
        key = event.accessory.connection_id
        if event.change == "connect":
            if key in self._view:
                return False
            self._view[key] = event.accessory
        else:
            if self._view.pop(key, None) is None:
                return False
        self.last_handed = max(self.last_handed, event.seq)
        return True

    def reconcile(self, truth: Dict[int, Accessory], as_of: int, restored: bool) -> List[AccessoryEvent]:
        """Makes the view equal to `truth`, the daemon's view current to `as_of`; returns the events to hand.

        :param restored: whether `truth` is the daemon's kept session (its numbering continues the one the app
            saw); otherwise it is a fresh subscription, whose numbering is taken as it comes.
        """
        gone = [self._view[key] for key in sorted(self._view) if key not in truth]
        new = [truth[key] for key in sorted(truth) if key not in self._view]
        events = [AccessoryEvent("disconnect", accessory, as_of) for accessory in gone]
        events += [AccessoryEvent("connect", accessory, as_of) for accessory in new]
        for event in events:
            self._apply(event)
        self.last_handed = max(self.last_handed, as_of) if restored else as_of
        return events


def daemon_view(
    known: Iterable[Accessory], acknowledged: int, replay: Iterable[AccessoryEvent], restored_seq: int
) -> Tuple[Dict[int, Accessory], int]:
    """The daemon's view of a restored session: the ``restore`` message's known accessories (current to
    `acknowledged`) with the replayed events applied, and the ``seq`` it is current to (at least the ``restored``
    marker's, `restored_seq`)."""
    truth: Dict[int, Accessory] = {}
    for accessory in known:
        truth.setdefault(accessory.connection_id, accessory)
    as_of = acknowledged
    for event in replay:
        if event.change == "connect":
            truth[event.accessory.connection_id] = event.accessory
        else:
            truth.pop(event.accessory.connection_id, None)
        as_of = event.seq
    return truth, max(as_of, restored_seq)
