"""``python3 -m accmon``: the command line, for hosts without the Swift ``accmon`` binary.

It mirrors ``accmon``: the same commands (``watch``, ``list``, ``status``, ``wait``, ``claims``, ``release``),
options, output and exit codes (sysexits.h): 0 success, 1 failure, 64 usage error, 69 accmond unreachable, 75
``wait`` timed out, 77 not allowed. Everything is parsed before anything connects to the daemon.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from dataclasses import dataclass
from typing import Any, Callable, Coroutine, Dict, List, Optional, Sequence, Union

from . import __version__
from .client import Client
from .command_line import Options
from .commands import run_claims, run_list, run_release, run_status, run_wait, run_watch
from .errors import AccmonError, ConnectionClosed, DaemonUnreachable, PermissionDenied, ProtocolError, WaitTimeout
from .filters import Filter, hex_id
from .model import KINDS
from .wire import DEFAULT_SOCKET

__all__ = ["Options", "UsageError", "exit_code", "main"]

EX_OK, EX_FAILURE, EX_USAGE, EX_DATAERR, EX_UNAVAILABLE, EX_TEMPFAIL, EX_NOPERM = 0, 1, 64, 65, 69, 75, 77

_FILTER_HELP = """\
  --kind KIND        only usb, serial or bluetooth-hid accessories
  --vendor ID        only this vendor id (hex, such as 0403)
  --product ID       only this product id (hex)
  --protocol NAME    only accessories that speak this protocol
"""
_COMMON_HELP = f"""\
  --socket PATH      accmond's socket (default: $ACCMON_SOCKET, else {DEFAULT_SOCKET})
  -h, --help         show this help
"""


@dataclass
class _Command:
    name: str
    abstract: str
    usage: str
    flags: Sequence[str] = ()
    valued: Sequence[str] = ()
    #: What the one argument that is not an option names, if the command takes one.
    operand: Optional[str] = None


_COMMANDS: Dict[str, _Command] = {
    command.name: command
    for command in [
        _Command(
            "watch",
            "Show accessories as they connect and disconnect, until Ctrl-C.",
            "Usage: python3 -m accmon watch [--json] [--all] [--restore-id ID] [--kind KIND] [--vendor ID]\n"
            "                               [--product ID] [--protocol NAME] [--socket PATH]\n\n"
            "Show accessories as they connect and disconnect, until Ctrl-C.\n"
            'First prints the accessories connected now (as "present", with their claim\'s holder), then one line per\n'
            "event: time, connect or disconnect, kind, vendor:product, name, serial, device node, connection id; and\n"
            'one per claim change ("claimed" by whom, "released").\n\n'
            "Options:\n"
            "  --json             print the protocol's messages as NDJSON: the snapshot (each accessory with its\n"
            '                     "claim" when claimed), then each event and "claim-update"\n'
            '  --all              also accessories the manifest rejected, shown as "rejected: <reason>" (root and the\n'
            "                     manifest's admins only)\n"
            "  --restore-id ID    keep the session across restarts of this command and of accmond: started again\n"
            "                     with the same id, it shows what it knew (with --json: a \"session\" line with\n"
            '                     "restored":true), then what it missed; it reconnects by itself\n'
            + _FILTER_HELP
            + _COMMON_HELP,
            flags=("--json", "--all"),
            valued=("--restore-id",),
        ),
        _Command(
            "list",
            "List the accessories connected now.",
            "Usage: python3 -m accmon list [--json] [--all] [--kind KIND] [--vendor ID] [--product ID]\n"
            "                              [--protocol NAME] [--socket PATH]\n\n"
            "List the accessories connected now.\n\n"
            "Options:\n"
            '  --json             print {"version":1,"seq":N,"accessories":[...]} with sorted keys (with --all, also\n'
            '                     "rejected": {connection id: reason})\n'
            "  --all              also accessories the manifest rejected (root and the manifest's admins only)\n"
            + _FILTER_HELP
            + _COMMON_HELP,
            flags=("--json", "--all"),
        ),
        _Command(
            "status",
            "Show the daemon's version, uptime, accessories and sessions.",
            "Usage: python3 -m accmon status [--json] [--socket PATH]\n\n"
            "Show the daemon's version, uptime, accessories and sessions.\n\n"
            "Options:\n"
            "  --json             print the status as one JSON object with sorted keys\n" + _COMMON_HELP,
            flags=("--json",),
        ),
        _Command(
            "claims",
            "List the claims and the claimers waiting in line.",
            "Usage: python3 -m accmon claims [--json] [--socket PATH]\n\n"
            "List the claims and the claimers waiting in line.\n"
            "Shows the claims on the accessories this user sees (and this user's own): accessory, holder (user name, uid\n"
            "and pid), since when, why, and how many wait; then the claimers waiting, in line order.\n\n"
            "Options:\n"
            '  --json             print {"version":1,"claims":[...],"waiters":[...]} with sorted keys\n' + _COMMON_HELP,
            flags=("--json",),
        ),
        _Command(
            "release",
            "Release a claim; with --force, an admin breaks another's.",
            "Usage: python3 -m accmon release CONNECTION|ACCESSORY-ID|CLAIM-ID [--force --reason TEXT] [--socket PATH]\n\n"
            "Release a claim; with --force, an admin breaks another's.\n"
            "Names the claim by a connection it holds (a number), an accessory id it holds, or its id (c-N). Without\n"
            "--force, only the claim's own user may release it. With --force (root and the manifest's admins), the claim\n"
            "is broken: its holder is told by whom and why, and its command (accmon claim) is ended.\n\n"
            "Options:\n"
            "  --force            break another user's claim (admins)\n"
            "  --reason TEXT      why, told to the holder (with --force)\n" + _COMMON_HELP + "\n"
            "Exit status: 0 released, 77 not permitted, 69 accmond unreachable, 64 usage, 1 no such claim.\n",
            flags=("--force",),
            valued=("--reason",),
            operand="the claim: a connection id, an accessory id or a claim id",
        ),
        _Command(
            "wait",
            "Wait until a matching accessory is connected; print its device node.",
            "Usage: python3 -m accmon wait [--kind KIND] [--vendor ID] [--product ID] [--protocol NAME]\n"
            "                              [--serial TEXT] [--timeout SECONDS] [--json] [--socket PATH]\n\n"
            "Wait until a matching accessory is connected; print its device node.\n"
            "Returns at once when one is connected already (the first in connection order), else when the first\n"
            "one connects, and prints its first device node (nothing when it has none).\n\n"
            "Options:\n"
            '  --json             print {"version":1,"accessory":{...}} with sorted keys instead\n'
            "  --serial TEXT      only the accessory with this serial number (Bluetooth: its address)\n"
            "  --timeout SECONDS  give up after this long: exit 75\n" + _FILTER_HELP + _COMMON_HELP + "\n"
            "Exit status: 0 connected, 64 usage error, 69 accmond unreachable, 75 timed out, 77 not allowed.\n",
            flags=("--json",),
            valued=("--serial", "--timeout"),
        ),
    ]
}

MAIN_USAGE = (
    "Usage: python3 -m accmon [--socket PATH] COMMAND [OPTIONS]\n\n"
    "Watch and list external accessories through accmond.\n\n"
    "Commands:\n"
    + "".join(f"  {command.name.ljust(10)}{command.abstract}\n" for command in _COMMANDS.values())
    + "\nOptions:\n"
    f"  --socket PATH  accmond's socket (default: $ACCMON_SOCKET, else {DEFAULT_SOCKET})\n"
    "  -h, --help     show this help; `python3 -m accmon help COMMAND` or `... COMMAND --help` for a command\n"
    "  --version      show the version\n"
)


_FILTERED = ("watch", "list", "wait")


class UsageError(Exception):
    """A usage error: printed with the command's usage; exit 64."""


