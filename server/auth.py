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

Wrong tokens (a bearer header, `?token=`, the login form) are limited in a sliding minute: ten
per client address (an IPv6 client by its /64) and a hundred over all clients. Past either
limit the request is answered 429 with Retry-After and its token is not compared at all, the
right one included: otherwise the answer would tell a guesser which guess was right. The
session cookie is no guess (an HMAC of the token), so signed-in browsers are never held back.
A request that carries a valid credential is never asked for another: a cookie holder's
`?token=` is dropped from the URL unchecked.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import ipaddress
import json
import logging
import math
import time
from collections import deque
from http.cookies import SimpleCookie
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl, quote, urlencode

COOKIE = "profboard_session"
LOGIN_PATH = "/login"
_COOKIE_MAX_AGE = 30 * 24 * 3600
_MAX_FORM_BYTES = 4096
# Wrong tokens allowed in a sliding window: a person mistyping never meets them, a guesser soon does.
FAILURES_PER_CLIENT = 10
FAILURES_OVERALL = 100
FAILURE_WINDOW_S = 60.0
_JSON_PREFIXES = ("/api/", "/static/", "/openapi.json")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("profboard")


def session_value(token: str) -> str:
    """The cookie value that stands for `token`."""
    return hmac.new(token.encode(), b"profboard session v1", hashlib.sha256).hexdigest()


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode("utf-8", "surrogateescape"))


