"""The dashboard's state, folded from what ``accmon watch --json`` prints: hosts, connected accessories (rows), recent
events. Pure: no I/O; the clock is a parameter.

Fleet mode reads ``accmon watch --broker URL --json``: a ``fleet`` line (every host with its status and accessories),
then ``connect``, ``disconnect`` and ``status`` lines, and after the reader reconnected to the broker, the
difference. The reader reports an accessory whose retained object changed (a claim taken or released) as a
``disconnect`` of the old object and a ``connect`` of the new, with the same connection id; connection ids are never
reused on a host, so within a batch of lines the model takes such a pair as the change it is, not as an unplug.

Local mode reads ``accmon watch --json`` of one accmond: a ``snapshot`` line, then ``connect`` and ``disconnect``
lines; and, where ``accmon history --json`` exists, the host's recent history.

An ``unconfirmed`` line (the reader read the host again and did not find the accessory, while the host's count says
it holds more: a cluster node that does not serve its topics) marks the row, which stays until a ``disconnect``; a
``confirmed`` line clears the mark.

Hosts are kept once seen: a host whose status disappears from the broker (deleted, or the broker restarted without
persistence and its bridge is dead) is shown offline rather than forgotten. A host the reader says is ``stale`` (its
online status is a lease that ran out unrenewed: its bridge, or the broker between, is gone without a will) is shown
stale, never online.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from .records import Delta, RowKey, accessory_row, claim_of, party_of, seconds, summary_of, text, whole

__all__ = ["Model"]

#: Live events counted per host and kind; history entries are shown, not counted.
EVENT_KINDS = ("connect", "disconnect", "online", "offline", "stale", "claim", "release", "rejected", "contention",
               "break")  # fmt: skip
#: Why a stale host is not shown online.
STALE_REASON = "its lease ran out: no word from its bridge"

#: At most this many (host, vendor, product) series are kept for the per-product metric.
MAX_PRODUCT_SERIES = 10000


class Model:
    """The state of one dashboard; see the module's documentation."""

    def __init__(self, mode: str, max_events: int = 200, clock: Callable[[], float] = time.time) -> None:
        self.mode = mode
        self.max_events = max_events
        self.clock = clock
        self.hosts: Dict[str, Dict[str, Any]] = {}
        self.rows: Dict[RowKey, Dict[str, Any]] = {}
        self.events: List[Dict[str, Any]] = []
        #: Live events seen per (host, kind), for the counters of /metrics.
        self.event_counts: Counter[Tuple[str, str]] = Counter()
        #: (host, vendor, product) seen since start: their metric series stay, at 0, once the accessory is gone.
        self.products: Set[Tuple[str, str, str]] = set()
        #: Lines of the reader that were not understood (not JSON objects, unknown types, no accessory object).
        self.ignored_lines = 0
        self.synced = False
        self.source: Dict[str, Any] = {"state": "starting", "message": "", "since": clock()}
        self._next_event = 1

    # --- what the page gets first ----------------------------------------------------------------------------------

    def snapshot(self) -> Dict[str, Any]:
        return {
            "mode": self.mode,
            "source": self.source,
            "hosts": [self.hosts[name] for name in sorted(self.hosts)],
            "rows": [self.rows[key] for key in sorted(self.rows)],
            "events": self.events,
        }

    # --- the reader ------------------------------------------------------------------------------------------------

    def set_source(self, state: str, message: str = "") -> Delta:
        """The reader's state: ``starting``, ``connected``, ``reconnecting`` or ``down``, with its last message."""
        if self.source["state"] == state and self.source["message"] == message:
            return Delta()
        since = self.source["since"] if self.source["state"] == state else self.clock()
        self.source = {"state": state, "message": message[:1024], "since": since}
        return Delta(source=self.source)

    # --- fleet mode ------------------------------------------------------------------------------------------------

    def apply_fleet(self, lines: List[Any]) -> Delta:
        """Applies a batch of the fleet reader's lines (decoded JSON), in order."""
        batch = _Batch(self)
        for line in lines:
            kind = line.get("type") if isinstance(line, dict) else None
            if kind == "fleet" and isinstance(line.get("hosts"), list):
                self._fleet_state(batch, line["hosts"])
            elif kind in ("connect", "disconnect") and isinstance(line.get("host"), str):
                row = accessory_row(text(line["host"]), line.get("accessory"))
                if row is None:
                    self.ignored_lines += 1
                elif kind == "connect":
                    batch.connect(row)
                else:
                    batch.disconnect((row["host"], row["connectionID"]))
            elif kind == "status" and isinstance(line.get("host"), str):
                self._status(batch, text(line["host"]), line.get("status"), shown=line.get("state"))
            elif kind in ("unconfirmed", "confirmed") and isinstance(line.get("host"), str):
                row = accessory_row(text(line["host"]), line.get("accessory"))
                if row is None:
                    self.ignored_lines += 1
                else:
                    batch.unconfirmed((row["host"], row["connectionID"]), kind == "unconfirmed")
            else:
                self.ignored_lines += 1
        return batch.finish()

    def _fleet_state(self, batch: "_Batch", hosts: List[Any]) -> None:
        seen: Set[str] = set()
        rows: Dict[RowKey, Dict[str, Any]] = {}
        for entry in hosts:
            if not isinstance(entry, dict) or not isinstance(entry.get("host"), str):
                self.ignored_lines += 1
                continue
            name = text(entry["host"])
            seen.add(name)
            self._status(batch, name, entry.get("status"), shown=entry.get("state"))
            for accessory in entry.get("accessories") or []:
                row = accessory_row(name, accessory)
                if row is not None:
                    rows[(name, row["connectionID"])] = row
        for name in self.hosts:
            if name not in seen:
                self._status(batch, name, None, reason="not on the broker")
        for key in list(self.rows):
            if key not in rows:
                batch.disconnect(key)
        for row in rows.values():
            batch.connect(row)
        self.synced = True

    def _status(self, batch: "_Batch", name: str, status: Any, reason: str = "no status on the broker",
                shown: Any = None) -> None:  # fmt: skip
        """A host's status; ``shown``: the state the reader shows (``stale`` for an online status whose lease ran
        out)."""
        now = self.clock()
        if isinstance(status, dict) and status.get("state") in ("online", "offline"):
            state = "stale" if shown == "stale" and status["state"] == "online" else status["state"]
            host: Dict[str, Any] = {"name": name, "state": state, "reason": text(status.get("reason")) or None}
            if state == "stale":
                host["reason"] = STALE_REASON
            for key in ("machineID", "runID", "bridge"):
                host[key] = text(status.get(key))
            # An online status carries when its bridge's run started; an offline one only that run's start, so the
            # time it went offline (or stale) is when it was seen.
            host["since"] = seconds(status.get("since")) if state == "online" else None
        else:
            host = {"name": name, "state": "offline", "reason": reason, "since": None}
        previous = self.hosts.get(name)
        if host["state"] != "online":
            if previous is not None and previous["state"] == host["state"]:
                host["since"] = previous["since"]
            else:
                host["since"] = now if self.synced else None
        if previous == host:
            return
        self.hosts[name] = host
        batch.delta.hosts[name] = host
        changed = previous["state"] != host["state"] if previous is not None else host["state"] == "online"
        if self.synced and changed:
            batch.event(name, host["state"], reason=host["reason"])

    # --- local mode ------------------------------------------------------------------------------------------------

    def apply_local(self, host: str, lines: List[Any], online_since: Optional[float] = None) -> Delta:
        """Applies a batch of ``accmon watch --json`` lines of the local host."""
        batch = _Batch(self)
        for line in lines:
            kind = line.get("type") if isinstance(line, dict) else None
            if kind == "snapshot" and isinstance(line.get("accessories"), list):
                self._local_online(batch, host, online_since)
                rows = [accessory_row(host, accessory) for accessory in line["accessories"]]
                current = {(host, row["connectionID"]): row for row in rows if row is not None}
                for key in [key for key in self.rows if key[0] == host and key not in current]:
                    batch.disconnect(key)
                for row in current.values():
                    batch.connect(row)
                self.synced = True
            elif kind in ("connect", "disconnect"):
                event_row = accessory_row(host, line.get("accessory"))
                if event_row is None:
                    self.ignored_lines += 1
                    continue
                batch.event_seq[(host, event_row["connectionID"])] = whole(line.get("seq"))
                if kind == "connect":
                    batch.connect(event_row)
                else:
                    batch.disconnect((host, event_row["connectionID"]))
            elif kind == "claim-update":
                self._local_claim(batch, host, line)
            else:
                self.ignored_lines += 1
        return batch.finish()

    def _local_claim(self, batch: "_Batch", host: str, line: Dict[str, Any]) -> None:
        """A ``claim-update`` line: the connection's row with its claim now (none: released)."""
        connection = whole(line.get("connectionID"))
        row = self.rows.get((host, connection)) if connection is not None else None
        if row is None:
            self.ignored_lines += 1
            return
        updated = {key: value for key, value in row.items() if key != "claim"}
        claim = claim_of(line.get("claim"))
        if claim is not None:
            updated["claim"] = claim
        batch.connect(updated)

    def _local_online(self, batch: "_Batch", name: str, since: Optional[float]) -> None:
        previous = self.hosts.get(name)
        if previous is not None and previous["state"] == "online":
            return
        host = {"name": name, "state": "online", "reason": None, "since": since if since is not None else self.clock()}
        self.hosts[name] = host
        batch.delta.hosts[name] = host
        if self.synced:
            batch.event(name, "online")

    def local_offline(self, name: str, reason: str) -> Delta:
        """The local accmond cannot be reached (`reason`); its accessories stay as last seen."""
        batch = _Batch(self)
        previous = self.hosts.get(name)
        if previous is None or previous["state"] != "offline" or previous["reason"] != reason[:1024]:
            since = previous["since"] if previous is not None and previous["state"] == "offline" else self.clock()
            host = {"name": name, "state": "offline", "reason": reason[:1024], "since": since}
            self.hosts[name] = host
            batch.delta.hosts[name] = host
            if previous is not None and previous["state"] == "online":
                batch.event(name, "offline", reason=reason)
        return batch.finish()

    def apply_history(self, name: str, entries: List[Any]) -> Delta:
        """Merges ``accmon history --json`` entries of host `name` into the recent events, oldest first; an entry of
        an event already shown (same ``eventSeq``) is not added twice. History is shown, not counted."""
        shown = {(e["host"], e["eventSeq"]) for e in self.events if e.get("eventSeq") is not None}
        added = False
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("kind"), str):
                self.ignored_lines += 1
                continue
            event_seq = whole(entry.get("eventSeq"))
            if event_seq is not None and (name, event_seq) in shown:
                continue
            event = self._new_event(name, text(entry["kind"]), seconds(entry.get("time")) or self.clock())
            row = accessory_row(name, entry.get("accessory"))
            if row is not None:
                event["accessory"] = summary_of(row)
            for key in ("actor", "holder"):
                party = party_of(entry.get(key))
                if party is not None:
                    event[key] = party
            if isinstance(entry.get("reason"), str):
                event["reason"] = text(entry["reason"])
            if event_seq is not None:
                event["eventSeq"] = event_seq
            event["history"] = True
            self.events.append(event)
            added = True
        if not added:
            return Delta()
        self.events.sort(key=lambda e: (e["time"], e["id"]))
        del self.events[: -self.max_events]
        return Delta(events_reset=list(self.events))

    # --- events ----------------------------------------------------------------------------------------------------

    def _new_event(self, host: str, kind: str, when: float) -> Dict[str, Any]:
        event: Dict[str, Any] = {"id": self._next_event, "time": when, "host": host, "kind": kind}
        self._next_event += 1
        return event

    def record(self, host: str, kind: str, **details: Any) -> Dict[str, Any]:
        """Adds a live event (counted for /metrics) and returns it."""
        event = self._new_event(host, kind, self.clock())
        event.update({key: value for key, value in details.items() if value is not None})
        self.events.append(event)
        del self.events[: -self.max_events]
        self.event_counts[(host, kind)] += 1
        return event


