"""Token (or password) protection for every page, static file and API request.

The port of a dashboard on a remote GPU box is often reachable by others, so `--token` /
PROFBOARD_TOKEN puts everything behind one shared secret. A request passes with any of:

1. `Authorization: Bearer TOKEN` (API clients, the Docker healthcheck);
2. the session cookie, which is an HMAC of the token (the cookie never holds the token itself,
   and changing the token logs everyone out);
3. `?token=TOKEN` on a GET: the cookie is set and the browser is sent to the same URL without
   the token, so it leaves the address bar and the history;
4. the login form (POST /login), shown with status 401 instead of any page. A link followed
   from another site comes without the SameSite=Strict cookie: that page reloads itself once
   (a same-site request, which carries the cookie) before the form is shown.

Anything else under /api/, /static/ or /openapi.json gets a 401 in the API's error shape.
Tokens are compared in constant time. The middleware is plain ASGI, so streamed responses
(the raw trace download) pass through untouched.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import html
import json
from http.cookies import SimpleCookie
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl, quote, urlencode

COOKIE = "profboard_session"
LOGIN_PATH = "/login"
_COOKIE_MAX_AGE = 30 * 24 * 3600
_MAX_FORM_BYTES = 4096
# A wrong token costs its sender this long: a guess per request is slower, a user barely notices.
_FAILURE_DELAY_S = 0.25
_JSON_PREFIXES = ("/api/", "/static/", "/openapi.json")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def session_value(token: str) -> str:
    """The cookie value that stands for `token`."""
    return hmac.new(token.encode(), b"profboard session v1", hashlib.sha256).hexdigest()


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode("utf-8", "surrogateescape"))


class TokenAuth:
    """ASGI middleware: passes authorised requests to `app`, answers the others itself."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("an empty token protects nothing")
        self.app = app
        self._token = token
        self._session = session_value(token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = [v for k, v in query if k == "token"]
        authorised = self._authorised(_headers(scope))
        if scope["type"] == "websocket":
            if authorised:
                await self.app(scope, receive, send)
            else:
                await send({"type": "websocket.close", "code": 1008})
            return
        if authorised and not given and path != LOGIN_PATH:
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        if path == LOGIN_PATH and method == "POST":
            await self._login(scope, receive, send)
        elif path == LOGIN_PATH:
            target = _local(dict(query).get("next", "/"))
            if authorised:
                await _send(send, 303, b"", "text/plain", [(b"location", target.encode("latin-1", "replace"))])
            else:
                await _send(send, 401, *_login_page(target, None))
        elif given and method in ("GET", "HEAD"):
            # Checked even with a valid cookie: the redirect takes the token out of the address bar.
            if _same(given[-1], self._token):
                rest = urlencode([(k, v) for k, v in query if k != "token"])
                await self._grant(scope, send, quote(path) + (f"?{rest}" if rest else ""))
            else:
                await asyncio.sleep(_FAILURE_DELAY_S)
                await self._deny(scope, send, path, "wrong token")
        elif authorised:
            await self.app(scope, receive, send)
        else:
            await self._deny(scope, send, path, None)

    def _authorised(self, headers: dict[str, str]) -> bool:
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        # Header bytes were decoded as latin-1: compare the bytes the client sent with the token's UTF-8.
        if scheme.lower() == "bearer" and hmac.compare_digest(credentials.strip().encode("latin-1"),
                                                              self._token.encode("utf-8", "surrogateescape")):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header is just no cookie
            return False
        morsel = cookie.get(COOKIE)
        return morsel is not None and _same(morsel.value, self._session)

    async def _deny(self, scope: Scope, send: Send, path: str, problem: str | None) -> None:
        if path.startswith(_JSON_PREFIXES):
            message = ("wrong token" if problem else "this profboard needs a token") + (
                ": send 'Authorization: Bearer TOKEN', or open the dashboard once with ?token=TOKEN")
            body = json.dumps({"error": {"code": "unauthorized", "message": message}}).encode()
            await _send(send, 401, body, "application/json", [(b"www-authenticate", b"Bearer")])
            return
        query = scope.get("query_string", b"").decode("latin-1")
        clean = urlencode([(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "token"])
        if problem is None and _headers(scope).get("sec-fetch-site") == "cross-site":
            # A link followed from another site (chat, a wiki) arrives without the SameSite=Strict
            # cookie even when the user has one: reload once from this page, which sends it.
            await _send(send, 401, _RELOAD_PAGE, "text/html; charset=utf-8")
            return
        await _send(send, 401, *_login_page(quote(path) + (f"?{clean}" if clean else ""), problem))

    async def _login(self, scope: Scope, receive: Receive, send: Send) -> None:
        body, too_big = b"", False
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > _MAX_FORM_BYTES:
                too_big = True
                break
            if not message.get("more_body"):
                break
        form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)) if not too_big else {}
        target = _local(form.get("next", "/"))
        if _same(form.get("token", ""), self._token):
            await self._grant(scope, send, target)
            return
        await asyncio.sleep(_FAILURE_DELAY_S)
        await _send(send, 401, *_login_page(target, "wrong token" if form.get("token") else "enter the token"))

    async def _grant(self, scope: Scope, send: Send, target: str) -> None:
        """Set the session cookie and send the browser on to `target` (a local path)."""
        cookie = SimpleCookie()
        cookie[COOKIE] = self._session
        morsel = cookie[COOKIE]
        morsel["path"] = "/"
        morsel["httponly"] = True
        morsel["samesite"] = "Strict"
        morsel["max-age"] = _COOKIE_MAX_AGE
        if scope.get("scheme") == "https":
            morsel["secure"] = True
        headers = [(b"location", _local(target).encode("latin-1", "replace")),
                   (b"set-cookie", morsel.OutputString().encode("latin-1"))]
        await _send(send, 303, b"", "text/plain", headers)


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _local(target: str) -> str:
    """`target` if it is a path on this server, else "/": the login never redirects elsewhere."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target or any(
            ord(c) < 32 for c in target):
        return "/"
    return target


async def _send(send: Send, status: int, body: bytes, content_type: str,
                extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode()),
               (b"cache-control", b"no-store"), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


_RELOAD_PAGE = (b'<!doctype html><html lang="en"><head><meta charset="utf-8">'
                b'<meta http-equiv="refresh" content="0"><title>profboard</title></head>'
                b'<body><p>Opening profboard...</p></body></html>')


def _login_page(target: str, problem: str | None) -> tuple[bytes, str]:
    """A small self-contained form (no scripts, no external files: static files need the token too)."""
    note = f'<p class="problem" role="alert">{html.escape(problem.capitalize())}.</p>' if problem else ""
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>profboard: sign in</title>
<style>
body {{ font: 15px system-ui, sans-serif; display: grid; place-items: center; min-height: 90vh; margin: 0; }}
form {{ display: grid; gap: .6rem; min-width: 18rem; padding: 1.5rem; border: 1px solid #ccc; border-radius: 8px; }}
h1 {{ font-size: 1.2rem; margin: 0; }} p {{ margin: 0; color: #555; }} .problem {{ color: #b00020; }}
input, button {{ font: inherit; padding: .4rem; }}
</style></head>
<body><form method="post" action="{LOGIN_PATH}" data-testid="login-form">
<h1>profboard</h1><p>This dashboard needs its token.</p>{note}
<input type="password" name="token" autocomplete="current-password" aria-label="Token" autofocus required>
<input type="hidden" name="next" value="{html.escape(_local(target), quote=True)}">
<button type="submit">Open</button>
</form></body></html>
"""
    return page.encode(), "text/html; charset=utf-8"
