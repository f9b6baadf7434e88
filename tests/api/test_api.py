"""The HTTP API and the CLI, against the real `profboard` command on a logdir of good and bad runs.

The session logdir holds copies of small fixture runs next to broken ones (one per way a
trace file goes wrong), plus one run linked in as a folder symlink. Every answer is read
through `Server.get`, which fails on a traceback or a 500.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.routing import APIRoute

from profboard.server.api import VIEWS

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO.parent / "shared" / "fixtures"
httpx = pytest.importorskip("httpx", reason="httpx is not installed (pip install -e '.[test]')")

# run name in the session logdir -> fixture folder whose trace files are copied into it
COPIED_RUNS = {
    "loss_sync_after": "h100/loss_sync_after",
    "ddp_resnet50": "h200x4/ddp_resnet50",
    "resnet50_num_workers_0": "kineto_samples/resnet50_num_workers_0",
}
# linked in as a folder symlink, to check that discovery follows it
SYMLINKED_RUN = ("symlinked_run", "h100/compile_graph_breaks")
# copied two folders deep: the run's name is its relative path
NESTED_RUN = ("group/nested_run", "h100/compile_graph_breaks")
# copied in while the server runs
LATE_RUN = ("late_run", "h100/compile_graph_breaks")
GOOD_RUNS = [*COPIED_RUNS, SYMLINKED_RUN[0], NESTED_RUN[0]]
# two good ranks of a DDP run the project recorded, and a third worker whose file is not a trace
PARTLY_BROKEN_RUN = ("ddp_partly_broken", REPO / "tests/data/h200x2/ddp_straggler_rank1")

# broken run -> what its error message must say
BAD_RUNS = {
    "corrupt_gzip": re.compile(r"gzip", re.I),
    "not_json": re.compile(r"not a JSON", re.I),
    "empty": re.compile(r"empty", re.I),
}
TRUNCATED_RUN = "truncated_json"
TRUNCATION_WARNING = re.compile(r"cut short|truncat", re.I)
SELECTION = ("run", "worker", "span")


def _trace_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.endswith((".pt.trace.json", ".pt.trace.json.gz")))


def _write_logdir(root: Path) -> None:
    for name, rel in [*COPIED_RUNS.items(), NESTED_RUN]:
        (root / name).mkdir(parents=True)
        for trace in _trace_files(FIXTURES / rel):
            shutil.copyfile(trace, root / name / trace.name)
    (root / SYMLINKED_RUN[0]).symlink_to(FIXTURES / SYMLINKED_RUN[1], target_is_directory=True)

    # A job killed mid-write: the first 60% of a real trace's JSON, cut wherever that falls.
    source = _trace_files(FIXTURES / "h100/loss_sync_after")[0]
    data = gzip.decompress(source.read_bytes())
    (root / TRUNCATED_RUN).mkdir()
    (root / TRUNCATED_RUN / "worker0.1.pt.trace.json").write_bytes(data[: int(len(data) * 0.6)])

    noise = random.Random(0).randbytes(4096)
    assert not noise.startswith(b"\x1f\x8b")
    (root / "corrupt_gzip").mkdir()
    (root / "corrupt_gzip" / "worker0.1.pt.trace.json.gz").write_bytes(noise)
    (root / "not_json").mkdir()
    (root / "not_json" / "w.1.pt.trace.json").write_text("this is a log file, not a trace\nstep 1 done\n")
    (root / "empty").mkdir()
    (root / "empty" / "w.1.pt.trace.json").write_bytes(b"")

    name, folder = PARTLY_BROKEN_RUN
    (root / name).mkdir()
    for trace in _trace_files(folder):
        shutil.copyfile(trace, root / name / trace.name)
    (root / name / "vm_999.1.pt.trace.json").write_text("rank 2 crashed before writing its trace\n")


@pytest.fixture(scope="session")
def api_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    needed = [*COPIED_RUNS.values(), SYMLINKED_RUN[1], NESTED_RUN[1], LATE_RUN[1]]
    missing = [rel for rel in dict.fromkeys(needed) if not (FIXTURES / rel).is_dir()]
    if missing:
        pytest.skip(f"fixture runs not found under {FIXTURES}: {', '.join(missing)}")
    root = tmp_path_factory.mktemp("api_logdir")
    _write_logdir(root)
    return root


@pytest.fixture(scope="session")
def api_server(api_logdir: Path, start_server, tmp_path_factory: pytest.TempPathFactory):
    """The real `profboard` serving `api_logdir`, with every run loaded or failed."""
    return start_server(api_logdir, tmp_path_factory.mktemp("api_server"),
                        expect=[*GOOD_RUNS, TRUNCATED_RUN, *BAD_RUNS, PARTLY_BROKEN_RUN[0]], timeout=60)


def assert_error(response, status: int, code: str, mentions: str | None = None) -> str:
    """The response is `{"error": {"code", "message"}}` with this status and code; returns the message."""
    assert response.status_code == status, f"{response.request.url} -> {response.status_code}: {response.text}"
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    message = body["error"]["message"]
    assert isinstance(message, str) and message.strip(), body
    if mentions is not None:
        assert mentions in message, body
    return message


# ---------------------------------------------------------------------------------------------
# /api/runs: status of good, broken and truncated runs


def test_good_runs_are_ready_with_the_overview(api_server):
    runs = api_server.runs()
    registered = {v.name for v in VIEWS}
    for name in GOOD_RUNS:
        run = runs[name]
        assert run["status"] == "ready", run
        assert run["error"] is None, run
        assert run["progress"] == pytest.approx(1.0)
        assert run["views"][0] == "overview" and set(run["views"]) <= registered, run
        assert all(f["status"] == "ready" for f in run["files"]), run
        assert set(run["spans"]) == set(run["workers"])


def test_workers_and_spans_come_from_file_names(api_server):
    runs = api_server.runs()
    assert runs["ddp_resnet50"]["workers"] == ["vm_907", "vm_908", "vm_909", "vm_910"]
    assert runs["ddp_resnet50"]["spans"] == {w: ["1"] for w in runs["ddp_resnet50"]["workers"]}
    assert runs["resnet50_num_workers_0"]["spans"] == {"worker0": ["1", "2"]}
    assert runs["loss_sync_after"]["workers"] == ["h100_worker0"]


def test_discovery_follows_a_symlinked_run_folder(api_server):
    assert (api_server.logdir / SYMLINKED_RUN[0]).is_symlink()
    run = api_server.runs()[SYMLINKED_RUN[0]]
    assert run["status"] == "ready" and run["workers"] == ["h100_worker0"], run


@pytest.mark.parametrize("name", sorted(BAD_RUNS))
def test_a_broken_run_shows_a_clear_error(api_server, name):
    run = api_server.runs()[name]
    assert run["status"] == "error", run
    assert run["views"] == [], run
    assert BAD_RUNS[name].search(run["error"] or ""), f"{name}: unclear error {run['error']!r}"
    [file] = run["files"]
    assert file["status"] == "error" and BAD_RUNS[name].search(file["error"]), file


def test_a_truncated_trace_is_ready_with_a_warning(api_server):
    run = api_server.runs()[TRUNCATED_RUN]
    assert run["status"] == "ready" and run["error"] is None, run
    [file] = run["files"]
    assert file["status"] == "ready", file
    assert any(TRUNCATION_WARNING.search(w) for w in file["warnings"]), file["warnings"]
    overview = api_server.get("/api/overview", {"run": TRUNCATED_RUN}).json()
    assert overview["steps"], overview
    assert any(TRUNCATION_WARNING.search(w) for w in overview["warnings"]), overview["warnings"]


def test_concurrent_requests(api_server):
    from concurrent.futures import ThreadPoolExecutor

    selections = _ready_selections(api_server) * 3
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda s: api_server.get("/api/overview", s).status_code, selections))
    assert statuses == [200] * len(selections)


def test_other_runs_are_unaffected_by_broken_ones(api_server):
    for name in GOOD_RUNS:
        assert api_server.get("/api/overview", {"run": name}).status_code == 200


# ---------------------------------------------------------------------------------------------
# /api/overview and error answers


@pytest.mark.parametrize("name", sorted(BAD_RUNS))
def test_overview_of_a_broken_run_is_a_trace_error(api_server, name):
    message = assert_error(api_server.get("/api/overview", {"run": name}), 422, "trace_error", mentions=name)
    assert BAD_RUNS[name].search(message), message


def test_overview_shape(api_server):
    body = api_server.get("/api/overview", {"run": "loss_sync_after"}).json()
    assert set(body) == {"steps", "average", "gpus", "recommendations", "warnings"}
    keys = {"total_us", "kernel_us", "memcpy_us", "memset_us", "communication_us", "runtime_us",
            "dataloader_us", "cpu_exec_us", "other_us"}
    assert [s["step"] for s in body["steps"]] == ["5", "6", "7"]
    for step in body["steps"]:
        assert set(step) == keys | {"step", "start_us", "end_us"}
        assert step["end_us"] - step["start_us"] == pytest.approx(step["total_us"], abs=0.01)
        parts = sum(step[k] for k in keys - {"total_us"})
        assert parts == pytest.approx(step["total_us"], abs=0.01), step
    assert set(body["average"]) == keys
    [gpu] = body["gpus"]
    assert gpu["device"] == 0 and gpu["name"].startswith("NVIDIA H100")
    assert 0 < gpu["utilization_ratio"] <= 1


def test_distributed_compares_every_rank(api_server):
    body = api_server.get("/api/distributed", {"run": "ddp_resnet50"}).json()
    assert body["span"] == "1" and [r["rank"] for r in body["ranks"]] == [0, 1, 2, 3]
    for part in ("overlap", "wait", "comm_ops", "comparison"):
        assert [r["rank"] for r in body[part]] == [0, 1, 2, 3], part
    assert [r["rank"] for r in body["stragglers"]["stragglers"]] == [1]
    views = {v["name"]: v for v in api_server.get("/api/views").json()["views"]}
    assert views["distributed"]["all_workers"] and not views["overview"]["all_workers"]
    runs = api_server.runs()
    assert "distributed" in runs["ddp_resnet50"]["views"]
    assert "distributed" not in runs["loss_sync_after"]["views"]     # one worker
    # every worker's overview names the straggler
    for worker in runs["ddp_resnet50"]["workers"]:
        found = api_server.get("/api/overview", {"run": "ddp_resnet50", "worker": worker}).json()["recommendations"]
        (finding,) = [f for f in found if f["id"] == "straggler"]
        assert finding["numbers"]["straggler_ranks"] == [1]


def test_distributed_leaves_out_an_unreadable_worker(api_server):
    name = PARTLY_BROKEN_RUN[0]
    body = api_server.get("/api/distributed", {"run": name}).json()
    assert [r["worker"] for r in body["ranks"]] == ["vm_681", "vm_682"]
    assert any("vm_999" in w and "left out" in w for w in body["warnings"]), body["warnings"]
    assert [r["rank"] for r in body["stragglers"]["stragglers"]] == [1]
    assert_error(api_server.get("/api/distributed", {"run": name, "span": "2"}), 404, "not_found", "span")
    assert_error(api_server.get("/api/distributed", {"run": "corrupt_gzip"}), 422, "trace_error")


OP_NUMBERS = {"calls", "device_self_us", "device_total_us", "host_self_us", "host_total_us",
              "tc_self_ratio", "tc_total_ratio"}
KERNEL_KEYS = {"name", "calls", "total_us", "mean_us", "max_us", "min_us", "tensor_cores", "tensor_cores_guess",
               "blocks_per_sm", "achieved_occupancy_ratio"}


def test_operators_shape(api_server):
    by_name = api_server.get("/api/operators", {"run": "loss_sync_after"}).json()
    by_shape = api_server.get("/api/operators", {"run": "loss_sync_after", "group_by": "name_shape"}).json()
    assert by_name["group_by"] == "name" and by_shape["group_by"] == "name_shape"
    assert {k for r in by_name["rows"] for k in r} == OP_NUMBERS | {"name", "tc_eligible", "has_call_stack"}
    assert {k for r in by_shape["rows"] for k in r} == OP_NUMBERS | {"name", "input_shape", "tc_eligible",
                                                                       "has_call_stack"}
    calls = {r["name"]: r["calls"] for r in by_name["rows"]}
    for name, count in calls.items():
        assert sum(r["calls"] for r in by_shape["rows"] if r["name"] == name) == count, name
    devices = [r["device_self_us"] for r in by_name["rows"]]
    assert devices == sorted(devices, reverse=True)
    assert calls["aten::convolution_backward"] > 0  # backward ops, run on the autograd thread


def test_operator_stacks(api_server):
    rows = api_server.get("/api/operators", {"run": "loss_sync_after"}).json()["rows"]
    op = next(r for r in rows if r["has_call_stack"])
    body = api_server.get("/api/operators/stacks", {"run": "loss_sync_after", "name": op["name"]}).json()
    assert body["name"] == op["name"] and body["warnings"] == []
    assert sum(r["calls"] for r in body["rows"]) <= op["calls"]
    frame = body["rows"][0]["frames"][0]
    assert set(frame) == {"file", "line", "function"} and frame["file"].endswith(".py") and frame["line"] > 0
    missing = api_server.get("/api/operators/stacks", {"run": "loss_sync_after", "name": "aten::nothing"}).json()
    assert missing["rows"] == [] and "aten::nothing" in missing["warnings"][0]


def test_kernels_shape_and_op_filter(api_server):
    by_name = api_server.get("/api/kernels", {"run": "ddp_resnet50"}).json()
    by_op = api_server.get("/api/kernels", {"run": "ddp_resnet50", "group_by": "name_op"}).json()
    assert {k for r in by_name["rows"] for k in r} == KERNEL_KEYS
    assert {k for r in by_op["rows"] for k in r} == KERNEL_KEYS | {
        "op", "grid", "block", "registers_per_thread", "shared_memory_bytes", "op_tc_eligible"}
    assert sum(r["calls"] for r in by_op["rows"]) == sum(r["calls"] for r in by_name["rows"])
    assert any(r["name"].startswith("ncclDevKernel") for r in by_name["rows"])
    conv = api_server.get("/api/kernels", {"run": "ddp_resnet50", "op": "aten::conv2d"}).json()
    assert conv["op"] == "aten::conv2d" and 0 < len(conv["rows"]) < len(by_name["rows"])
    assert not any(r["name"].startswith("ncclDevKernel") for r in conv["rows"])


def test_trace_lanes_window_event_and_search(api_server):
    sel = {"run": "loss_sync_after"}
    lanes = api_server.get("/api/trace/lanes", sel).json()
    assert {lane["kind"] for lane in lanes["lanes"]} == {"cpu", "gpu"}
    assert lanes["start_us"] < lanes["end_us"] and [s["step"] for s in lanes["steps"]] == ["5", "6", "7"]
    whole = api_server.get("/api/trace/window", {**sel, "width_px": 800}).json()
    total = sum(len(l["boxes"]["id"]) + sum(l["merged"]["count"]) for l in whole["lanes"])
    assert total == sum(lane["events"] for lane in lanes["lanes"])
    found = api_server.get("/api/trace/search", {**sel, "q": "^cudaLaunchKernel$", "regex": "true"}).json()
    assert found["total"] > 0 and all(m["name"] == "cudaLaunchKernel" for m in found["matches"])
    event = api_server.get("/api/trace/event", {**sel, "id": found["matches"][0]["id"]}).json()
    assert event["kind"] == "runtime" and "launches" in {l["relation"] for l in event["links"]}
    assert_error(api_server.get("/api/trace/event", {**sel, "id": 10**9}), 404, "not_found")
    assert_error(api_server.get("/api/trace/search", {**sel, "q": "(", "regex": "true"}), 400, "bad_parameter", "regular")
    assert_error(api_server.get("/api/trace/window", {**sel, "start_us": 10, "end_us": 5}), 400, "bad_parameter")
    counters = api_server.get("/api/trace/counters", {**sel, "width_px": 50}).json()["series"]
    assert "gpu0_utilization" in {c["id"] for c in counters} and all(len(c["value"]) == 50 for c in counters)


def test_trace_raw_is_the_original_file(api_server, api_logdir):
    response = api_server.get("/api/trace/raw", {"run": "loss_sync_after"})
    [original] = _trace_files(api_logdir / "loss_sync_after")
    assert response.content == original.read_bytes()
    assert original.name in response.headers["content-disposition"]


@pytest.mark.parametrize("params, status, code, mentions", [
    pytest.param({"run": "no_such_run"}, 404, "not_found", "no_such_run", id="unknown-run"),
    pytest.param({"run": "loss_sync_after", "worker": "nobody"}, 404, "not_found", "nobody", id="unknown-worker"),
    pytest.param({"run": "loss_sync_after", "span": "2"}, 404, "not_found", None, id="span-past-the-end"),
    pytest.param({"run": "loss_sync_after", "span": "0"}, 404, "not_found", None, id="span-0"),
    pytest.param({"run": "loss_sync_after", "span": "-1"}, 404, "not_found", None, id="span-negative"),
    pytest.param({"run": "loss_sync_after", "span": "one"}, 404, "not_found", None, id="span-not-a-number"),
    pytest.param({"run": "loss_sync_after", "span": ""}, 404, "not_found", None, id="span-empty"),
    pytest.param({"run": "../../etc"}, 404, "not_found", None, id="run-path-traversal"),
    pytest.param({"run": "/etc/passwd"}, 404, "not_found", None, id="run-absolute-path"),
    pytest.param({"run": "loss_sync_after", "worker": "../h100_worker0"}, 404, "not_found", None,
                 id="worker-path-traversal"),
    pytest.param({}, 400, "bad_parameter", "run", id="missing-run"),
    pytest.param({"worker": "h100_worker0"}, 400, "bad_parameter", "run", id="worker-without-run"),
])
def test_overview_errors(api_server, params, status, code, mentions):
    assert_error(api_server.get("/api/overview", params), status, code, mentions)


def test_unknown_api_path_is_a_404_in_the_error_shape(api_server):
    assert_error(api_server.get("/api/no_such_view", {"run": "loss_sync_after"}), 404, "not_found")


def test_odd_requests_never_show_a_traceback(api_server):
    odd = [
        ("/api/overview", {"run": "\x00"}),
        ("/api/overview", {"run": "é" * 5000}),
        ("/api/overview", {"run": "loss_sync_after", "span": "9" * 400}),
        ("/api/overview", {"run": "loss_sync_after", "span": "١"}),  # a non-ASCII digit
        ("/api/overview", {"run": "loss_sync_after", "worker": "%s%n{0}"}),
        ("/api/runs", {"run": "whatever"}),
        ("/api/overview?run=loss_sync_after&run=empty", None),
        ("/api/overview?run=%ff%fe", None),
        ("/api/overview/", {"run": "loss_sync_after"}),
    ]
    for path, params in odd:
        response = api_server.get(path, params)  # asserts: no traceback, no 500
        if response.status_code >= 400 and response.headers["content-type"].startswith("application/json"):
            assert set(response.json()) == {"error"}, response.text


# ---------------------------------------------------------------------------------------------
# Every registered view: good ids answer, bad ids and bad parameters get the error shape


def _api_routes(view) -> list[APIRoute]:
    return [r for r in view.router.routes if isinstance(r, APIRoute) and r.path.startswith("/api/") and "GET" in r.methods]


def _ready_selections(api_server) -> list[dict[str, str]]:
    out = []
    for name, run in api_server.runs().items():
        for file in run["files"]:
            if file["status"] == "ready":
                out.append({"run": name, "worker": file["worker"], "span": file["span"]})
    return out


def _valid_value(schema: dict) -> str | None:
    if schema.get("examples"):
        return str(schema["examples"][0])
    if "enum" in schema:
        return str(schema["enum"][0])
    if "default" in schema:
        return str(schema["default"])
    return {"integer": "1", "number": "1", "boolean": "true"}.get(schema.get("type"))


def _invalid_value(schema: dict) -> str | None:
    if "enum" in schema:
        return "no_such_choice"
    return {"integer": "one", "number": "one", "boolean": "maybe"}.get(schema.get("type"))


def _flat_schema(schema: dict) -> dict:
    """A parameter's schema with `anyOf: [X, null]` (an optional parameter) reduced to X."""
    for variant in schema.get("anyOf", []):
        if variant.get("type") != "null":
            return variant
    return schema


