"""`profboard --token T`: every page, static file and API request needs the token.

Against the real server: API answers 401 in the error shape, pages answer a login form,
`Authorization: Bearer`, `?token=` (sets the cookie and redirects without it), the login
form, wrong tokens and a cookie made for another token; wrong tokens past the limit answer 429.

The module's shared server counts every wrong token its tests send from 127.0.0.1 (eight): keep
them under the limit of ten a minute, and test the limit on a server of its own.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

import aio
from processes import free_port, stop_process

httpx = pytest.importorskip("httpx", reason="httpx is not installed (pip install -e '.[test]')")

from profboard.server.auth import COOKIE, session_value  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TOKEN = "correct horse battery staple"
LOGDIR = REPO / "tests/data/h200x2/ddp_straggler_rank1"
RUN = LOGDIR.name
PAGES = ["/", "/overview", "/kernels?run=x", "/docs", "/no-such-page"]
PROTECTED_JSON = ["/api/runs", f"/api/overview?run={RUN}", "/api/views", "/openapi.json", "/static/js/app.js",
                  "/static/vendor/plotly.min.js", "/api/no-such-route"]


@dataclass
class TokenServer:
    base: str
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_until_loaded(self, timeout: float = 60.0) -> None:
        """Poll /api/runs, with the token, until the run is listed and loaded."""
        deadline = time.monotonic() + timeout
        while True:
            assert self.process.poll() is None, f"profboard exited:\n{self.log()}"
            try:
                runs = httpx.get(self.base + "/api/runs", headers={"Authorization": f"Bearer {TOKEN}"},
                                 timeout=10).json()["runs"]
                if [r["name"] for r in runs] == [RUN] and runs[0]["status"] != "loading":
                    return
            except (httpx.TransportError, ValueError, KeyError):
                pass
            assert time.monotonic() < deadline, f"not loaded after {timeout:.0f} s:\n{self.log()}"
            time.sleep(0.2)

    def stop(self) -> None:
        stop_process(self.process)


def start_token_server(tmp: Path) -> TokenServer:
    """`profboard --token TOKEN` on LOGDIR, loaded; the caller stops it."""
    port = free_port()
    log_path = tmp / "profboard.log"
    command = [sys.executable, "-m", "profboard.server.cli", "--logdir", str(LOGDIR), "--port", str(port),
               "--cache-dir", str(tmp / "cache"), "--token", TOKEN]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    server = TokenServer(f"http://127.0.0.1:{port}", process, log_path)
    try:
        server.wait_until_loaded()
    except BaseException:
        server.stop()
        raise
    return server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    server = start_token_server(tmp_path_factory.mktemp("auth_server"))
    try:
        yield server
    finally:
        server.stop()


def anonymous(server: TokenServer, path: str, cookies: dict | None = None, **kwargs) -> httpx.Response:
    """A request from a fresh client (no cookie but `cookies`), redirects not followed."""
    with httpx.Client(base_url=server.base, follow_redirects=False, timeout=30, cookies=cookies) as client:
        return client.get(path, **kwargs)


def assert_unauthorized(response: httpx.Response) -> str:
    assert response.status_code == 401, (response.request.url, response.status_code, response.text[:200])
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == "unauthorized", body
    assert response.headers.get("www-authenticate") == "Bearer"
    return body["error"]["message"]


def assert_login_page(response: httpx.Response) -> str:
    assert response.status_code == 401, (response.request.url, response.status_code)
    assert response.headers["content-type"].startswith("text/html")
    assert 'method="post" action="/login"' in response.text and 'type="password" name="token"' in response.text
    assert "set-cookie" not in response.headers
    return response.text


@pytest.mark.parametrize("path", PROTECTED_JSON)
def test_auth_api_and_static_need_the_token(server, path):
    message = assert_unauthorized(anonymous(server, path))
    assert "Authorization: Bearer" in message
    assert TOKEN not in message


@pytest.mark.parametrize("path", PAGES)
def test_auth_pages_answer_the_login_form(server, path):
    page = assert_login_page(anonymous(server, path))
    assert TOKEN not in page
    # The form sends the user back where they were going.
    assert f'name="next" value="{path.split("?")[0]}' in page


def test_auth_bearer_header_opens_the_api(server):
    headers = {"Authorization": f"Bearer {TOKEN}"}
    runs = anonymous(server, "/api/runs", headers=headers).json()["runs"]
    assert [r["name"] for r in runs] == [RUN] and runs[0]["status"] == "ready"
    overview = anonymous(server, "/api/overview", params={"run": RUN}, headers=headers)
    assert overview.status_code == 200 and overview.json()["steps"]
    raw = anonymous(server, "/api/trace/raw", params={"run": RUN}, headers=headers)
    first = sorted(LOGDIR.glob("*.pt.trace.json.gz"))[0]
    assert raw.status_code == 200 and raw.content == first.read_bytes()
    assert anonymous(server, "/static/js/app.js", headers=headers).status_code == 200


@pytest.mark.parametrize("value", [f"Bearer {TOKEN}x", "Bearer", f"Basic {TOKEN}", TOKEN, f"Bearer {TOKEN[:-1]}"])
def test_auth_wrong_bearer_is_refused(server, value):
    assert_unauthorized(anonymous(server, "/api/runs", headers={"Authorization": value}))


def test_auth_token_in_the_url_sets_a_cookie_and_redirects_without_it(server):
    with httpx.Client(base_url=server.base, follow_redirects=False, timeout=30) as client:
        response = client.get("/kernels", params={"run": RUN, "token": TOKEN, "group_by": "name"})
        assert response.status_code == 303, response.text
        assert response.headers["location"] == f"/kernels?run={RUN}&group_by=name"
        cookie = response.headers["set-cookie"]
        assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert TOKEN not in cookie and "token" not in response.headers["location"]
        # The client now holds the cookie: pages, static files and the API open.
        page = client.get(response.headers["location"])
        assert page.status_code == 200 and 'data-view' in page.text
        assert client.get("/static/js/app.js").status_code == 200
        assert client.get("/api/runs").json()["runs"][0]["name"] == RUN
        # /login with a valid cookie goes straight on.
        assert client.get("/login", params={"next": "/overview"}).headers["location"] == "/overview"


def test_auth_wrong_token_in_the_url_is_refused(server):
    page = assert_login_page(anonymous(server, "/", params={"token": "guess"}))
    assert "Wrong token" in page and "guess" not in page
    assert_unauthorized(anonymous(server, "/api/runs", params={"token": "guess"}))


def test_auth_login_form_sets_the_cookie(server):
    with httpx.Client(base_url=server.base, follow_redirects=False, timeout=30) as client:
        wrong = client.post("/login", data={"token": "guess", "next": "/kernels"})
        assert_login_page(wrong)
        assert "Wrong token" in wrong.text and 'value="/kernels"' in wrong.text
        assert client.get("/api/runs").status_code == 401
        right = client.post("/login", data={"token": TOKEN, "next": "/kernels?run=x"})
        assert right.status_code == 303 and right.headers["location"] == "/kernels?run=x"
        assert "HttpOnly" in right.headers["set-cookie"] and "SameSite=Strict" in right.headers["set-cookie"]
        assert client.get("/api/runs").status_code == 200


@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "/\\evil.example", "kernels"])
def test_auth_login_never_redirects_off_the_server(server, target):
    response = anonymous(server, "/login", params={})  # the form itself
    assert_login_page(response)
    with httpx.Client(base_url=server.base, follow_redirects=False, timeout=30) as client:
        done = client.post("/login", data={"token": TOKEN, "next": target})
    assert done.status_code == 303 and done.headers["location"] == "/"


def test_auth_cookie_of_another_token_is_refused(server):
    stale = {COOKIE: session_value("an older token")}
    assert_unauthorized(anonymous(server, "/api/runs", cookies=stale))
    assert anonymous(server, "/api/runs", cookies={COOKIE: session_value(TOKEN)}).status_code == 200
    assert_unauthorized(anonymous(server, "/api/runs", cookies={COOKIE: TOKEN}))


def test_auth_server_log_never_shows_the_token(server):
    anonymous(server, "/", params={"token": TOKEN})
    assert TOKEN not in server.log()


def test_auth_settings_repr_hides_the_token():
    from profboard.server.settings import Settings

    assert TOKEN not in repr(Settings(logdir="x", token=TOKEN))


def test_auth_is_off_without_a_token(start_app):
    # The conftest app has no token: everything answers as before (the other API tests rely on it).
    plain = start_app(LOGDIR, expect=[RUN])
    assert plain.get("/api/runs").status_code == 200
    assert plain.get("/").status_code == 200
    plain.stop()


def _status(app, path: str, headers: list[tuple[bytes, bytes]]) -> int:
    """Drive an ASGI app with one GET; returns the response status."""

    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "query_string": b"", "headers": headers,
             "scheme": "http"}
    aio.run(app(scope, receive, send))
    return sent[0]["status"]


def test_auth_non_ascii_token_works_in_the_bearer_header():
    from profboard.server.auth import TokenAuth

    async def ok(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    guarded = TokenAuth(ok, "pässwörd-令牌")
    assert _status(guarded, "/api/runs", [(b"authorization", "Bearer pässwörd-令牌".encode())]) == 200
    assert _status(guarded, "/api/runs", [(b"authorization", "Bearer passwort".encode())]) == 401
    assert _status(guarded, "/api/runs", [(b"cookie", b"profboard_session=\xff\xfe")]) == 401


def test_auth_link_from_another_site_reloads_once_to_send_the_cookie(server):
    # Browsers withhold SameSite=Strict cookies on cross-site navigations; the reload is same-origin.
    response = anonymous(server, "/kernels", params={"run": RUN}, headers={"Sec-Fetch-Site": "cross-site"})
    assert response.status_code == 401 and '<meta http-equiv="refresh" content="0">' in response.text
    assert "<form" not in response.text
    again = anonymous(server, "/kernels", params={"run": RUN}, headers={"Sec-Fetch-Site": "same-origin"})
    assert_login_page(again)
    with httpx.Client(base_url=server.base, follow_redirects=False, timeout=30,
                      cookies={COOKIE: session_value(TOKEN)}) as client:
        assert client.get("/kernels", params={"run": RUN}, headers={"Sec-Fetch-Site": "same-origin"}).status_code == 200


def test_auth_redirect_keeps_an_odd_path_intact(server):
    response = anonymous(server, "/no such page/é", params={"token": TOKEN, "q": "a b&c"})
    assert response.status_code == 303
    assert response.headers["location"] == "/no%20such%20page/%C3%A9?q=a+b%26c"


# ---------------------------------------------------------------------------------------------
# Wrong tokens are limited: per client address and over the whole server, in a sliding minute


def assert_too_many(response: httpx.Response) -> int:
    """Checks a 429 in the API's error shape; returns its Retry-After in seconds."""
    assert response.status_code == 429, (response.request.url, response.status_code, response.text[:200])
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == "too_many_attempts", body
    assert "try again in" in body["error"]["message"]
    retry = int(response.headers["retry-after"])
    assert 1 <= retry <= 60
    return retry


