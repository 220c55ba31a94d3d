"""A parsed command line of ``python3 -m accmon`` (:class:`Options`): what cli.py makes and commands.py runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union

from .filters import Filter

__all__ = ["Options"]


@dataclass
class Options:
    """A parsed command line."""

    command: str
    socket: Optional[str] = None
    flags: List[str] = field(default_factory=list)
    values: Dict[str, str] = field(default_factory=dict)
    filter: Filter = field(default_factory=Filter)
    #: What ``release`` names: a connection id, or a claim or accessory id.
    target: Union[int, str] = ""

    @property
    def json(self) -> bool:
        return "--json" in self.flags

    @property
    def all(self) -> bool:
        return "--all" in self.flags

    @property
    def timeout(self) -> Optional[float]:
        return float(self.values["--timeout"]) if "--timeout" in self.values else None
