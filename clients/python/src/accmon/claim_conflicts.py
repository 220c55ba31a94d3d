"""The errors that name the claims in a claim's way: :class:`ClaimConflict` and :class:`ClaimTimeout`. The other
errors are in errors.py: decoding the claim values raises them, so that module cannot import the claim values."""

from __future__ import annotations

from typing import Sequence, Tuple

from .claim_summary import ClaimSummary
from .errors import ProtocolError

__all__ = ["ClaimConflict", "ClaimTimeout"]


class ClaimConflict(ProtocolError):
    """What a claim asked for is held by others (protocol code ``claim-conflict``), and the claim did not ask to wait.

    :ivar holders: the claims in the way (:class:`~accmon.ClaimSummary`), each with its holder's user name, uid, pid
        and client name (:class:`~accmon.Party`), since when, and why.
    """

    def __init__(self, message: str, holders: Sequence[ClaimSummary] = (), code: str = "claim-conflict") -> None:
        super().__init__(code, message)
        self.holders: Tuple[ClaimSummary, ...] = tuple(holders)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, holders={list(self.holders)!r})"


class ClaimTimeout(ClaimConflict, TimeoutError):
    """A claim waited in line for the time it was given, and was still not granted (code ``timeout``); its place in
    line was given up. :attr:`holders` are the claims that were in its way when it began to wait."""

    def __init__(self, message: str, holders: Sequence[ClaimSummary] = ()) -> None:
        super().__init__(message, holders, "timeout")