class _Batch:
    """One batch of lines applied: a disconnect takes effect at the end of the batch unless a connect of the same
    connection follows (then it is the same accessory, changed)."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.delta = Delta()
        self.gone: Dict[RowKey, Dict[str, Any]] = {}
        #: The accmond event sequence number of a connection's line in this batch (local mode).
        self.event_seq: Dict[RowKey, Optional[int]] = {}

    def event(self, host: str, kind: str, **details: Any) -> None:
        self.delta.events.append(self.model.record(host, kind, **details))

    def connect(self, row: Dict[str, Any]) -> None:
        key: RowKey = (row["host"], row["connectionID"])
        model = self.model
        before = self.gone.pop(key, None) or model.rows.get(key)
        if before == row:
            if key not in model.rows:
                model.rows[key] = row
                self.delta.rows[key] = row
            return
        model.rows[key] = row
        self.delta.rows[key] = row
        if row["host"] not in model.hosts:
            # An accessory topic of a host that has published no status (yet): the host is shown, offline.
            model._status(self, row["host"], None)
        if len(model.products) < MAX_PRODUCT_SERIES:
            model.products.add((row["host"], row["vendorID"], row["productID"]))
        if before is None:
            if model.synced:
                self.event(row["host"], "connect", accessory=summary_of(row), eventSeq=self.event_seq.get(key))
            return
        old_claim, new_claim = before.get("claim"), row.get("claim")
        if old_claim != new_claim and model.synced:
            if new_claim is not None and (old_claim is None or old_claim.get("claimID") != new_claim.get("claimID")):
                self.event(row["host"], "claim", accessory=summary_of(row), holder=new_claim.get("holder"),
                           reason=new_claim.get("reason"))  # fmt: skip
            elif new_claim is None and old_claim is not None:
                self.event(row["host"], "release", accessory=summary_of(row), holder=old_claim.get("holder"))

    def unconfirmed(self, key: RowKey, flag: bool) -> None:
        """The reader could not read the row's accessory back (``unconfirmed``), or did again: the row stays, marked,
        until a disconnect (docs/MQTT.md section 5: never a disconnection the reader did not see)."""
        row = self.model.rows.get(key)
        if row is None or bool(row.get("unconfirmed")) == flag:
            return
        row = dict(row)
        if flag:
            row["unconfirmed"] = True
        else:
            row.pop("unconfirmed", None)
        self.model.rows[key] = row
        self.delta.rows[key] = row

    def disconnect(self, key: RowKey) -> None:
        row = self.model.rows.pop(key, None)
        if row is not None:
            self.gone.setdefault(key, row)
            self.delta.rows[key] = None
        elif key not in self.gone:
            self.model.ignored_lines += 1

    def finish(self) -> Delta:
        for key, row in self.gone.items():
            if self.model.synced:
                self.event(key[0], "disconnect", accessory=summary_of(row), eventSeq=self.event_seq.get(key))
        return self.delta
