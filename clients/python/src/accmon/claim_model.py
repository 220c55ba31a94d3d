"""The values of check-out (claims, docs/PROTOCOL.md §7.12): who acts (:class:`Party`), a claim as everyone sees it
(:class:`ClaimSummary`), as its holder sees it (:class:`ClaimInfo`), what the daemon tells the holder
(:class:`ClaimNotice`), subscribers (:class:`ClaimUpdate`) and ``claims`` (:class:`ClaimList`).

Each is a frozen dataclass decoded by ``from_json`` (``invalid-response`` for a field of the wrong JSON type); fields
a later accmond adds are kept in ``extra``, and ``to_json`` writes the protocol's object back, keys sorted.
"""

from __future__ import annotations

import functools
import pwd
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .json_fields import JSONObject as _Object
from .json_fields import integer_item as _integer_item
from .json_fields import string_item as _string_item
from .model import Accessory

__all__ = [
    "ENDING_NOTICES",
    "NOTICE_KINDS",
    "ClaimInfo",
    "ClaimList",
    "ClaimNotice",
    "ClaimSummary",
    "ClaimUpdate",
    "ClaimWaiter",
    "ClaimedNode",
    "NodeOpener",
    "Party",
]

#: The kinds of ``claim-notice`` of protocol version 1.
NOTICE_KINDS = ("granted", "contention", "broken", "returning", "returned", "lost", "expired", "cancelled")
#: The notices after which the claim (or the place in line) no longer exists.
ENDING_NOTICES = frozenset({"broken", "lost", "expired", "cancelled"})

@functools.lru_cache(maxsize=256)
def _local_user_name(uid: int) -> Optional[str]:
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return None


def _with_extra(value: Dict[str, Any], extra: Mapping[str, Any]) -> Dict[str, Any]:
    return dict(sorted({**extra, **value}.items()))


@dataclass(frozen=True)
class Party:
    """Someone who acts on an accessory: a claim's holder, a claimer in line, an admin who broke a claim.

    A local party is a client of accmond, known by its socket's credentials (:attr:`uid`, :attr:`pid`) and the name
    it gave (:attr:`client`); :attr:`user` is the uid's name as accmond resolved it. A remote party is an MQTT user
    whose claim a bridge forwarded (:attr:`remote`), with no uid or pid.
    """

    user: str = ""
    """The user name: the local uid's name, or the remote MQTT user; empty when unknown."""
    uid: Optional[int] = None
    pid: Optional[int] = None
    client: Optional[str] = None
    """The client name given in ``hello``."""
    remote: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    _KEYS = ("user", "uid", "pid", "client", "remote")

    @classmethod
    def from_json(cls, value: Any, context: str = "party") -> "Party":
        fields = _Object(value, context, cls._KEYS)
        return cls(fields.string("user"), fields.optional_integer("uid"), fields.optional_integer("pid"),
                   fields.optional_string("client"), fields.boolean("remote"), fields.extra)  # fmt: skip

    def to_json(self) -> Dict[str, Any]:
        value: Dict[str, Any] = {"remote": self.remote, "user": self.user}
        for key in ("uid", "pid", "client"):
            if getattr(self, key) is not None:
                value[key] = getattr(self, key)
        return _with_extra(value, self.extra)

    @property
    def name(self) -> str:
        """The user name: accmond's, else this host's name for the uid (accmond resolves names off its loop, so the
        first reply about a uid may lack it), else ``uid N``."""
        if self.user or self.remote:
            return self.user or "?"
        if self.uid is None:
            return "?"
        return _local_user_name(self.uid) or f"uid {self.uid}"

    def __str__(self) -> str:
        """``alice (uid 1000, pid 4242, accmon)``, ``uid 1000`` when the name is unknown, ``ci (remote)``."""
        if self.remote:
            return f"{self.user or '?'} (remote)"
        details = []
        if self.uid is not None and not self.name.startswith("uid "):
            details.append(f"uid {self.uid}")
        if self.pid:
            details.append(f"pid {self.pid}")
        if self.client:
            details.append(self.client)
        return f"{self.name} ({', '.join(details)})" if details else self.name


