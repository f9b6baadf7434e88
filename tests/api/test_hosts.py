"""Host and Origin checks (server/hosts.py): localhost is not a boundary by itself.

A page on another site can reach a server on 127.0.0.1 through DNS rebinding: its own name
resolves to 127.0.0.1, and the browser then sends `Host: <that name>`. So profboard answers
only to the names it is opened by (localhost, IP literals, the bind host, this machine's names,
`--allow-host NAME`), and refuses requests sent by pages of other sites (`Origin`).

Against the real command: one server with the defaults, one with `--allow-host`; a few checks
of the middleware itself (websockets, `*`, the order against the token) run in-process.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

import aio

httpx = pytest.importorskip("httpx", reason="httpx is not installed (pip install -e '.[test]')")


@pytest.fixture(scope="module")
def plain(start_server, tmp_path_factory: pytest.TempPathFactory):
    """profboard with the default allow-list, on an empty logdir (nothing to load)."""
    tmp = tmp_path_factory.mktemp("hosts_plain")
    (tmp / "logs").mkdir()
    return start_server(tmp / "logs", tmp)


@pytest.fixture(scope="module")
def allowing(start_server, tmp_path_factory: pytest.TempPathFactory):
    """profboard with two extra names: one exact, one with its subdomains."""
    tmp = tmp_path_factory.mktemp("hosts_allowing")
    (tmp / "logs").mkdir()
    return start_server(tmp / "logs", tmp, extra_args=["--allow-host", "dash.example", "--allow-host", ".corp.example"])


def _port(server) -> str:
    return server.base.rsplit(":", 1)[1]


def _get(server, path: str, headers: dict[str, str]) -> httpx.Response:
    return httpx.get(server.base + path, headers=headers, timeout=30, follow_redirects=False)


def _assert_refused_json(response: httpx.Response, code: str, hint: str) -> None:
    assert response.status_code == 403, (response.status_code, response.text[:200])
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code
    assert hint in body["error"]["message"], body


LOCAL_HOSTS = ["localhost", "localhost:{port}", "LocalHost.:{port}", "profboard.localhost:{port}",
               "127.0.0.1:{port}", "127.1.2.3", "[::1]:{port}", "10.1.2.3:{port}", "[2001:db8::1]"]


@pytest.mark.parametrize("host", LOCAL_HOSTS)
def test_hosts_local_names_and_ip_literals_are_allowed(plain, host):
    # An IP literal cannot be a rebinding: that needs a name the attacker's DNS answers for.
    response = _get(plain, "/api/runs", {"Host": host.format(port=_port(plain))})
    assert response.status_code == 200, response.text


def test_hosts_this_machines_names_are_allowed(plain):
    # A remote GPU box is opened as http://gpubox:6006.
    for name in {socket.gethostname(), socket.getfqdn()}:
        response = _get(plain, "/api/runs", {"Host": f"{name}:{_port(plain)}"})
        assert response.status_code == 200, (name, response.text)


REBINDING_HOSTS = ["evil.example", "evil.example:{port}", "localhost.evil.example", "127.0.0.1.nip.io:{port}",
                   f"{socket.gethostname()}.evil.example", "localhost@evil.example", "::1", "[::1"]


@pytest.mark.parametrize("host", REBINDING_HOSTS)
def test_hosts_other_names_are_refused_in_the_api_error_shape(plain, host):
    host = host.format(port=_port(plain))
    response = _get(plain, "/api/runs", {"Host": host})
    _assert_refused_json(response, "host_not_allowed", "--allow-host")


def test_hosts_refusal_names_the_flag_that_allows_it(plain):
    response = _get(plain, "/api/runs", {"Host": f"Evil.Example:{_port(plain)}"})
    _assert_refused_json(response, "host_not_allowed", "--allow-host evil.example")


@pytest.mark.parametrize("path", ["/", "/overview?run=x", "/static/js/app.js", "/docs"])
def test_hosts_pages_are_refused_with_a_short_plain_page(plain, path):
    response = _get(plain, path, {"Host": "evil.example"})
    assert response.status_code == 403, response.text[:200]
    assert response.headers["content-type"].startswith("text/plain")
    assert "--allow-host evil.example" in response.text and len(response.text) < 500


def test_hosts_request_without_a_host_header_is_served(plain):
    # HTTP/1.0 clients send no Host; no browser does, so no rebinding comes this way.
    with socket.create_connection(("127.0.0.1", int(_port(plain))), timeout=30) as sock:
        sock.sendall(b"GET /api/runs HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.split(b"\r\n", 1)[0].split()[1] == b"200", answer[:300]


@pytest.mark.parametrize("origin", ["http://evil.example", "https://evil.example:8443", "null",
                                    "http://203.0.113.9:6006", "not a url"])
def test_hosts_requests_from_other_sites_are_refused(plain, origin):
    response = _get(plain, "/api/runs", {"Origin": origin})
    _assert_refused_json(response, "origin_not_allowed", "--allow-host")
    page = _get(plain, "/", {"Origin": origin})
    assert page.status_code == 403 and page.headers["content-type"].startswith("text/plain")


@pytest.mark.parametrize("origin", ["http://127.0.0.1:{port}", "http://localhost:{port}", "http://localhost:3000",
                                    "http://[::1]:{port}"])
def test_hosts_requests_from_our_own_pages_pass(plain, origin):
    response = _get(plain, "/api/runs", {"Origin": origin.format(port=_port(plain))})
    assert response.status_code == 200, response.text


def test_hosts_origin_of_the_same_ip_as_the_host_passes(plain):
    # Opened as http://10.1.2.3:6006 (a remote box by address): its pages send that Origin.
    response = _get(plain, "/api/runs", {"Host": "10.1.2.3:6006", "Origin": "http://10.1.2.3:6006"})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("host", ["dash.example", "DASH.example:6006", "corp.example", "a.corp.example",
                                  "b.a.corp.example:6006", "localhost"])
def test_hosts_allow_host_adds_names(allowing, host):
    assert _get(allowing, "/api/runs", {"Host": host}).status_code == 200


@pytest.mark.parametrize("host", ["x.dash.example", "dash.example.evil", "notcorp.example", "evil.example"])
def test_hosts_allow_host_adds_only_those_names(allowing, host):
    _assert_refused_json(_get(allowing, "/api/runs", {"Host": host}), "host_not_allowed", "--allow-host")


def test_hosts_allowed_names_may_send_requests_from_their_pages(allowing):
    # Behind a proxy that rewrites Host to 127.0.0.1, the page's Origin is still its public name.
    response = _get(allowing, "/api/runs", {"Host": f"127.0.0.1:{_port(allowing)}",
                                            "Origin": "https://dash.example"})
    assert response.status_code == 200, response.text
    refused = _get(allowing, "/api/runs", {"Origin": "https://evil.example"})
    _assert_refused_json(refused, "origin_not_allowed", "--allow-host evil.example")


def test_hosts_allow_host_is_repeatable_in_settings():
    from profboard.server.cli import _serve_parser, _settings

    args = _serve_parser().parse_args(["--allow-host", "a.example", "--allow-host", ".b.example", "--host", "box"])
    settings = _settings(args, "logs")
    assert settings.allow_hosts == ("a.example", ".b.example") and settings.host == "box"
    bind_all = _settings(_serve_parser().parse_args(["--bind_all"]), "logs")
    assert bind_all.allow_hosts == () and bind_all.host == "0.0.0.0"


# ---------------------------------------------------------------------------------------------
# The middleware in-process: what the real command cannot easily show


async def _ok(scope, receive, send):
    if scope["type"] == "websocket":
        await send({"type": "websocket.accept"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def _drive(app, scope_type: str, headers: dict[str, str], path: str = "/api/runs") -> list[dict]:
    sent: list[dict] = []

    async def receive() -> dict:
        if scope_type == "websocket":
            return {"type": "websocket.connect"}
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": scope_type, "path": path, "query_string": b"", "scheme": "http", "client": ("127.0.0.1", 5000),
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    if scope_type == "http":
        scope["method"] = "GET"
    aio.run(app(scope, receive, send))
    return sent


def test_hosts_websocket_from_another_site_is_closed():
    from profboard.server.hosts import HostCheck

    guarded = HostCheck(_ok, host="127.0.0.1", allow=())
    assert _drive(guarded, "websocket", {"Host": "localhost:6006"})[0]["type"] == "websocket.accept"
    assert _drive(guarded, "websocket", {"Host": "evil.example"})[0]["type"] == "websocket.close"
    # Browsers send Origin on every websocket handshake (cross-site websocket hijacking).
    assert _drive(guarded, "websocket", {"Host": "localhost:6006",
                                         "Origin": "http://evil.example"})[0]["type"] == "websocket.close"


def test_hosts_star_switches_the_check_off():
    from profboard.server.hosts import HostCheck

    guarded = HostCheck(_ok, host="127.0.0.1", allow=("*",))
    assert _drive(guarded, "http", {"Host": "anything.example", "Origin": "http://other.example"})[0]["status"] == 200


def test_hosts_bind_host_name_is_allowed():
    from profboard.server.hosts import HostCheck

    guarded = HostCheck(_ok, host="gpubox.lab.example", allow=())
    assert _drive(guarded, "http", {"Host": "gpubox.lab.example:6006"})[0]["status"] == 200
    assert _drive(guarded, "http", {"Host": "lab.example"})[0]["status"] == 403


def test_hosts_are_checked_before_the_token(tmp_path: Path):
    # A foreign Host is refused before any token is looked at, so it counts as no failed attempt.
    from profboard.server.app import create_app
    from profboard.server.settings import Settings

    app = create_app(Settings(logdir=str(tmp_path), token="secret"))
    refused = _drive(app, "http", {"Host": "evil.example", "Authorization": "Bearer wrong"})
    assert refused[0]["status"] == 403
    assert _drive(app, "http", {"Host": "localhost", "Authorization": "Bearer wrong"})[0]["status"] == 401
