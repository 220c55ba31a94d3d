"""What a claim is now, followed through its notices: shared by the asyncio :class:`~accmon.Claim`, the blocking
:class:`~accmon.BlockingClaim` and the pytest plugin's claims. Pure: no I/O."""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from .claim_model import ClaimedNode, ClaimInfo, ClaimNotice, NodeOpener, Party
from .model import Accessory

__all__ = ["ClaimState", "ClaimView"]


class ClaimState:
    """A claim's latest description and how it ended, updated by each of its notices as it arrives.

    Each update replaces a whole attribute, so another thread reads a consistent value without a lock.
    """

    def __init__(self, info: ClaimInfo) -> None:
        self.info = info
        #: The notice that ended the claim (``broken``, ``lost``, ``expired``, ``cancelled``), once one has.
        self.ended: Optional[ClaimNotice] = None
        #: Whether this side released it.
        self.released = False

    def apply(self, notice: ClaimNotice) -> None:
        """Follows `notice`: a new description (``granted``, ``returned``), an accessory away (``returning``), an
        end."""
        if notice.claim is not None:
            self.info = notice.claim
        elif notice.kind == "returning":
            self.info = dataclasses.replace(self.info, state="returning")
        if notice.ends_claim and self.ended is None:
            self.ended = notice

    @property
    def waiting(self) -> bool:
        """Whether the claim still waits in line (neither granted nor ended)."""
        return self.info.state == "waiting" and self.ended is None


class ClaimView:
    """The read-only properties every claim object shares; subclasses set ``_state``."""

    _state: ClaimState

    @property
    def info(self) -> ClaimInfo:
        """The claim as accmond last described it (new connections and nodes after its accessory came back)."""
        return self._state.info

    @property
    def claim_id(self) -> str:
        """Such as ``c-3``."""
        return self._state.info.claim_id

    @property
    def token(self) -> str:
        """The secret that takes the claim up again from another connection, such as after accmond restarted:
        ``claim(token=...)``."""
        return self._state.info.token

    @property
    def state(self) -> str:
        """``"held"``, ``"waiting"``, ``"returning"`` (an accessory is away and expected back), or ``"ended"`` (broken,
        lost, expired, cancelled) and ``"released"``."""
        if self._state.released:
            return "released"
        if self._state.ended is not None:
            return "ended"
        return self._state.info.state

    @property
    def holder(self) -> Party:
        return self._state.info.holder

    @property
    def accessories(self) -> Tuple[Accessory, ...]:
        """The accessories held, as of the latest notice (a ``returned`` accessory has a new connection id)."""
        return self._state.info.accessories

    @property
    def device_nodes(self) -> Tuple[str, ...]:
        """Every device node of the accessories held, in order."""
        return self._state.info.device_nodes

    @property
    def device_node(self) -> Optional[str]:
        """The first device node of the first accessory held (for a serial port, its tty), or ``None``."""
        return self._state.info.device_node

    @property
    def nodes(self) -> Tuple[ClaimedNode, ...]:
        """Each device node and whether the claim is enforced on it (only the holder and root may open it)."""
        return self._state.info.nodes

    @property
    def enforced(self) -> bool:
        """Whether the claim is enforced on every device node (``False`` when there is none)."""
        return self._state.info.enforced

    @property
    def openers(self) -> Tuple[NodeOpener, ...]:
        """The processes that had a node open when the claim began (they keep their descriptors)."""
        return self._state.info.openers

    @property
    def ended(self) -> Optional[ClaimNotice]:
        """The notice that ended the claim (``broken``, ``lost``, ``expired``, ``cancelled``), else ``None``."""
        return self._state.ended

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.claim_id} {self.state} of {self.holder}: {list(self.device_nodes)}>"
