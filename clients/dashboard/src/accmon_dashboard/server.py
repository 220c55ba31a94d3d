"""The HTTP side, on aiohttp: the page and its static files, the state as JSON, the live stream (server-sent
events), ``/metrics`` and ``/healthz``.

Every response carries a Content-Security-Policy that allows scripts, styles and connections from the dashboard
itself only (no inline script or style, no other origin, no frames), plus ``nosniff`` and no referrer. The page
never parses a string as markup (docs/DASHBOARD.md, "What is escaped"). Only GET and HEAD are served: the dashboard
changes nothing.

Authentication (when credentials are given): every path but ``/healthz`` needs them. Without credentials (loopback
only), a request must name a loopback host in its ``Host`` header: a web page elsewhere cannot make a browser on this
machine read the dashboard through a DNS name that it points at 127.0.0.1 (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from importlib import resources
from typing import Any, Awaitable, Callable, Dict, Optional, Tuple

from aiohttp import web

from . import __version__
from .auth import Credentials
from .hub import Hub
from .metrics import CONTENT_TYPE, render
from .model import Model

__all__ = ["CSP", "Dashboard", "make_app"]

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
       "manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")  # fmt: skip
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
STATIC_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
STATIC_FILES = ("index.html", "dashboard.js", "dashboard.css", "icon.svg")
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
#: An event sent on an idle stream, so that proxies and the page see it alive (the page reconnects after 50 s of
#: silence).
KEEPALIVE_SECONDS = 15.0
PING = b"event: ping\ndata: {}\n\n"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Dashboard:
    """What the handlers serve: the model, its followers, the settings that matter to HTTP."""

    def __init__(self, model: Model, hub: Hub, title: str, view: str, credentials: Optional[Credentials],
                 reader_starts: Callable[[], int]) -> None:  # fmt: skip
        self.model = model
        self.view = view
        self.hub = hub
        self.title = title
        self.credentials = credentials
        self.reader_starts = reader_starts
        self.started = time.time()
        self.static = _load_static()

    def state(self) -> Dict[str, Any]:
        return {"version": __version__, "title": self.title, "view": self.view, "now": time.time(),
                "maxEvents": self.model.max_events, **self.model.snapshot()}  # fmt: skip


def _load_static() -> Dict[str, Tuple[bytes, str, str]]:
    """The static files, read once: their bytes, content type and ETag."""
    files: Dict[str, Tuple[bytes, str, str]] = {}
    package = resources.files("accmon_dashboard") / "static"
    for name in STATIC_FILES:
        data = (package / name).read_bytes()
        kind = STATIC_TYPES[name[name.rindex(".") :]]
        files[name] = (data, kind, '"' + hashlib.sha256(data).hexdigest()[:20] + '"')
    return files


@web.middleware
async def security_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response = await handler(request)
    except web.HTTPException as error:
        error.headers.update(SECURITY_HEADERS)
        raise
    response.headers.update(SECURITY_HEADERS)
    return response


def _access(dashboard: Dashboard) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    @web.middleware
    async def access(request: web.Request, handler: Handler) -> web.StreamResponse:
        if dashboard.credentials is not None:
            if request.path != "/healthz" and not dashboard.credentials.accepts(request.headers.get("Authorization")):
                raise web.HTTPUnauthorized(
                    text="401: this dashboard needs credentials (docs/DASHBOARD.md, authentication)\n",
                    headers={"WWW-Authenticate": 'Basic realm="accmon dashboard", charset="UTF-8"'},
                )
        else:
            host = request.headers.get("Host", "")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name not in LOOPBACK_NAMES:
                raise web.HTTPMisdirectedRequest(
                    text="421: without credentials, this dashboard answers only requests to localhost, 127.0.0.1 "
                    "or [::1] (docs/DASHBOARD.md)\n"
                )
        return await handler(request)

    return access


def make_app(dashboard: Dashboard) -> web.Application:
    app = web.Application(middlewares=[security_headers, _access(dashboard)])

    def static(name: str) -> Handler:
        data, kind, etag = dashboard.static[name]

        async def serve(request: web.Request) -> web.StreamResponse:
            headers = {"ETag": etag, "Cache-Control": "no-cache"}
            if request.headers.get("If-None-Match") == etag:
                return web.Response(status=304, headers=headers)
            return web.Response(body=data, headers={**headers, "Content-Type": kind})

        return serve

    async def state(request: web.Request) -> web.StreamResponse:
        return _json(dashboard.state())

    async def metrics(request: web.Request) -> web.StreamResponse:
        text = render(dashboard.model, dashboard.hub, dashboard.reader_starts(), dashboard.started)
        return web.Response(text=text, headers={"Content-Type": CONTENT_TYPE, "Cache-Control": "no-store"})

    async def healthz(request: web.Request) -> web.StreamResponse:
        source = dashboard.model.source
        current = source["state"] == "connected"
        body = {"status": "ok" if current else "degraded", "reader": source["state"], "message": source["message"]}
        return _json(body, status=200 if current else 503)

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-store",
                     "X-Accel-Buffering": "no"}  # fmt: skip
        )
        await response.prepare(request)
        follower = dashboard.hub.follow()
        try:
            while True:
                data = await follower.get(KEEPALIVE_SECONDS, PING)
                if data is None:
                    break
                await response.write(data)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            dashboard.hub.leave(follower)
        return response

    app.router.add_get("/", static("index.html"))
    for name in STATIC_FILES[1:]:
        app.router.add_get(f"/static/{name}", static(name))
    app.router.add_get("/api/state", state)
    app.router.add_get("/events", stream)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    return app


def _json(body: Dict[str, Any], status: int = 200) -> web.Response:
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return web.Response(text=text, status=status, content_type="application/json",
                        headers={"Cache-Control": "no-store"})  # fmt: skip
