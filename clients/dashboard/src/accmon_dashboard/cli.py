"""``accmon-dashboard``: the command line, the configuration, then the server until SIGTERM or SIGINT.

Exit status (sysexits.h, as accmon's other commands): 0 after a stop by signal or a good ``--check``; 64 a usage
error or an impossible combination on the command line; 65 a problem in the configuration file; 69 no ``accmon``
command; 77 a credentials file refused (readable by every user, a link...); 1 anything else (the port taken).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from typing import List, NoReturn, Optional

from aiohttp import web

from . import __version__
from .auth import AuthFileProblem, Credentials, load_credentials
from .config import ConfigProblems, load
from .hub import Hub
from .model import Model
from .process import AccmonNotFound, find_accmon, stop_task
from .server import Dashboard, make_app
from .settings import DEFAULT_CONFIG, FIELDS, Settings, SettingsProblem, parse_listen
from .sources import FleetSource, LocalSource

__all__ = ["main"]

log = logging.getLogger("accmon-dashboard")
EX_USAGE, EX_DATAERR, EX_UNAVAILABLE, EX_NOPERM = 64, 65, 69, 77

DESCRIPTION = """\
A read-only web page of an accmon fleet, from the MQTT broker (--broker), or of this host, from accmond: hosts online
or offline, their accessories, recent events, live. Also /metrics (Prometheus) and /healthz. See
/usr/share/doc/accmon-dashboard/DASHBOARD.md."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"Error: {message}\n{self.format_usage()}See 'accmon-dashboard --help'\n")
        raise SystemExit(EX_USAGE)


def _parser() -> _Parser:
    parser = _Parser(prog="accmon-dashboard", description=DESCRIPTION)
    parser.add_argument("--config", metavar="FILE",
                        help=f"the configuration file (default {DEFAULT_CONFIG}, when it exists)")  # fmt: skip
    for setting in FIELDS:
        parser.add_argument(setting.option, dest=setting.key, metavar=setting.metavar, help=setting.help,
                            type=int if setting.kind == "int" else str)  # fmt: skip
    parser.add_argument("--password", dest="password", help=argparse.SUPPRESS)
    parser.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info",
                        help="what to log on standard error (default info)")  # fmt: skip
    parser.add_argument("--check", action="store_true",
                        help="check the configuration and the credentials file, print a summary, exit")  # fmt: skip
    parser.add_argument("--version", action="version", version=f"accmon-dashboard {__version__}")
    return parser


def _fail(status: int, message: str) -> NoReturn:
    sys.stderr.write(message.rstrip("\n") + "\n")
    raise SystemExit(status)


def _settings(options: argparse.Namespace, parser: _Parser) -> Settings:
    settings = Settings()
    path = options.config
    if path is not None or os.path.exists(DEFAULT_CONFIG):
        try:
            load(path or DEFAULT_CONFIG, settings)
        except ConfigProblems as problems:
            _fail(EX_DATAERR, "\n".join(problems.problems))
    for setting in FIELDS:
        value = getattr(options, setting.key)
        if value is None:
            continue
        if setting.kind == "int" and not setting.minimum <= value <= setting.maximum:
            parser.error(f"{setting.option}: {value} is out of range ({setting.minimum} to {setting.maximum})")
        if setting.kind == "str" and not value:
            parser.error(f"{setting.option}: an empty value")
        settings.set(setting.key, value, setting.option)
    try:
        settings.check()
    except SettingsProblem as problem:
        origin = settings.origins.get(problem.key or "", "--")
        _fail(EX_USAGE if origin.startswith("--") else EX_DATAERR, f"{settings.where(problem.key)}: {problem.reason}")
    return settings


def _credentials(settings: Settings) -> Optional[Credentials]:
    path = settings.get("authFile")
    if path is None:
        return None
    try:
        return load_credentials(path)
    except AuthFileProblem as problem:
        _fail(EX_NOPERM, f"{settings.where('authFile')}: '{path}': {problem}")


def main(arguments: Optional[List[str]] = None) -> int:
    parser = _parser()
    options = parser.parse_args(arguments)
    if options.password is not None:
        parser.error("--password: a password on the command line is visible to every user; use --password-file")
    logging.basicConfig(stream=sys.stderr, format="accmon-dashboard: %(levelname)s: %(message)s",
                        level=getattr(logging, options.log_level.upper()))  # fmt: skip
    settings = _settings(options, parser)
    credentials = _credentials(settings)
    try:
        accmon = find_accmon(settings.get("accmon"))
    except AccmonNotFound as error:
        _fail(EX_UNAVAILABLE, f"accmon-dashboard: {error}")
    view = f"the fleet on {settings.get('broker')}" if settings.fleet else f"this host ({_host_name(settings)})"
    if options.check:
        login = f"{len(credentials.tokens)} tokens, {len(credentials.basic)} basic logins" if credentials else "none"
        print(f"ok: {view}, through {accmon}; listen {settings.listen}; credentials: {login}")
        return 0
    try:
        asyncio.run(_serve(settings, credentials, accmon, view))
    except OSError as error:
        _fail(1, f"accmon-dashboard: cannot listen on {settings.listen}: {error.strerror or error}")
    return 0


def _host_name(settings: Settings) -> str:
    return settings.get("hostName") or socket.gethostname()


async def _serve(settings: Settings, credentials: Optional[Credentials], accmon: str, view: str) -> None:
    model = Model("fleet" if settings.fleet else "local", max_events=settings.events)
    hub = Hub(model.snapshot)
    if settings.fleet:
        source: "FleetSource | LocalSource" = FleetSource(accmon, settings, model, hub.publish)
    else:
        source = LocalSource(accmon, settings, model, hub.publish, _host_name(settings))
    dashboard = Dashboard(model, hub, settings.title, view, credentials, lambda: source.starts)
    hub.snapshot = dashboard.state
    runner = web.AppRunner(make_app(dashboard), access_log=None, handle_signals=False)
    await runner.setup()
    address, port = parse_listen(settings.listen)
    site = web.TCPSite(runner, address, port, shutdown_timeout=1.0, reuse_address=True)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    # The handlers are in place before the line that says the dashboard serves, which is what scripts wait for.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)
    bound = _bound(runner, settings.listen)
    log.info("serving %s on http://%s/ (credentials %s)", view, bound, "required" if credentials else "not required")
    reading = asyncio.ensure_future(source.run())
    await stop.wait()
    log.info("stopping")
    hub.close()
    await stop_task(reading)
    await source.stop_side_tasks()
    await runner.cleanup()


def _bound(runner: web.AppRunner, fallback: str) -> str:
    """The address and port actually bound (``--listen 127.0.0.1:0`` picks a free port)."""
    for address in runner.addresses:
        host, port = address[:2]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return fallback


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