def _expand_equals(arguments: Sequence[str]) -> List[str]:
    expanded: List[str] = []
    for argument in arguments:
        if argument.startswith("--") and "=" in argument:
            expanded.extend(argument.split("=", 1))
        else:
            expanded.append(argument)
    return expanded


def _value(arguments: List[str], option: str) -> str:
    if not arguments or arguments[0].startswith("--"):
        raise UsageError(f"{option} needs a value")
    return arguments.pop(0)


def parse_command(command: _Command, arguments: List[str], socket: Optional[str]) -> Options:
    """Parses a command's options. :raises UsageError: for anything it does not accept."""
    options = Options(command.name, socket)
    parts: Dict[str, Optional[str]] = {}
    operand: Optional[str] = None
    while arguments:
        option = arguments.pop(0)
        if option == "--socket":
            options.socket = _value(arguments, option)
        elif option in command.flags:
            options.flags.append(option)
        elif option in command.valued:
            options.values[option] = _value(arguments, option)
        elif option in ("--kind", "--vendor", "--product", "--protocol") and command.name in _FILTERED:
            parts[option[2:]] = _value(arguments, option)
        elif command.operand is not None and operand is None and not option.startswith("-"):
            operand = option
        else:
            raise UsageError(f"unknown option '{option}'")
    if command.operand is not None:
        if operand is None:
            raise UsageError(f"name {command.operand}")
        options.target = int(operand) if operand.isdigit() else operand
    if "--reason" in options.values and "--force" not in options.flags:
        raise UsageError("--reason goes with --force (it is told to the holder)")
    kind = parts.get("kind")
    if kind is not None and kind not in KINDS:
        raise UsageError(f"--kind: '{kind}' is not a kind ({', '.join(KINDS)})")
    for part in ("vendor", "product"):
        try:
            hex_id(f"--{part}", parts.get(part))
        except ValueError as error:
            raise UsageError(str(error).replace("(such as '0403')", "(such as 0403)")) from None
    options.filter = Filter(kind, parts.get("vendor"), parts.get("product"), parts.get("protocol"))
    if "--timeout" in options.values:
        text = options.values["--timeout"]
        try:
            seconds = float(text)
        except ValueError:
            seconds = -1.0
        if not 0 <= seconds < float("inf"):
            raise UsageError(f"--timeout: '{text}' is not a number of seconds (such as 30 or 0.5)")
    if options.all and "--restore-id" in options.values:
        raise UsageError("--all and --restore-id do not go together")
    return options