def test_auth_wrong_tokens_past_the_limit_are_refused_unchecked(tmp_path: Path):
    server = start_token_server(tmp_path)  # its own: this test locks 127.0.0.1 out for a minute
    try:
        # Concurrent guesses used to be checked all at once: now ten are, the rest are refused.
        def guess(n: int) -> int:
            return anonymous(server, "/api/runs", headers={"Authorization": f"Bearer guess-{n}"}).status_code

        with ThreadPoolExecutor(max_workers=16) as pool:
            statuses = Counter(pool.map(guess, range(40)))
        assert statuses == {401: 10, 429: 30}
        # Past the limit no token is compared, so even the right one tells a guesser nothing.
        assert_too_many(anonymous(server, "/api/runs", headers={"Authorization": f"Bearer {TOKEN}"}))
        page = anonymous(server, "/overview", params={"token": TOKEN})
        assert page.status_code == 429 and "Too many wrong tokens" in page.text and "retry-after" in page.headers
        assert "set-cookie" not in page.headers
        with httpx.Client(base_url=server.base, follow_redirects=False, timeout=30) as client:
            form = client.post("/login", data={"token": TOKEN, "next": "/"})
        assert form.status_code == 429 and "Too many wrong tokens" in form.text and "set-cookie" not in form.headers
        # A session cookie is no guess (an HMAC nobody can forge): signed-in users carry on.
        signed_in = anonymous(server, "/api/runs", cookies={COOKIE: session_value(TOKEN)})
        assert signed_in.status_code == 200 and signed_in.json()["runs"][0]["name"] == RUN
        stale_link = anonymous(server, "/overview", params={"run": RUN, "token": "an old token"},
                               cookies={COOKIE: session_value(TOKEN)})
        assert stale_link.status_code == 303 and stale_link.headers["location"] == f"/overview?run={RUN}"
        # A request that sends no token is answered as before.
        assert_unauthorized(anonymous(server, "/api/runs"))
    finally:
        server.stop()


