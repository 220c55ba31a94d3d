"""The values of check-out (claims, docs/PROTOCOL.md §7.12): a claim as its holder sees it (:class:`ClaimInfo`), what
the daemon tells the holder (:class:`ClaimNotice`), subscribers (:class:`ClaimUpdate`) and ``claims``
(:class:`ClaimList`). Who acts (:class:`Party`) and a claim as everyone sees it (:class:`ClaimSummary`) are in
claim_summary.py, below the accessory model, which needs them; they are exported here too.

Each is a frozen dataclass decoded by ``from_json`` (``invalid-response`` for a field of the wrong JSON type); fields
a later accmond adds are kept in ``extra``, and ``to_json`` writes the protocol's object back, keys sorted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from .claim_summary import ClaimSummary, Party
from .json_fields import JSONObject as _Object
from .json_fields import integer_item as _integer_item
from .json_fields import with_extra
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
        return with_extra({
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
