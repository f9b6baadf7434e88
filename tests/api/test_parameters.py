"""Every API route against hostile query values, in-process on the demo logdir plus a small
snapshot: no answer is a 500, every refusal is a 4xx in the API's error shape.

The routes and their parameters come from the app's OpenAPI schema, so a new route or
parameter is covered without editing this file."""

from __future__ import annotations

import pickle
import shutil
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from profboard.server.app import create_app
from profboard.server.settings import Settings

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples/logdir"
RUN = "loss_sync_before"
DDP = "ddp_straggler_rank1"

HOSTILE = ["nan", "NaN", "inf", "-inf", "Infinity", "1e308", "-1e308", "1e999", "-1", "0", "-0",
           "99999999999999999999999999999", "-99999999999999999999999999999", "0.5", "", " ", "x" * 3000,
           "%", "\x00", "\u202e", "\ud7ff", "1,2,,x", "../../../../etc/passwd", "true", "null", "[]", "{}"]
# Parameter pairs whose values are only hostile together.
PAIRS = [
    {"start_us": "-1e308", "end_us": "1e308"},
    {"start_us": "1e18", "end_us": "-1e18"},
    {"start_us": "1", "end_us": "1"},
    {"start_us": "1.7e15", "end_us": "1.7000000000000001e15"},
    {"start_us": "-1e18", "end_us": "1e18"},
]


def _snapshot() -> dict:
    frames = [{"filename": "/home/me/train.py", "line": 3, "name": "step"}]
    block = {"address": 0, "size": 1024, "requested_size": 1000, "state": "active_allocated", "frames": frames}
    segment = {"device": 0, "address": 0, "total_size": 1024, "stream": 0, "segment_type": "small",
               "allocated_size": 1024, "active_size": 1024, "requested_size": 1000, "blocks": [block]}
    entries = [{"action": "alloc", "addr": 0, "size": 1024, "stream": 0, "frames": frames, "time_us": 1}]
    return {"segments": [segment], "device_traces": [entries]}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("params")
    for run in (RUN, DDP):
        shutil.copytree(DEMO / run, root / run)
    (root / RUN / "memory_snapshot.pickle").write_bytes(pickle.dumps(_snapshot()))
    app = create_app(Settings(logdir=str(root), cache_dir=None, rescan_seconds=3600))
    with TestClient(app, base_url="http://localhost", raise_server_exceptions=False) as c:
        deadline = time.monotonic() + 120
        while any(r["status"] == "loading" for r in c.get("/api/runs").json()["runs"]):
            assert time.monotonic() < deadline, "the runs did not load"
            time.sleep(0.2)
        yield c


def _routes(client) -> list[tuple[str, list[str]]]:
    schema = client.get("/openapi.json").json()
    return [(path, [p["name"] for p in op.get("parameters", []) if p["in"] == "query"])
            for path, item in schema["paths"].items() for method, op in item.items()
            if method == "get" and path.startswith("/api/")]


def _check(response, url: str, params: dict) -> None:
    assert response.status_code < 500, f"{url} {params!r} -> {response.status_code}: {response.text[:500]}"
    if response.status_code >= 400:
        error = response.json()["error"]
        assert error["code"] and error["message"], f"{url} {params!r}: {response.text[:500]}"
        assert "Traceback" not in error["message"]


def _base(path: str) -> dict:
    return {"run": DDP} if path == "/api/distributed" else {"run": RUN}


def _check_all(client, requests: list[tuple[str, dict]]) -> None:
    """`_check` each (path, params) GET, sent from the app's own event loop: through the TestClient,
    each request's hops between this thread and the loop took most of the thousands' time."""
    import httpx

    async def send() -> None:
        transport = httpx.ASGITransport(client.app, raise_app_exceptions=False)  # a 500, as the TestClient's
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as loop_client:
            for path, params in requests:
                _check(await loop_client.get(path, params=params), path, params)

    client.portal.call(send)


def test_every_parameter_of_every_route_takes_hostile_values(client):
    routes = _routes(client)
    assert len(routes) >= 20, routes
    _check_all(client, [(path, {**_base(path), name: value})
                        for path, names in routes for name in names for value in HOSTILE])


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p['start_us']}..{p['end_us']}")
def test_time_ranges_at_the_edges(client, pair):
    """start_us=-1e308&end_us=1e308 divided by zero in the timeline, start_us=nan reached response
    validation in the memory curve: both answered 500."""
    for path, names in _routes(client):
        if "start_us" in names:
            params = {**_base(path), **pair}
            _check(client.get(path, params=params), path, params)