def _client_key(address: str | None) -> str:
    """The unit a limit applies to: an IPv4 address, or an IPv6 /64 (one host may use any address in it)."""
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return address or "unknown"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class FailedTokens:
    """Wrong tokens in a sliding window, per client and over all clients."""

    def __init__(self, per_client: int = FAILURES_PER_CLIENT, overall: int = FAILURES_OVERALL,
                 window_s: float = FAILURE_WINDOW_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_client, self.overall, self.window_s = per_client, overall, window_s
        self._clock = clock
        self._all: deque[float] = deque()
        self._by_client: dict[str, deque[float]] = {}

    def wait_s(self, address: str | None) -> int:
        """Whole seconds before a token from `address` may be checked again; 0 when it may now."""
        now = self._clock()
        self._expire(self._all, now)
        mine = self._by_client.get(_client_key(address), deque())
        self._expire(mine, now)
        # A count falls below its limit when the failure `limit` places from the end leaves the window.
        until = [times[-limit] + self.window_s for times, limit in ((mine, self.per_client), (self._all, self.overall))
                 if len(times) >= limit]
        return max(1, math.ceil(max(until) - now)) if until else 0

    def record(self, address: str | None) -> bool:
        """Counts a wrong token from `address`; True when that reaches a limit."""
        now = self._clock()
        key = _client_key(address)
        mine = self._by_client.setdefault(key, deque())
        mine.append(now)
        self._all.append(now)
        if len(self._by_client) > self.overall:  # forget clients whose failures have all left the window
            self._by_client = {k: v for k, v in self._by_client.items() if v[-1] > now - self.window_s}
        return len(mine) >= self.per_client or len(self._all) >= self.overall

    def _expire(self, times: deque[float], now: float) -> None:
        while times and times[0] <= now - self.window_s:
            times.popleft()


class TokenAuth:
    """ASGI middleware: passes authorised requests to `app`, answers the others itself."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("an empty token protects nothing")
        self.app = app
        self._token = token
        self._session = session_value(token)
        self._failures = FailedTokens()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = [v for k, v in query if k == "token"]
        headers = _headers(scope)
        address = (scope.get("client") or (None,))[0]
        authorised = self._has_session(headers)
        wait_s = 0
        if not authorised and "authorization" in headers:
            wait_s = self._failures.wait_s(address)
            authorised = not wait_s and self._counted(address, self._bearer_ok(headers))
        if scope["type"] == "websocket":
            if authorised:
                await self.app(scope, receive, send)
            else:
                await send({"type": "websocket.close", "code": 1008})
            return
        method = scope["method"]
        if authorised and path != LOGIN_PATH:
            if given and method in ("GET", "HEAD"):
                # Signed in already: the token only leaves the address bar, unchecked.
                location = _without_token(path, query).encode("latin-1", "replace")
                await _send(send, 303, b"", "text/plain", [(b"location", location)])
            else:
                await self.app(scope, receive, send)
        elif path == LOGIN_PATH and method == "POST":
            await self._login(scope, receive, send, address, authorised)
        elif path == LOGIN_PATH:
            target = _local(dict(query).get("next", "/"))
            if authorised:
                await _send(send, 303, b"", "text/plain", [(b"location", target.encode("latin-1", "replace"))])
            else:
                await _send(send, 401, *_login_page(target, None))
        elif given and method in ("GET", "HEAD"):
            wait_s = self._failures.wait_s(address)
            if wait_s:
                await _too_many(send, path, _without_token(path, query), wait_s)
            elif self._counted(address, _same(given[-1], self._token)):
                await self._grant(scope, send, _without_token(path, query))
            else:
                await self._deny(scope, send, path, "wrong token")
        elif wait_s:
            await _too_many(send, path, _without_token(path, query), wait_s)
        else:
            await self._deny(scope, send, path, None)

    def _counted(self, address: str | None, right: bool) -> bool:
        """`right`, after counting a wrong token against `address`."""
        if not right and self._failures.record(address):
            log.warning("too many wrong tokens (from %s, or from all clients): tokens are not checked for up to "
                        "%.0f s", _client_key(address), self._failures.window_s)
        return right

    def _bearer_ok(self, headers: dict[str, str]) -> bool:
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        # Header bytes were decoded as latin-1: compare the bytes the client sent with the token's UTF-8.
        return scheme.lower() == "bearer" and hmac.compare_digest(credentials.strip().encode("latin-1"),
                                                                  self._token.encode("utf-8", "surrogateescape"))

    def _has_session(self, headers: dict[str, str]) -> bool:
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
        if problem is None and _headers(scope).get("sec-fetch-site") == "cross-site":
            # A link followed from another site (chat, a wiki) arrives without the SameSite=Strict
            # cookie even when the user has one: reload once from this page, which sends it.
            await _send(send, 401, _RELOAD_PAGE, "text/html; charset=utf-8")
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        await _send(send, 401, *_login_page(_without_token(path, query), problem))

    async def _login(self, scope: Scope, receive: Receive, send: Send, address: str | None,
                     authorised: bool) -> None:
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
        token = form.get("token", "")
        # Asked after the body is read, with no await before the count: concurrent posts queue up here.
        wait_s = self._failures.wait_s(address) if token and not authorised else 0
        if authorised or (token and not wait_s and self._counted(address, _same(token, self._token))):
            await self._grant(scope, send, target)
        elif wait_s:
            await _too_many(send, LOGIN_PATH, target, wait_s)
        else:
            await _send(send, 401, *_login_page(target, "wrong token" if token else "enter the token"))

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


def _without_token(path: str, query: list[tuple[str, str]]) -> str:
    """The request's path and query, less any `token` parameter, percent-encoded."""
    rest = urlencode([(k, v) for k, v in query if k != "token"])
    return quote(path) + (f"?{rest}" if rest else "")


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


async def _too_many(send: Send, path: str, target: str, wait_s: int) -> None:
    """429 for a token that was not checked: in the API's error shape, or as the login page."""
    message = f"too many wrong tokens: try again in {wait_s} s (until then no token is checked, against guessing)"
    retry = [(b"retry-after", str(wait_s).encode())]
    if path.startswith(_JSON_PREFIXES):
        body = json.dumps({"error": {"code": "too_many_attempts", "message": message}}).encode()
        await _send(send, 429, body, "application/json", retry)
    else:
        await _send(send, 429, *_login_page(target, message), retry)


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