@pytest.mark.parametrize("view", [v for v in VIEWS if v.of_run is None], ids=lambda v: v.name)
def test_every_view_checks_its_ids_and_parameters(api_server, view):
    """(Views of a run's snapshot files rather than its traces: tests/api/test_memory_api.py.)"""
    # A view of every worker of a span takes no worker.
    chosen = tuple(p for p in SELECTION if not (view.all_workers and p == "worker"))
    routes = _api_routes(view)
    assert routes, f"view {view.name} registers no GET /api/ route"
    openapi = api_server.get("/openapi.json").json()
    assert view.name in {v["name"] for v in api_server.get("/api/views").json()["views"]}
    selections = _ready_selections(api_server)
    assert len(selections) >= 9
    for route in routes:
        path = route.path
        parameters = openapi["paths"][path]["get"].get("parameters", [])
        query = {p["name"]: _flat_schema(p.get("schema", {})) for p in parameters if p["in"] == "query"}
        assert set(chosen) <= set(query), f"{path} does not take {'/'.join(chosen)}: {sorted(query)}"
        required = {p["name"] for p in parameters if p.get("required")} - set(chosen)
        extra = {name: _valid_value(query[name]) for name in required}
        assert None not in extra.values(), f"{path}: cannot make up a value for a required parameter: {extra}"

        # every loaded worker/span of every run answers
        for selection in selections:
            selection = {k: v for k, v in selection.items() if k in chosen}
            response = api_server.get(path, {**selection, **extra})
            assert response.status_code == 200, f"{path} {selection}: {response.text}"
            if response.headers["content-type"].startswith("application/json"):
                assert "warnings" in response.json()

        good = {"run": "loss_sync_after", **extra}
        assert_error(api_server.get(path, extra), 400, "bad_parameter", "run")
        assert_error(api_server.get(path, {**good, "run": "no_such_run"}), 404, "not_found", "no_such_run")
        if "worker" in chosen:
            assert_error(api_server.get(path, {**good, "worker": "nobody"}), 404, "not_found", "nobody")
        for span in ("2", "0", "x"):
            assert_error(api_server.get(path, {**good, "span": span}), 404, "not_found")
        for name in BAD_RUNS:
            assert_error(api_server.get(path, {**good, "run": name}), 422, "trace_error")
        assert api_server.get(path, {**good, "run": TRUNCATED_RUN}).status_code == 200

        # each view-specific parameter refuses a value of the wrong type or outside its choices
        for name, schema in query.items():
            if name in chosen:
                continue
            bad = _invalid_value(schema)
            if bad is not None:
                assert_error(api_server.get(path, {**good, name: bad}), 400, "bad_parameter", name)


