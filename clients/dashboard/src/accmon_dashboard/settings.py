"""What the dashboard runs with: the settings of the configuration file and the command line, and their checks.

One table, :data:`FIELDS`, names every setting once: its key in ``dashboard.json``, its command-line option, its
kind and its help. The configuration file (:mod:`.config`) and the command line (:mod:`.cli`) both fill a
:class:`Settings` from it, the command line last, so an option wins over the file.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

__all__ = [
    "DEFAULT_CONFIG",
    "DEFAULT_LISTEN",
    "FIELDS",
    "Field",
    "Settings",
    "SettingsProblem",
    "is_loopback",
    "parse_listen",
]

DEFAULT_CONFIG = "/etc/accmon/dashboard.json"
DEFAULT_LISTEN = "127.0.0.1:8090"


@dataclass(frozen=True)
class Field:
    """One setting: ``key`` in the file, ``option`` on the command line, ``kind`` ``str`` or ``int``."""

    key: str
    option: str
    kind: str
    metavar: str
    help: str
    minimum: int = 0
    maximum: int = 0


FIELDS: Tuple[Field, ...] = (
    Field("listen", "--listen", "str", "ADDR:PORT",
          f"where to serve the page (default {DEFAULT_LISTEN}); beyond loopback it needs --auth-file"),
    Field("authFile", "--auth-file", "str", "FILE",
          "the credentials clients must give: bearer tokens or NAME:PASSWORD lines (docs/DASHBOARD.md)"),
    Field("broker", "--broker", "str", "URL",
          "show the fleet from this MQTT broker (mqtt://HOST[:PORT] or mqtts://HOST[:PORT]); without it, this host"),
    Field("host", "--host", "str", "GLOB", "with --broker: only hosts whose name matches (shell wildcards)"),
    Field("prefix", "--prefix", "str", "PREFIX", "with --broker: the topic prefix (default accmon)"),
    Field("ca", "--ca", "str", "FILE", "with mqtts://: the CA certificates to trust"),
    Field("certificate", "--certificate", "str", "FILE", "with mqtts://: a client certificate (with --key)"),
    Field("key", "--key", "str", "FILE", "with mqtts://: the client certificate's key"),
    Field("username", "--username", "str", "NAME", "the broker's login"),
    Field("passwordFile", "--password-file", "str", "FILE",
          "the broker's password (first line); not readable by every user"),
    Field("socket", "--socket", "str", "PATH", "without --broker: accmond's socket (default: accmon's default)"),
    Field("hostName", "--host-name", "str", "NAME", "without --broker: the name shown for this host "
          "(default: the host name)"),
    Field("accmon", "--accmon", "str", "PATH", "the accmon command (default: next to this program, then PATH)"),
    Field("title", "--title", "str", "TEXT", "the page's title (default: accmon)"),
    Field("events", "--events", "int", "N", "recent events kept and shown (default 200, 1 to 10000)",
          minimum=1, maximum=10000),
)
FIELDS_BY_KEY: Dict[str, Field] = {f.key: f for f in FIELDS}
FIELDS_BY_OPTION: Dict[str, Field] = {f.option: f for f in FIELDS}
#: The options passed on to ``accmon watch --broker`` as they are.
BROKER_OPTIONS = ("host", "prefix", "ca", "certificate", "key", "username", "passwordFile")
#: Files that may be credentials systemd hands the service (``LoadCredential=``): in these, ``${CREDENTIALS_DIRECTORY}``
#: stands for the directory systemd names in the environment variable of that name.
CREDENTIAL_KEYS = ("authFile", "passwordFile", "ca", "certificate", "key")
CREDENTIALS_DIRECTORY = "${CREDENTIALS_DIRECTORY}"


class SettingsProblem(Exception):
    """A setting that cannot work; ``key`` names it (``None``: the combination)."""

    def __init__(self, key: Optional[str], reason: str) -> None:
        super().__init__(reason)
        self.key = key
        self.reason = reason


@dataclass
class Settings:
    """Every setting, as strings and numbers; ``None`` where neither the file nor the command line gave one."""

    values: Dict[str, object] = field(default_factory=dict)
    #: Where each value came from: ``FILE:LINE:COLUMN`` of its key in the configuration file, or its option.
    origins: Dict[str, str] = field(default_factory=dict)

    def set(self, key: str, value: object, origin: str) -> None:
        self.values[key] = value
        self.origins[key] = origin

    def where(self, key: Optional[str]) -> str:
        """Where the setting `key` came from, for a message: ``FILE:LINE:COLUMN: key`` or its option."""
        if key is None:
            return "accmon-dashboard"
        origin = self.origins.get(key)
        if origin is None or origin.startswith("--"):
            return f"accmon-dashboard: {FIELDS_BY_KEY[key].option}"
        return f"{origin}: {key}"

    def get(self, key: str) -> Optional[str]:
        value = self.values.get(key)
        return None if value is None else str(value)

    @property
    def listen(self) -> str:
        return self.get("listen") or DEFAULT_LISTEN

    @property
    def events(self) -> int:
        value = self.values.get("events")
        return value if isinstance(value, int) else 200

    @property
    def title(self) -> str:
        return self.get("title") or "accmon"

    @property
    def fleet(self) -> bool:
        return self.get("broker") is not None

    def broker_arguments(self) -> List[str]:
        """The options of ``accmon watch`` for the fleet: ``--broker URL`` and the login, filter and TLS options."""
        broker = self.get("broker")
        assert broker is not None
        arguments = ["--broker", broker]
        for key in BROKER_OPTIONS:
            value = self.get(key)
            if value is not None:
                arguments += [FIELDS_BY_KEY[key].option, value]
        return arguments

    def check(self) -> None:
        """Checks the combination (the values' kinds and ranges were checked as they were read).

        :raises SettingsProblem: with the key at fault.
        """
        for key in CREDENTIAL_KEYS:
            value = self.get(key)
            if value is not None and CREDENTIALS_DIRECTORY in value:
                directory = os.environ.get("CREDENTIALS_DIRECTORY")
                if not directory:
                    raise SettingsProblem(key, "${CREDENTIALS_DIRECTORY} is not set: systemd sets it for a service "
                                          "with LoadCredential= (accmon-dashboard.service says how); elsewhere, name "
                                          "the file itself")  # fmt: skip
                self.values[key] = value.replace(CREDENTIALS_DIRECTORY, directory)
        try:
            parse_listen(self.listen)
        except ValueError as error:
            raise SettingsProblem("listen", str(error)) from None
        broker = self.get("broker")
        if broker is None:
            for key in BROKER_OPTIONS:
                if self.get(key) is not None:
                    raise SettingsProblem(key, f"{FIELDS_BY_KEY[key].option} goes with --broker (the fleet view)")
        else:
            if not (broker.startswith("mqtt://") or broker.startswith("mqtts://")):
                raise SettingsProblem("broker", f"'{broker}': expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT]")
            for key in ("socket", "hostName"):
                if self.get(key) is not None:
                    raise SettingsProblem(key, f"{FIELDS_BY_KEY[key].option} is for one host, not with --broker")
            if (self.get("certificate") is None) != (self.get("key") is None):
                raise SettingsProblem("certificate", "--certificate and --key go together")
            if self.get("passwordFile") is not None and self.get("username") is None:
                raise SettingsProblem("passwordFile", "--password-file needs --username")
        if self.needs_authentication and self.get("authFile") is None:
            raise SettingsProblem(
                "listen",
                f"'{self.listen}' is reachable from other machines, and the page shows every accessory the "
                "dashboard may see: give the credentials clients must present with --auth-file FILE "
                "(docs/DASHBOARD.md, authentication), or listen on 127.0.0.1",
            )

    @property
    def needs_authentication(self) -> bool:
        """Whether the address is reachable beyond this machine."""
        address, _ = parse_listen(self.listen)
        return not is_loopback(address)


def parse_listen(text: str) -> Tuple[str, int]:
    """``ADDR:PORT`` (IPv6 in brackets: ``[::1]:8090``) as an address and a port.

    :raises ValueError: saying why.
    """
    address, colon, port_text = text.rpartition(":")
    if not colon or not address:
        raise ValueError(f"'{text}': expected ADDR:PORT, such as 127.0.0.1:8090 or [::1]:8090")
    if address.startswith("[") and address.endswith("]"):
        address = address[1:-1]
    elif ":" in address:
        raise ValueError(f"'{text}': write an IPv6 address in brackets, such as [::1]:8090")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"'{text}': the port must be a number from 0 to 65535")
    if address != "localhost":
        try:
            ipaddress.ip_address(address)
        except ValueError:
            raise ValueError(f"'{text}': '{address}' is not an IP address (or localhost)") from None
    return address, int(port_text)


def is_loopback(address: str) -> bool:
    """Whether `address` (an IP address or ``localhost``) is only reachable from this machine."""
    if address == "localhost":
        return True
    return ipaddress.ip_address(address).is_loopback