def test_auth_concurrent_login_posts_are_counted_one_by_one():
    # The form's body arrives after an await: each post is counted as its token is compared.
    import asyncio

    from profboard.server.auth import FAILURES_PER_CLIENT, TokenAuth

    async def never(scope, receive, send):
        raise AssertionError("no wrong token gets through")

    guarded = TokenAuth(never, TOKEN)

    async def post(n: int) -> int:
        sent: list[dict] = []

        async def receive() -> dict:
            await asyncio.sleep(0)
            return {"type": "http.request", "body": f"token=guess-{n}&next=/".encode(), "more_body": False}

        async def send(message: dict) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/login", "query_string": b"", "scheme": "http",
                 "headers": [(b"content-type", b"application/x-www-form-urlencoded")], "client": ("192.0.2.5", 1)}
        await guarded(scope, receive, send)
        return sent[0]["status"]

    async def burst() -> list[int]:
        return await asyncio.gather(*(post(n) for n in range(30)))

    assert Counter(aio.run(burst())) == {401: FAILURES_PER_CLIENT, 429: 30 - FAILURES_PER_CLIENT}


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_auth_failure_limit_slides_over_a_minute_per_client():
    from profboard.server.auth import FailedTokens

    clock = _Clock()
    failures = FailedTokens(per_client=3, overall=100, window_s=60, clock=clock)
    for _ in range(3):
        assert failures.wait_s("192.0.2.1") == 0
        failures.record("192.0.2.1")
        clock.now += 10
    # Fails at 1000, 1010, 1020; now 1030: the first one leaves the window at 1060.
    assert failures.wait_s("192.0.2.1") == 30
    assert failures.wait_s("192.0.2.2") == 0, "another address is not held back"
    clock.now = 1060
    assert failures.wait_s("192.0.2.1") == 0


def test_auth_failure_limit_keys_ipv6_clients_by_their_64_prefix():
    from profboard.server.auth import FailedTokens

    failures = FailedTokens(per_client=2, overall=100, window_s=60, clock=_Clock())
    failures.record("2001:db8:1:2::1")
    failures.record("2001:db8:1:2:ffff::9")  # the same /64: one host can take any of its addresses
    assert failures.wait_s("2001:db8:1:2::77") > 0
    assert failures.wait_s("2001:db8:1:3::1") == 0
    failures.record("::ffff:192.0.2.7")
    failures.record("192.0.2.7")
    assert failures.wait_s("192.0.2.7") > 0


def test_auth_failure_limit_has_a_ceiling_over_all_clients():
    from profboard.server.auth import FailedTokens

    clock = _Clock()
    failures = FailedTokens(per_client=10, overall=20, window_s=60, clock=clock)
    for n in range(20):  # many addresses, one guess each
        failures.record(f"198.51.100.{n}")
        clock.now += 1
    # Failures at 1000..1019, now 1020: a fresh address waits until the first leaves the window, at 1060.
    assert failures.wait_s("203.0.113.1") == 40
    clock.now = 1060
    assert failures.wait_s("203.0.113.1") == 0
