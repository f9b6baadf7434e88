"""create_app(settings): the FastAPI application serving the API, the pages and static files."""

from __future__ import annotations

import importlib.util
import logging
import threading
from contextlib import asynccontextmanager
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from . import __version__
from .api import SLICES, runs
from .api.errors import BadParameter, NotFound, PublicError
from .auth import TokenAuth
from .hosts import HostCheck
from .loaders import Loaders
from .settings import Settings
from .sources import SourceRoots
from .store import TraceStore

if TYPE_CHECKING:
    from fastapi.templating import Jinja2Templates

log = logging.getLogger("profboard")

_WEB = Path(str(resources.files("profboard.web")))
# Found, not imported: importing plotly takes 45 ms of the server's start, for a file path.
_PLOTLY_JS = Path(importlib.util.find_spec("plotly").origin).parent / "package_data" / "plotly.min.js"


# Seconds after the start at which the views' routers are included if no request came first (_Views).
VIEWS_AFTER_S = 0.5


@cache
def _templates() -> Jinja2Templates:
    # Imported after the start (create_app's lifespan) or by the first page: Jinja2 took 45 ms of the
    # server's start, which the run list need not wait for.
    from fastapi.templating import Jinja2Templates

    return Jinja2Templates(directory=str(_WEB / "templates"))


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def _needs_views(path: str) -> bool:
    # The run list (what a fresh server is asked first) and static files are answered without them.
    return not (path == "/api/runs" or path.startswith("/static/"))


class _Views:
    """The views' routers, included in the app when first needed rather than when it is built: their
    slices take a quarter of a second to import (server/api/__init__.py), which the server's start and
    /api/runs need not wait for. A request that may need them includes the slices in the registry's order
    up to the one whose route it is (in a worker thread, so that /api/runs keeps answering meanwhile): the
    first overview of a reopened trace imports only its own slice, and no analysis (issue 15). A thread
    includes the rest once the first answer has gone out (most often the run list, which the import beside
    it slowed by a tenth of a second on two cores), or VIEWS_AFTER_S after the start; the OpenAPI schema
    waits for all of them."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app
        self._lock = threading.Lock()
        self._started = threading.Event()
        self._next = 0  # SLICES[:_next] are included
        self.included = False

    def include_soon(self) -> None:
        """Include the routers in a thread of their own, once."""
        if not self._started.is_set():
            self._started.set()
            threading.Thread(target=self.include, name="profboard-views", daemon=True).start()

    def include(self, scope: Scope | None = None) -> None:
        """Include the slices not included yet, in order; with `scope`, only up to the one that routes it."""
        with self._lock:
            if scope is not None and self._routed(self._app.router.routes, scope):
                return
            while self._next < len(SLICES):
                router = SLICES[self._next].view.router
                self._app.include_router(router)
                self._next += 1
                if scope is not None and self._routed(router.routes, scope):
                    break
            self.included = self._next == len(SLICES)

    @staticmethod
    def _routed(routes: list, scope: Scope) -> bool:
        return any(route.matches(scope)[0] != Match.NONE for route in routes)

    def openapi(self) -> dict:
        self.include()
        return FastAPI.openapi(self._app)

    def middleware(self, app: ASGIApp) -> ASGIApp:
        async def include_first(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and not self.included and _needs_views(scope["path"]):
                await run_in_threadpool(self.include, scope)
            await app(scope, receive, send)
            if not self.included:
                self.include_soon()
        return include_first


def create_app(settings: Settings, loaders: Loaders | None = None) -> FastAPI:
    """A new app with its own store (logdir, cache, loader processes: `loaders` when started already),
    started with the app."""
    store = TraceStore(settings, loaders)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        store.start()
        # The views' routers, and the analyses under them, are imported soon after, beside the first
        # requests: the first view asked for rarely waits for them. So are the pages' templates.
        def warm_up() -> None:
            views.include_soon()
            _templates()

        soon = threading.Timer(VIEWS_AFTER_S, warm_up)
        soon.daemon = True
        soon.start()
        try:
            yield
        finally:
            soon.cancel()
            store.close()

    app = FastAPI(title="profboard", version=__version__, lifespan=lifespan,
                  description="Dashboard API for PyTorch profiler traces. Times in us, sizes in bytes, shares as 0..1.")
    app.state.store = store
    app.state.settings = settings
    app.state.sources = SourceRoots(settings.source_roots)
    views = _Views(app)
    app.openapi = views.openapi
    # Added first, so it runs last: requests refused for their host or token include nothing.
    app.add_middleware(views.middleware)
    if settings.token:
        # Wraps every route and mount (pages, static files, API, docs): nothing answers without it.
        app.add_middleware(TokenAuth, token=settings.token)
    # Added last, so it runs first: a foreign Host or Origin is refused before any token is looked at.
    app.add_middleware(HostCheck, host=settings.host, allow=settings.allow_hosts)

    @app.exception_handler(PublicError)
    async def public_error(request: Request, exc: PublicError) -> JSONResponse:
        return _error(exc.status, exc.code, exc.message)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']}" for e in exc.errors())
        return _error(BadParameter.status, BadParameter.code, problems or "bad request")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = NotFound.code if exc.status_code == 404 else "http_error"
        return _error(exc.status_code, code, str(exc.detail))

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        return _error(500, "internal", "internal error; the server log has the details")

    app.include_router(runs.router)

    # Registered before the /static mount so that it wins.
    @app.api_route("/static/vendor/plotly.min.js", methods=["GET", "HEAD"], include_in_schema=False)
    def plotly_js() -> FileResponse:
        # Served from the installed plotly package: no CDN, works on offline GPU boxes. Browsers may
        # keep it a day: 4.8 MB that only changes when plotly is upgraded, needed by every page.
        return FileResponse(_PLOTLY_JS, media_type="text/javascript",
                            headers={"Cache-Control": "public, max-age=86400"})

    app.mount("/static", StaticFiles(directory=_WEB / "static"), name="static")
    view_names = [entry.name for entry in SLICES]

    def renamed_to(view: str) -> str | None:
        # Pages under a view's older name (issue 20 gave each view one name): the view's name.
        return next((entry.name for entry in SLICES if view in entry.renamed_from), None)

    def page(request: Request, view: str) -> HTMLResponse:
        context = {"views": [{"name": entry.name, "title": entry.title} for entry in SLICES], "view": view,
                   "version": __version__}
        if view not in view_names:
            # A mistyped page path still gets the shell (HTML, status 404), not an API error.
            return _templates().TemplateResponse(request, "not_found.html", context | {"missing": view}, status_code=404)
        return _templates().TemplateResponse(request, f"{view}.html", context)

    def renamed(name: str, query: str) -> RedirectResponse:
        # A page under a view's old name (bookmarks, shared links) moves to the new one, query kept.
        return RedirectResponse(f"/{name}" + (f"?{query}" if query else ""), status_code=307)

    @app.get("/", include_in_schema=False, response_class=HTMLResponse)
    def index(request: Request, view: str = view_names[0]) -> Response:
        if name := renamed_to(view):
            return renamed(name, urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "view"]))
        return page(request, view)

    @app.get("/{view}", include_in_schema=False, response_class=HTMLResponse)
    def view_page(request: Request, view: str) -> Response:
        if name := renamed_to(view):
            return renamed(name, request.url.query)
        return page(request, view)

    return app
