"""Host and Origin checks on every HTTP and websocket request, with or without a token.

Listening on 127.0.0.1 does not keep web pages out. In a DNS rebinding attack a page at
http://attacker.example:6006 has its name re-resolved to 127.0.0.1; the browser then lets it
read this server's answers as its own, sending `Host: attacker.example:6006`. So profboard
answers only to the names it is opened by:

1. `localhost` and `*.localhost`;
2. IP literals, v4 or v6 (a rebinding needs a name the attacker's DNS answers for);
3. the bind host (`--host`) and this machine's host name and FQDN (a remote GPU box is
   opened as http://gpubox:6006);
4. each `--allow-host NAME`; `.example.com` allows example.com and every name under it,
   `*` switches the check off (a proxy that rewrites Host, a name this machine does not know).

A request without Host (HTTP/1.0) passes: browsers always send one. A request whose `Origin`
(sent by browsers on cross-origin requests, form posts and websocket handshakes) names another
site is refused too: its host must be the request's own host name or an allowed name; an IP
literal passes there only when it is a loopback address, since any site can live at an address.
Refusals are 403, in the API's error shape under /api/, as a short text elsewhere.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
from typing import Iterable
from urllib.parse import urlsplit

from .auth import ASGIApp, Receive, Scope, Send

_JSON_PREFIXES = ("/api/", "/openapi.json")


def _machine_names() -> frozenset[str]:
    return frozenset(_name(n) for n in (socket.gethostname(), socket.getfqdn()) if n)


def _name(text: str) -> str:
    """Lower case, no trailing dot, IP addresses in their canonical form (no brackets)."""
    text = text.lower().rstrip(".").removeprefix("[").removesuffix("]")
    address = _ip(text)
    return str(address) if address is not None else text


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def _host_name(value: str) -> str | None:
    """The name or address in a Host header ("name", "name:port", "[v6]:port"), None if malformed."""
    if value.startswith("["):
        address, bracket, port = value[1:].partition("]")
        if not bracket or _ip(address) is None or (port and not (port[:1] == ":" and port[1:].isdigit())):
            return None
        return _name(address)
    name, colon, port = value.partition(":")
    if (colon and not port.isdigit()) or not name or any(not (c.isalnum() or c in "-._") for c in name):
        return None
    return _name(name)


def _origin_name(origin: str) -> str | None:
    """The host of an Origin header ("scheme://host[:port]"), None for "null" or anything malformed."""
    try:
        parts = urlsplit(origin)
        parts.port  # raises on a malformed port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return _name(parts.hostname)


class HostCheck:
    """ASGI middleware: passes requests with an allowed Host and Origin to `app`, refuses the others."""

    def __init__(self, app: ASGIApp, host: str, allow: Iterable[str]) -> None:
        self.app = app
        allow = [_name(a) for a in allow]
        self._off = "*" in allow
        self._names = {a for a in allow if not a.startswith(".")} | {_name(host)}
        self._suffixes = tuple(a for a in allow if a.startswith("."))
        # Looked up on the first request that needs them: getfqdn asks DNS, slow on an offline box.
        self._machine: frozenset[str] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._off or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = await self._refusal(dict(scope.get("headers", [])))
        if refusal is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # before the accept: the client sees a 403
        else:
            await _refuse(send, scope["path"], *refusal)

    async def _refusal(self, headers: dict[bytes, bytes]) -> tuple[str, str] | None:
        """(code, message) when the request's Host or Origin is not allowed, else None."""
        host = headers.get(b"host", b"").decode("latin-1")
        name = _host_name(host) if host else None
        if host and (name is None or not (_ip(name) or await self._allowed(name))):
            shown = _shown(name or host)
            return "host_not_allowed", (f"profboard does not answer to the host name {shown!r} (a guard against DNS "
                                        f"rebinding); if that name is yours, start profboard with --allow-host "
                                        f"{shown if name else 'NAME'}")
        origin = headers.get(b"origin")
        if origin is None:
            return None
        origin_name = _origin_name(origin.decode("latin-1"))
        if origin_name is not None and (origin_name == name or await self._allowed_origin(origin_name)):
            return None
        return "origin_not_allowed", (f"profboard does not answer pages of other sites (Origin "
                                      f"{_shown(origin.decode('latin-1'))!r}); if that site is yours, start profboard "
                                      f"with --allow-host {_shown(origin_name or 'NAME')}")

    async def _allowed(self, name: str) -> bool:
        if name == "localhost" or name.endswith(".localhost") or name in self._names:
            return True
        if any(name.endswith(s) or name == s[1:] for s in self._suffixes):
            return True
        if self._machine is None:
            self._machine = await asyncio.to_thread(_machine_names)
        return name in self._machine

    async def _allowed_origin(self, name: str) -> bool:
        # Any site can live at an IP address: only loopback ones, or those allowed by name, pass.
        address = _ip(name)
        if address is not None:
            return address.is_loopback or name in self._names
        return await self._allowed(name)


def _shown(text: str) -> str:
    """`text` safe to echo back: printable ASCII, at most 100 characters."""
    return "".join(c for c in text if " " <= c <= "~")[:100]


async def _refuse(send: Send, path: str, code: str, message: str) -> None:
    if path.startswith(_JSON_PREFIXES):
        body, content_type = json.dumps({"error": {"code": code, "message": message}}).encode(), b"application/json"
    else:
        body, content_type = f"403 Forbidden: {message}\n".encode(), b"text/plain; charset=utf-8"
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()),
               (b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff")]
    await send({"type": "http.response.start", "status": 403, "headers": headers})
    await send({"type": "http.response.body", "body": body})
