"""Who acts on an accessory (:class:`Party`) and a claim as everyone who sees its accessories sees it
(:class:`ClaimSummary`): the claim values that the accessory model (a snapshot's claims) and the errors (the holders
a conflict names) need, apart from the holder's own view of a claim (claim_model.py).

Decoded by ``from_json`` (``invalid-response`` for a field of the wrong JSON type); fields a later accmond adds are
kept in ``extra``, and ``to_json`` writes the protocol's object back, keys sorted.
"""

from __future__ import annotations

import functools
import pwd
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .json_fields import JSONObject as _Object
from .json_fields import integer_item as _integer_item
from .json_fields import string_item as _string_item
from .json_fields import with_extra

__all__ = ["ClaimSummary", "Party", "summaries"]


@functools.lru_cache(maxsize=256)
def _local_user_name(uid: int) -> Optional[str]:
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return None


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
        return with_extra(value, self.extra)

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
        return with_extra(value, self.extra)


def summaries(value: Any, context: str) -> List[ClaimSummary]:
    """The ``holders`` of a ``claim-conflict`` error: an array of claim summaries."""
    if type(value) is not list:
        return []
    return [ClaimSummary.from_json(item, f"{context}[{index}]") for index, item in enumerate(value)]