# ---------------------------------------------------------------------------------------------
# Schema and documentation


def test_openapi_lists_the_api(api_server):
    paths = api_server.get("/openapi.json").json()["paths"]
    for path in ("/api/runs", "/api/views", "/api/overview", "/api/operators", "/api/operators/stacks", "/api/kernels"):
        assert "get" in paths[path], path
    for view in VIEWS:
        for route in _api_routes(view):
            assert route.path in paths, route.path


def _walk_routes(routes):
    """Routes with a path, looking inside included routers (newer FastAPI wraps them)."""
    for route in routes:
        if getattr(route, "path", None) is not None:
            yield route
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _walk_routes(inner.routes)


def _app_api_routes(tmp_path: Path) -> set[tuple[str, str]]:
    """(method, path) of every /api/ route: those in the OpenAPI schema and those hidden from it."""
    from profboard.server.app import create_app
    from profboard.server.settings import Settings

    app = create_app(Settings(logdir=str(tmp_path)))
    out = {(method.upper(), path) for path, item in app.openapi()["paths"].items() if path.startswith("/api/")
           for method in item if method.upper() in ("GET", "POST", "PUT", "PATCH", "DELETE")}
    for route in _walk_routes(app.routes):
        if route.path.startswith("/api/"):
            out |= {(method, route.path) for method in getattr(route, "methods", None) or {"GET"} if method != "HEAD"}
    return out


