"""create_app(settings): the FastAPI application serving the API, the pages and static files."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from urllib.parse import urlencode

import plotly
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException

from . import __version__
from .api import VIEWS, runs
from .api.errors import BadParameter, NotFound, PublicError
from .auth import TokenAuth
from .hosts import HostCheck
from .loaders import Loaders
from .settings import Settings
from .snapshot.cache import SnapshotCache
from .store import TraceStore

log = logging.getLogger("profboard")

_WEB = Path(str(resources.files("profboard.web")))
_PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def create_app(settings: Settings, loaders: Loaders | None = None) -> FastAPI:
    """A new app with its own store (logdir, cache, loader processes: `loaders` when started already),
    started with the app."""
    store = TraceStore(settings, loaders)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        store.start()
        try:
            yield
        finally:
            store.close()

    app = FastAPI(title="profboard", version=__version__, lifespan=lifespan,
                  description="Dashboard API for PyTorch profiler traces. Times in us, sizes in bytes, shares as 0..1.")
    app.state.store = store
    app.state.snapshots = SnapshotCache(settings.max_snapshot_bytes)
    app.state.settings = settings
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
    for view in VIEWS:
        app.include_router(view.router)

    # Registered before the /static mount so that it wins.
    @app.api_route("/static/vendor/plotly.min.js", methods=["GET", "HEAD"], include_in_schema=False)
    def plotly_js() -> FileResponse:
        # Served from the installed plotly package: no CDN, works on offline GPU boxes. Browsers may
        # keep it a day: 4.8 MB that only changes when plotly is upgraded, needed by every page.
        return FileResponse(_PLOTLY_JS, media_type="text/javascript",
                            headers={"Cache-Control": "public, max-age=86400"})

    app.mount("/static", StaticFiles(directory=_WEB / "static"), name="static")
    templates = Jinja2Templates(directory=str(_WEB / "templates"))
    view_names = [v.name for v in VIEWS]
    # Pages under a view's older name (issue 20 gave each view one name): old name -> view.
    renamed_pages = {old: v.name for v in VIEWS for old in v.renamed_from}

    def page(request: Request, view: str) -> HTMLResponse:
        context = {"views": [{"name": v.name, "title": v.title} for v in VIEWS], "view": view, "version": __version__}
        if view not in view_names:
            # A mistyped page path still gets the shell (HTML, status 404), not an API error.
            return templates.TemplateResponse(request, "not_found.html", context | {"missing": view}, status_code=404)
        return templates.TemplateResponse(request, f"{view}.html", context)

    def renamed(view: str, query: str) -> RedirectResponse:
        # A page under a view's old name (bookmarks, shared links) moves to the new one, query kept.
        return RedirectResponse(f"/{renamed_pages[view]}" + (f"?{query}" if query else ""), status_code=307)

    @app.get("/", include_in_schema=False, response_class=HTMLResponse)
    def index(request: Request, view: str = view_names[0]) -> Response:
        if view in renamed_pages:
            return renamed(view, urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "view"]))
        return page(request, view)

    @app.get("/{view}", include_in_schema=False, response_class=HTMLResponse)
    def view_page(request: Request, view: str) -> Response:
        if view in renamed_pages:
            return renamed(view, request.url.query)
        return page(request, view)

    return app
