"""The ``claim`` and ``release`` requests (docs/PROTOCOL.md §7.12) built from the arguments of the client's
``claim`` and ``release``, checked before anything is sent; shared by the asyncio and the blocking clients and the
pytest plugin."""

from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Optional, Sequence, Union

from .filters import Filter, IdLike
from .model import Accessory

__all__ = ["ClaimTarget", "ReleaseTarget", "claim_request", "release_request", "MAXIMUM_COUNT"]

#: What a claim names: a connection id, or an accessory (its connection).
ClaimTarget = Union[int, Accessory]
#: What a release names: a connection id, a claim id (``"c-3"``), an accessory id, an accessory, or a claim (any
#: object with a ``claim_id``).
ReleaseTarget = Union[int, str, Accessory, Any]

#: The most accessories one claim may name or count (accmond's limit).
MAXIMUM_COUNT = 64
_CLAIM_ID = re.compile(r"c-[0-9]+\Z")


def _connection_ids(targets: Sequence[Any]) -> List[int]:
    flat: List[Any] = []
    for target in targets:
        if isinstance(target, (list, tuple)):
            flat.extend(target)
        else:
            flat.append(target)
    ids = []
    for target in flat:
        if isinstance(target, Accessory):
            ids.append(target.connection_id)
        elif isinstance(target, int) and not isinstance(target, bool) and target >= 0:
            ids.append(target)
        else:
            raise ValueError(f"claim: connections: expected connection ids or accessories, not {target!r}")
    if len(set(ids)) != len(ids):
        raise ValueError("claim: connections: a connection is named twice")
    if len(ids) > MAXIMUM_COUNT:
        raise ValueError(f"claim: connections: name at most {MAXIMUM_COUNT} connections")
    return ids


def claim_request(
    targets: Sequence[Union[ClaimTarget, Sequence[ClaimTarget]]] = (),
    *,
    kind: Optional[str] = None,
    vendor: IdLike = None,
    product: IdLike = None,
    protocol: Optional[str] = None,
    serial: Optional[str] = None,
    count: Optional[int] = None,
    token: Optional[str] = None,
    wait: bool = False,
    timeout: Optional[float] = None,
    reason: str = "",
    max_seconds: Optional[float] = None,
    preserve: bool = False,
) -> Dict[str, Any]:
    """The ``claim`` request (without its ``id``): by connections (`targets`), by filter (the filter parts, `serial`
    and `count`; nothing at all: any one accessory), or the claim that `token` names. A `timeout` implies `wait`.

    :raises ValueError: for arguments that do not go together or are malformed, naming the argument.
    """
    filter_parts = Filter(kind, vendor, product, protocol)
    by_filter = filter_parts != Filter() or serial is not None or count is not None
    if token is not None:
        if targets or by_filter:
            raise ValueError("claim: token: a claim taken up by its token names nothing else")
        if not isinstance(token, str) or not 1 <= len(token) <= 256:
            raise ValueError("claim: token: expected the token of an earlier claim")
        request: Dict[str, Any] = {"type": "claim", "token": token}
    elif targets:
        if by_filter:
            raise ValueError("claim: name connections or a filter (kind, vendor, product, protocol, serial, count), "
                             "not both")  # fmt: skip
        request = {"type": "claim", "connections": _connection_ids(targets)}
    else:
        request = {"type": "claim", "filter": filter_parts.to_wire()}
        if serial is not None:
            if not isinstance(serial, str):
                raise ValueError("claim: serial: expected a string")
            request["serial"] = serial
        if count is not None:
            if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAXIMUM_COUNT:
                raise ValueError(f"claim: count: expected 1 to {MAXIMUM_COUNT}")
            request["count"] = count
    if timeout is not None:
        if not 0 <= timeout < math.inf:
            raise ValueError("claim: timeout: expected a number of seconds, 0 or more")
        wait = True
    if wait:
        request["wait"] = True
    if not isinstance(reason, str):
        raise ValueError("claim: reason: expected a string")
    if reason:
        request["reason"] = reason
    if max_seconds is not None:
        if not 0 < max_seconds <= 31_536_000:
            raise ValueError("claim: max_seconds: expected more than 0 and at most a year (31536000)")
        request["maxSeconds"] = max_seconds
    if preserve:
        request["preserve"] = True
    return request


def release_request(target: ReleaseTarget, force: bool = False, reason: str = "") -> Dict[str, Any]:
    """The ``release`` request (without its ``id``) for a connection id, a claim id such as ``"c-3"``, an accessory
    id, an accessory (its connection) or a claim object.

    :raises ValueError: for anything else.
    """
    request: Dict[str, Any] = {"type": "release"}
    claim_id = getattr(target, "claim_id", None)
    if isinstance(claim_id, str):
        request["claimID"] = claim_id
    elif isinstance(target, Accessory):
        request["connectionID"] = target.connection_id
    elif isinstance(target, int) and not isinstance(target, bool) and target >= 0:
        request["connectionID"] = target
    elif isinstance(target, str) and _CLAIM_ID.match(target):
        request["claimID"] = target
    elif isinstance(target, str) and target:
        request["accessoryID"] = target
    else:
        raise ValueError(f"release: expected a connection id, a claim id, an accessory id or a claim, not {target!r}")
    if force:
        request["force"] = True
    if reason:
        request["reason"] = reason
    return request