@dataclass(frozen=True)
class ClaimSummary:
    """A claim as everyone who sees its accessories sees it: the ``claim`` of an accessory, an entry of ``claims``,
    a holder named by :class:`~accmon.ClaimConflict`."""

    claim_id: str
    """Such as ``c-3``."""
    holder: Party
    since: float
    """When it was granted (seconds since the epoch)."""
    reason: str = ""
    waiting: int = 0
    """Claim requests waiting in line for any of its accessories."""
    state: str = "held"
    """``"held"``, or ``"returning"`` while a claimed accessory is away (a reset, a bootloader)."""
    connections: Tuple[int, ...] = ()
    accessory_ids: Tuple[str, ...] = ()
    """Its accessories, also those away and expected back."""
    expires_at: Optional[float] = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    _KEYS = ("claimID", "holder", "since", "reason", "waiting", "state", "connections", "accessoryIDs", "expiresAt")

    @classmethod
    def from_json(cls, value: Any, context: str = "claim") -> "ClaimSummary":
        fields = _Object(value, context, cls._KEYS)
        return cls(
            claim_id=fields.string("claimID"),
            holder=Party.from_json(fields.value.get("holder"), f"{context}.holder"),
            since=fields.number("since"),
            reason=fields.string("reason"),
            waiting=fields.integer("waiting"),
            state=fields.string("state", "held"),
            connections=fields.items("connections", _integer_item),
            accessory_ids=fields.items("accessoryIDs", _string_item),
            expires_at=fields.optional_number("expiresAt"),
            extra=fields.extra,
        )

    def to_json(self) -> Dict[str, Any]:
        value: Dict[str, Any] = {
            "accessoryIDs": list(self.accessory_ids), "claimID": self.claim_id, "connections": list(self.connections),
            "holder": self.holder.to_json(), "reason": self.reason, "since": self.since, "state": self.state,
            "waiting": self.waiting,
        }  # fmt: skip
        if self.expires_at is not None:
            value["expiresAt"] = self.expires_at
        return _with_extra(value, self.extra)


@dataclass(frozen=True)
class ClaimedNode:
    """A device node of a claimed accessory, as the claim left it."""

    path: str
    enforced: bool
    """Whether only the holder and root may open it now."""
    note: Optional[str] = None
    """Why it is not enforced (a symbolic link, outside ``--simulated-nodes``, …)."""

    @classmethod
    def from_json(cls, value: Any, context: str = "node") -> "ClaimedNode":
        fields = _Object(value, context, ("path", "enforced", "note"))
        return cls(fields.string("path"), fields.boolean("enforced"), fields.optional_string("note"))


@dataclass(frozen=True)
class NodeOpener:
    """A process that had a device node open when the claim began: it keeps its descriptor."""

    path: str
    pid: int
    uid: int
    user: Optional[str]
    command: str

    @classmethod
    def from_json(cls, value: Any, context: str = "opener") -> "NodeOpener":
        fields = _Object(value, context, ("path", "pid", "uid", "user", "command"))
        return cls(fields.string("path"), fields.integer("pid"), fields.integer("uid"), fields.optional_string("user"),
                   fields.string("command"))  # fmt: skip


@dataclass(frozen=True)
class ClaimInfo:
    """A claim as its holder (or the claimer waiting in line) sees it: the reply to ``claim``, and the ``claim`` of a
    ``granted`` or ``returned`` notice."""

    claim_id: str
    token: str
    """The secret that takes the claim up again from another connection (after a restart of accmond)."""
    state: str
    """``"held"``, ``"waiting"`` (in line) or ``"returning"`` (a claimed accessory is away)."""
    holder: Party
    accessories: Tuple[Accessory, ...] = ()
    """What it holds; while waiting, what it waits for (by connection), or nothing (by filter)."""
    nodes: Tuple[ClaimedNode, ...] = ()
    openers: Tuple[NodeOpener, ...] = ()
    since: float = 0.0
    reason: str = ""
    expires_at: Optional[float] = None
    position: Optional[int] = None
    """While waiting: its place in line, 1 next."""
    blockers: Tuple[ClaimSummary, ...] = ()
    """While waiting: the claims that hold what it asked for."""
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    _KEYS = ("claimID", "token", "state", "holder", "accessories", "nodes", "openers", "since", "reason", "expiresAt",
             "position", "blockers")  # fmt: skip

    @classmethod
    def from_json(cls, value: Any, context: str = "claim") -> "ClaimInfo":
        fields = _Object(value, context, cls._KEYS)
        return cls(
            claim_id=fields.string("claimID"),
            token=fields.string("token"),
            state=fields.string("state", "held"),
            holder=Party.from_json(fields.value.get("holder"), f"{context}.holder"),
            accessories=fields.items("accessories", Accessory.from_json),
            nodes=fields.items("nodes", ClaimedNode.from_json),
            openers=fields.items("openers", NodeOpener.from_json),
            since=fields.number("since"),
            reason=fields.string("reason"),
            expires_at=fields.optional_number("expiresAt"),
            position=fields.optional_integer("position"),
            blockers=fields.items("blockers", ClaimSummary.from_json),
            extra=fields.extra,
        )

    @property
    def device_nodes(self) -> Tuple[str, ...]:
        """Every device node of the accessories held, in order."""
        return tuple(node for accessory in self.accessories for node in accessory.device_nodes)

    @property
    def device_node(self) -> Optional[str]:
        """The first device node of the first accessory (for a serial port, its tty), or ``None``."""
        return self.accessories[0].device_node if self.accessories else None

    @property
    def enforced(self) -> bool:
        """Whether the claim is enforced on every device node (``False`` when it has none)."""
        return bool(self.nodes) and all(node.enforced for node in self.nodes)