def test_every_api_route_is_in_the_readme(tmp_path):
    readme = REPO / "README.md"
    text = readme.read_text() if readme.exists() else ""
    match = re.search(r"^## HTTP API\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if match is None:
        pytest.xfail("README API section pending")
    section = match.group(1)
    routes = _app_api_routes(tmp_path)
    assert ("GET", "/api/runs") in routes
    missing = [f"{m} {p}" for m, p in sorted(routes) if not re.search(rf"{m} {re.escape(p)}(?![\w/{{])", section)]
    assert not missing, f"routes missing from README.md's '## HTTP API' section: {missing}"


# ---------------------------------------------------------------------------------------------
# The logdir is watched


def test_a_run_added_while_serving_appears(api_server, tmp_path):
    name, rel = LATE_RUN
    # Built beside the logdir and moved in whole, so the watcher never sees a half-written file.
    staging = tmp_path / name
    staging.mkdir()
    for trace in _trace_files(FIXTURES / rel):
        shutil.copyfile(trace, staging / trace.name)
    shutil.move(staging, api_server.logdir / name)  # a rename: both live under pytest's basetemp
    added = time.monotonic()
    deadline = added + 12  # the store rescans every 5 s
    while name not in api_server.runs():
        assert time.monotonic() < deadline, f"{name} not listed 12 s after it was added"
        time.sleep(0.25)
    # Until it is loaded, its views answer 409 "loading"; then 200.
    deadline = time.monotonic() + 30
    while (response := api_server.get("/api/overview", {"run": name})).status_code != 200:
        assert_error(response, 409, "loading", name)
        assert time.monotonic() < deadline, f"{name} still loading after 30 s"
        time.sleep(0.1)
    assert api_server.runs()[name]["status"] == "ready"


def test_reopening_from_the_cache_gives_the_same_answers(api_server, start_server, tmp_path):
    runs = api_server.runs()
    selections = _ready_selections(api_server)
    first = {json.dumps(s): api_server.get("/api/overview", s).json() for s in selections}
    entries = sorted(p for p in api_server.cache_dir.iterdir() if not p.name.startswith("."))
    assert len(entries) >= len(selections), "the first server cached fewer traces than it loaded"
    # A damaged entry is ignored (the trace is parsed again), not an error.
    (entries[0] / "events.arrow").write_bytes(b"not arrow")
    again = start_server(api_server.logdir, tmp_path, expect=runs, cache_dir=api_server.cache_dir)
    try:
        assert {n: r["status"] for n, r in again.runs().items()} == {n: r["status"] for n, r in runs.items()}
        for key, body in first.items():
            assert again.get("/api/overview", json.loads(key)).json() == body, key
    finally:
        again.stop()


# ---------------------------------------------------------------------------------------------
# The CLI


def _profboard(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    script = Path(sys.executable).with_name("profboard")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "profboard.server.cli"]
    result = subprocess.run([*command, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


@pytest.mark.parametrize("args", [["--help"], ["summary", "--help"], ["--version"]], ids=" ".join)
def test_cli_help(args):
    result = _profboard(*args)
    assert result.returncode == 0, result.stderr
    assert "profboard" in result.stdout


def test_cli_summary_prints_the_overview(api_server, api_logdir, tmp_path):
    result = _profboard("summary", str(api_logdir), "--run", "loss_sync_after", "--span", "1", "--json",
                        "--cache-dir", str(tmp_path / "cache"))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert set(summary) == {"steps", "average", "gpus", "recommendations", "warnings"}
    # The CLI mirrors the API.
    assert summary == api_server.get("/api/overview", {"run": "loss_sync_after", "span": "1"}).json()


def test_cli_summary_of_a_truncated_trace_warns(api_logdir, tmp_path):
    result = _profboard("summary", str(api_logdir), "--run", TRUNCATED_RUN, "--json", "--no-cache")
    assert result.returncode == 0, result.stderr
    assert any(TRUNCATION_WARNING.search(w) for w in json.loads(result.stdout)["warnings"])


@pytest.mark.parametrize("args, code, says", [
    pytest.param(["--run", "not_json"], 1, "not a JSON", id="not-json"),
    pytest.param(["--run", "empty"], 1, "empty", id="empty"),
    pytest.param(["--run", "corrupt_gzip"], 1, "gzip", id="corrupt-gzip"),
    pytest.param(["--run", "no_such_run"], 2, "no_such_run", id="unknown-run"),
    pytest.param(["--run", "loss_sync_after", "--span", "7"], 2, "span", id="unknown-span"),
    pytest.param(["--run", "loss_sync_after", "--worker", "nobody"], 2, "nobody", id="unknown-worker"),
    pytest.param([], 2, "--run", id="several-runs-no-run"),
])
def test_cli_summary_errors_are_clear(api_logdir, args, code, says):
    result = _profboard("summary", str(api_logdir), "--json", "--no-cache", *args)
    assert result.returncode == code, (result.returncode, result.stderr)
    assert says in result.stderr, result.stderr
    assert result.stdout == ""


def test_cli_summary_refuses_a_gzip_bomb(tmp_path):
    (tmp_path / "bomb").mkdir()
    # 64 MiB of zeros in about 64 KiB; refused once it inflates past 1 MiB.
    (tmp_path / "bomb" / "w.1.pt.trace.json.gz").write_bytes(gzip.compress(b"0" * (64 << 20), compresslevel=9))
    result = _profboard("summary", str(tmp_path), "--json", "--no-cache", "--max-trace-size", "1M")
    assert result.returncode == 1, result.stderr
    assert "limit" in result.stderr and "--max-trace-size" in result.stderr, result.stderr


def test_cli_summary_of_a_missing_logdir(tmp_path):
    result = _profboard("summary", str(tmp_path / "nowhere"), "--json", "--no-cache")
    assert result.returncode != 0
    assert "nowhere" in result.stderr


def test_server_on_a_missing_logdir_says_so(start_server, tmp_path):
    server = start_server(tmp_path / "nowhere", tmp_path, timeout=30)
    body = server.get("/api/runs").json()
    assert body["runs"] == []
    assert "nowhere" in (body["error"] or ""), body
    assert_error(server.get("/api/overview", {"run": "nowhere"}), 404, "not_found")
    server.stop()


def test_server_log_has_no_unhandled_errors(api_server):
    # Runs last in this file: by now every request above has been answered.
    log = api_server.log()
    assert "unhandled error" not in log and "Traceback" not in log, log


def _children(pid: int) -> set[int]:
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("how", ["terminate", "kill"])
def test_loader_processes_end_with_the_server(start_server, api_logdir, tmp_path, how):
    """Killed or terminated, the server leaves no loader processes behind holding memory."""
    server = start_server(api_logdir, tmp_path, expect=GOOD_RUNS)
    workers = _children(server.process.pid)
    assert workers, "the server runs no loader processes"
    getattr(server.process, how)()
    server.process.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{w}").exists() for w in workers):
        time.sleep(0.2)
    left = [w for w in workers if Path(f"/proc/{w}").exists()
            and Path(f"/proc/{w}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
    assert not left, f"loader processes outlived the server: {left}"