def exit_code(error: AccmonError) -> int:
    """The exit status for `error`, after sysexits.h."""
    if isinstance(error, WaitTimeout):
        return EX_TEMPFAIL
    if isinstance(error, PermissionDenied):
        return EX_NOPERM
    if isinstance(error, (DaemonUnreachable, ConnectionClosed)):
        return EX_UNAVAILABLE
    if isinstance(error, ProtocolError) and error.code == "manifest-invalid":
        return EX_DATAERR
    return EX_FAILURE


def _usage_failure(message: str, usage: str, command: Optional[str]) -> int:
    name = f"python3 -m accmon {command}" if command else "python3 -m accmon"
    sys.stderr.write(f"Error: {message}\n{usage}See '{name} --help'.\n")
    return EX_USAGE


def _parse(argv: Sequence[str]) -> Union[int, Options]:
    arguments = _expand_equals(argv)
    socket: Optional[str] = None
    while arguments:
        argument = arguments.pop(0)
        if argument in ("-h", "--help"):
            sys.stdout.write(MAIN_USAGE)
            return EX_OK
        if argument == "--version":
            sys.stdout.write(f"accmon {__version__} (python)\n")
            return EX_OK
        if argument == "--socket":
            if not arguments or arguments[0].startswith("--"):
                return _usage_failure("--socket needs a value", MAIN_USAGE, None)
            socket = arguments.pop(0)
        elif argument == "help":
            if not arguments:
                sys.stdout.write(MAIN_USAGE)
                return EX_OK
            if arguments[0] not in _COMMANDS:
                return _usage_failure(f"unknown command '{arguments[0]}'", MAIN_USAGE, None)
            sys.stdout.write(_COMMANDS[arguments[0]].usage)
            return EX_OK
        elif argument in _COMMANDS:
            command = _COMMANDS[argument]
            if "-h" in arguments or "--help" in arguments:
                sys.stdout.write(command.usage)
                return EX_OK
            try:
                return parse_command(command, arguments, socket)
            except UsageError as error:
                return _usage_failure(str(error), command.usage, command.name)
        else:
            return _usage_failure(f"unknown command '{argument}'", MAIN_USAGE, None)
    return _usage_failure("a command is required", MAIN_USAGE, None)


def _quiet_exit(signal_number: int, frame: object) -> None:
    raise SystemExit(EX_OK)


async def _until_signalled(command: Coroutine[Any, Any, int]) -> int:
    """Runs `command` until it ends, or until SIGINT or SIGTERM cancels it (exit 0): a session then closes as on any
    end, with what was printed acknowledged, and nothing is interrupted between two awaits."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(command)
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, task.cancel)
    try:
        return await task
    except asyncio.CancelledError:
        return EX_OK


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the command line `argv` (default: ``sys.argv[1:]``); returns the exit status."""
    parsed = _parse(sys.argv[1:] if argv is None else argv)
    if isinstance(parsed, int):
        return parsed
    runners: Dict[str, Callable[[Options], int]] = {
        "list": lambda options: run_list(Client(options.socket, "python3 -m accmon"), options),
        "status": lambda options: run_status(Client(options.socket, "python3 -m accmon"), options),
        "wait": lambda options: run_wait(Client(options.socket, "python3 -m accmon", timeout=None), options),
        "claims": lambda options: run_claims(Client(options.socket, "python3 -m accmon"), options),
        "release": lambda options: run_release(Client(options.socket, "python3 -m accmon"), options),
        "watch": lambda options: asyncio.run(_until_signalled(run_watch(options))),
    }
    # Ctrl-C and SIGTERM end the command quietly with success, as they end `accmon watch`.
    signal.signal(signal.SIGTERM, _quiet_exit)
    try:
        return runners[parsed.command](parsed)
    except AccmonError as error:
        sys.stderr.write(f"{error}\n")
        return exit_code(error)
    except KeyboardInterrupt:
        return EX_OK
    except BrokenPipeError:
        # The reader went away (`| head`): nothing left to say. Point stdout at /dev/null so that the interpreter's
        # final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EX_OK