@dataclass(frozen=True)
class ClaimNotice:
    """What accmond tells a claim's holder, or a claimer in line (``claim-notice``).

    :attr:`kind` is one of :data:`NOTICE_KINDS`: ``granted`` (a waiting claim now holds), ``contention`` (someone
    asked for what it holds: :attr:`by`, :attr:`reason`), ``broken`` (an admin broke it: :attr:`by`, :attr:`reason`),
    ``returning`` (a claimed accessory went away: :attr:`accessory`), ``returned`` (it came back as a new
    connection: :attr:`claim`), ``lost`` (it did not come back in time), ``expired`` (maximum duration reached),
    ``cancelled`` (a waiting claim can never be served). After ``broken``, ``lost``, ``expired`` and ``cancelled``
    the claim no longer exists (:attr:`ends_claim`).
    """

    claim_id: str
    kind: str
    time: float
    by: Optional[Party] = None
    reason: Optional[str] = None
    claim: Optional[ClaimInfo] = None
    accessory: Optional[Accessory] = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    _KEYS = ("type", "claimID", "kind", "time", "by", "reason", "claim", "accessory")

    @classmethod
    def from_message(cls, message: Dict[str, Any]) -> "ClaimNotice":
        fields = _Object(message, "claim-notice", cls._KEYS)
        return cls(
            claim_id=fields.string("claimID"),
            kind=fields.string("kind"),
            time=fields.number("time"),
            by=fields.optional("by", Party.from_json),
            reason=fields.optional_string("reason"),
            claim=fields.optional("claim", ClaimInfo.from_json),
            accessory=fields.optional("accessory", Accessory.from_json),
            extra=fields.extra,
        )

    @property
    def ends_claim(self) -> bool:
        """Whether the claim (or its place in line) ended with this notice."""
        return self.kind in ENDING_NOTICES


@dataclass(frozen=True)
class ClaimUpdate:
    """A change of a connection's claim, for a subscription with ``claims=True`` (``claim-update``)."""

    connection_id: int
    accessory_id: str
    claim: Optional[ClaimSummary]
    """The claim now; ``None`` when the accessory was released."""

    @classmethod
    def from_message(cls, message: Dict[str, Any]) -> "ClaimUpdate":
        fields = _Object(message, "claim-update", ("type", "connectionID", "accessoryID", "claim"))
        return cls(fields.integer("connectionID"), fields.string("accessoryID"),
                   fields.optional("claim", ClaimSummary.from_json))  # fmt: skip

    def to_json(self) -> Dict[str, Any]:
        value: Dict[str, Any] = {"accessoryID": self.accessory_id}
        if self.claim is not None:
            value["claim"] = self.claim.to_json()
        value.update(connectionID=self.connection_id, type="claim-update")
        return value


@dataclass(frozen=True)
class ClaimWaiter:
    """A claim request waiting in line, as ``claims`` lists it."""

    claim_id: str
    party: Party
    since: float
    reason: str = ""
    connections: Tuple[int, ...] = ()
    """The connections it waits for; empty for a claim by filter."""
    count: int = 1
    """For a claim by filter: how many matching accessories it wants."""
    position: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    _KEYS = ("claimID", "party", "since", "reason", "connections", "count", "position")

    @classmethod
    def from_json(cls, value: Any, context: str = "waiter") -> "ClaimWaiter":
        fields = _Object(value, context, cls._KEYS)
        return cls(fields.string("claimID"), Party.from_json(fields.value.get("party"), f"{context}.party"),
                   fields.number("since"), fields.string("reason"), fields.items("connections", _integer_item),
                   fields.integer("count", 1), fields.integer("position"), fields.extra)  # fmt: skip

    def to_json(self) -> Dict[str, Any]:
        return _with_extra({
            "claimID": self.claim_id, "connections": list(self.connections), "count": self.count,
            "party": self.party.to_json(), "position": self.position, "reason": self.reason, "since": self.since,
        }, self.extra)  # fmt: skip


@dataclass(frozen=True)
class ClaimList:
    """The reply to ``claims``: the claims and the waiters on accessories this client sees, and its own."""

    claims: Tuple[ClaimSummary, ...] = ()
    waiters: Tuple[ClaimWaiter, ...] = ()

    @classmethod
    def from_message(cls, message: Dict[str, Any]) -> "ClaimList":
        fields = _Object(message, "claims", ("type", "id", "claims", "waiters"))
        return cls(fields.items("claims", ClaimSummary.from_json), fields.items("waiters", ClaimWaiter.from_json))

    def on(self, connection_id: int) -> Optional[ClaimSummary]:
        """The claim that holds this connection, or ``None``."""
        return next((claim for claim in self.claims if connection_id in claim.connections), None)


def summaries(value: Any, context: str) -> List[ClaimSummary]:
    """The ``holders`` of a ``claim-conflict`` error: an array of claim summaries."""
    if type(value) is not list:
        return []
    return [ClaimSummary.from_json(item, f"{context}[{index}]") for index, item in enumerate(value)]
