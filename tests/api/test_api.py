"""The HTTP API and the CLI on a logdir of good and bad runs, all made from data the repository ships.

The module's app is `create_app` in this process (tests/conftest.py, `start_app`): its logdir holds
copies of demo and tests/data runs, a synthetic PyTorch 1.x run, two spans of one worker, a run
linked in as a folder symlink and one two folders deep, next to broken runs (one per way a trace
file goes wrong). Every answer is read through `get`, which fails on a traceback or a 500. The CLI
runs in this process too; smoke tests start the real `profboard` command.
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

from profboard.server.api import SLICES
from profboard.server.api.runs import Runs
from profboard.server.cli import main as cli_main
from synth import legacy_training, write_trace

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples/logdir"
DATA = REPO / "tests/data"
httpx = pytest.importorskip("httpx", reason="httpx is not installed (pip install -e '.[test]')")

# run name in the module's logdir -> folder whose trace files are copied into it
COPIED_RUNS = {
    "loss_sync_after": DEMO / "loss_sync_after",
    "ddp_straggler": DATA / "h200x2/ddp_straggler_rank1",
}
LEGACY_RUN = "legacy_v100"  # tests/synth.py's PyTorch 1.x steps
# one worker's spans, by time stamp: as text "10" sorts before "9", as numbers after
TWO_SPANS_RUN = ("two_spans", {9: DATA / "h200/item_logging", 10: DATA / "h200/bf16_transformer"})
# linked in as a folder symlink, to check that discovery follows it
SYMLINKED_RUN = ("symlinked_run", DEMO / "compile_graph_breaks")
# copied two folders deep: the run's name is its relative path
NESTED_RUN = ("group/nested_run", DEMO / "compile_graph_breaks")
GOOD_RUNS = [*COPIED_RUNS, LEGACY_RUN, TWO_SPANS_RUN[0], SYMLINKED_RUN[0], NESTED_RUN[0]]
# two good ranks of a DDP run the project recorded, and a third worker whose file is not a trace
PARTLY_BROKEN_RUN = ("ddp_partly_broken", DATA / "h200x2/ddp_straggler_rank0")

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


def _raw(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())


def _write_logdir(root: Path) -> None:
    for name, folder in [*COPIED_RUNS.items(), NESTED_RUN]:
        (root / name).mkdir(parents=True)
        for trace in _trace_files(folder):
            shutil.copyfile(trace, root / name / trace.name)
    (root / SYMLINKED_RUN[0]).symlink_to(SYMLINKED_RUN[1], target_is_directory=True)
    write_trace(root, LEGACY_RUN, "worker0", 1, legacy_training().build())
    name, spans = TWO_SPANS_RUN
    (root / name).mkdir()
    for stamp, folder in spans.items():
        [trace] = _trace_files(folder)
        shutil.copyfile(trace, root / name / f"worker0.{stamp}.pt.trace.json.gz")

    # A job killed mid-write: the first 60% of a real trace's JSON, cut wherever that falls.
    [source] = _trace_files(COPIED_RUNS["loss_sync_after"])
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


@pytest.fixture(scope="module")
def api_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("api_logdir")
    _write_logdir(root)
    return root


@pytest.fixture(scope="module")
def api(api_logdir: Path, start_app, tmp_path_factory: pytest.TempPathFactory):
    """profboard serving `api_logdir` in this process, with every run loaded or failed."""
    app = start_app(api_logdir, cache_dir=tmp_path_factory.mktemp("api_cache"),
                    expect=[*GOOD_RUNS, TRUNCATED_RUN, *BAD_RUNS, PARTLY_BROKEN_RUN[0]])
    yield app
    app.stop()


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


def test_good_runs_are_ready_with_the_overview(api):
    runs = api.runs()
    registered = {e.name for e in SLICES}
    for name in GOOD_RUNS:
        run = runs[name]
        assert run["status"] == "ready", run
        assert run["error"] is None, run
        assert run["progress"] == pytest.approx(1.0)
        assert run["views"][0] == "overview" and set(run["views"]) <= registered, run
        assert all(f["status"] == "ready" for f in run["files"]), run
        assert set(run["spans"]) == set(run["workers"])


def test_the_run_list_is_the_documented_shape(api):
    # /api/runs is encoded by hand (server/api/runs.py): it must stay what its model documents.
    answer = api.get("/api/runs").json()
    assert Runs.model_validate(answer).model_dump() == answer
    assert any(run["files"] and run["views"] for run in answer["runs"])


def test_workers_and_spans_come_from_file_names(api):
    runs = api.runs()
    assert runs["ddp_straggler"]["workers"] == ["vm_681", "vm_682"]
    assert runs["ddp_straggler"]["spans"] == {w: ["1"] for w in runs["ddp_straggler"]["workers"]}
    assert runs["loss_sync_after"]["workers"] == ["vm_471"]
    assert runs[LEGACY_RUN]["spans"] == {"worker0": ["1"]}


def test_spans_are_ordered_by_time_stamp_as_numbers(api):
    name, spans = TWO_SPANS_RUN
    assert api.runs()[name]["spans"] == {"worker0": ["1", "2"]}
    for span, stamp in (("1", 9), ("2", 10)):
        raw = api.get("/api/trace/raw", {"run": name, "span": span})
        assert f"worker0.{stamp}." in raw.headers["content-disposition"]
        assert raw.content == _trace_files(spans[stamp])[0].read_bytes()


def test_discovery_follows_a_symlinked_run_folder(api):
    assert (api.logdir / SYMLINKED_RUN[0]).is_symlink()
    run = api.runs()[SYMLINKED_RUN[0]]
    assert run["status"] == "ready" and run["workers"] == ["vm_568"], run


@pytest.mark.parametrize("name", sorted(BAD_RUNS))
def test_a_broken_run_shows_a_clear_error(api, name):
    run = api.runs()[name]
    assert run["status"] == "error", run
    assert run["views"] == [], run
    assert BAD_RUNS[name].search(run["error"] or ""), f"{name}: unclear error {run['error']!r}"
    [file] = run["files"]
    assert file["status"] == "error" and BAD_RUNS[name].search(file["error"]), file


def test_a_truncated_trace_is_ready_with_a_warning(api):
    run = api.runs()[TRUNCATED_RUN]
    assert run["status"] == "ready" and run["error"] is None, run
    [file] = run["files"]
    assert file["status"] == "ready", file
    assert any(TRUNCATION_WARNING.search(w) for w in file["warnings"]), file["warnings"]
    overview = api.get("/api/overview", {"run": TRUNCATED_RUN}).json()
    assert overview["steps"], overview
    assert any(TRUNCATION_WARNING.search(w) for w in overview["warnings"]), overview["warnings"]


def test_concurrent_requests(api):
    from concurrent.futures import ThreadPoolExecutor

    selections = _ready_selections(api) * 3
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda s: api.get("/api/overview", s).status_code, selections))
    assert statuses == [200] * len(selections)


def test_other_runs_are_unaffected_by_broken_ones(api):
    for name in GOOD_RUNS:
        assert api.get("/api/overview", {"run": name}).status_code == 200


# ---------------------------------------------------------------------------------------------
# /api/overview and error answers


@pytest.mark.parametrize("name", sorted(BAD_RUNS))
def test_overview_of_a_broken_run_is_a_trace_error(api, name):
    message = assert_error(api.get("/api/overview", {"run": name}), 422, "trace_error", mentions=name)
    assert BAD_RUNS[name].search(message), message


def _loss_sync_trace() -> dict:
    [path] = _trace_files(COPIED_RUNS["loss_sync_after"])
    return _raw(path)


def _host_steps(trace: dict) -> list[str]:
    """N of each host `ProfilerStep#N` (not its GPU-side copy), in time order."""
    steps = sorted((e["ts"], e["name"]) for e in trace["traceEvents"] if e.get("ph") == "X"
                   and e.get("cat") in ("cpu_op", "user_annotation") and e["name"].startswith("ProfilerStep#"))
    return [name.removeprefix("ProfilerStep#") for _, name in steps]


def test_overview_shape(api):
    body = api.get("/api/overview", {"run": "loss_sync_after"}).json()
    assert set(body) == {"steps", "average", "gpus", "idle", "recommendations", "warnings"}
    keys = {"total_us", "kernel_us", "memcpy_us", "memset_us", "communication_us", "runtime_us",
            "dataloader_us", "cpu_exec_us", "other_us"}
    trace = _loss_sync_trace()
    assert [s["step"] for s in body["steps"]] == _host_steps(trace)
    for step in body["steps"]:
        assert set(step) == keys | {"step", "start_us", "end_us"}
        assert step["end_us"] - step["start_us"] == pytest.approx(step["total_us"], abs=0.01)
        parts = sum(step[k] for k in keys - {"total_us"})
        assert parts == pytest.approx(step["total_us"], abs=0.01), step
    assert set(body["average"]) == keys
    [gpu] = body["gpus"]
    assert gpu["device"] == 0 and gpu["name"] == trace["deviceProperties"][0]["name"]
    assert 0 < gpu["utilization_ratio"] <= 1


def test_distributed_compares_every_rank(api):
    body = api.get("/api/distributed", {"run": "ddp_straggler"}).json()
    assert body["span"] == "1" and [r["rank"] for r in body["ranks"]] == [0, 1]
    for part in ("overlap", "wait", "comm_ops", "comparison"):
        assert [r["rank"] for r in body[part]] == [0, 1], part
    assert [r["rank"] for r in body["stragglers"]["stragglers"]] == [1]
    views = {v["name"]: v for v in api.get("/api/views").json()["views"]}
    assert views["distributed"]["all_workers"] and not views["overview"]["all_workers"]
    runs = api.runs()
    assert "distributed" in runs["ddp_straggler"]["views"]
    assert "distributed" not in runs["loss_sync_after"]["views"]     # one worker
    # every worker's overview names the straggler
    for worker in runs["ddp_straggler"]["workers"]:
        found = api.get("/api/overview", {"run": "ddp_straggler", "worker": worker}).json()["recommendations"]
        (finding,) = [f for f in found if f["id"] == "straggler"]
        assert finding["numbers"]["straggler_ranks"] == [1]


def test_distributed_leaves_out_an_unreadable_worker(api):
    name = PARTLY_BROKEN_RUN[0]
    body = api.get("/api/distributed", {"run": name}).json()
    assert [r["worker"] for r in body["ranks"]] == ["vm_645", "vm_646"]
    assert any("vm_999" in w and "left out" in w for w in body["warnings"]), body["warnings"]
    assert [r["rank"] for r in body["stragglers"]["stragglers"]] == [0]
    assert_error(api.get("/api/distributed", {"run": name, "span": "2"}), 404, "not_found", "span")
    assert_error(api.get("/api/distributed", {"run": "corrupt_gzip"}), 422, "trace_error")


OP_NUMBERS = {"calls", "device_self_us", "device_total_us", "host_self_us", "host_total_us",
              "tc_self_ratio", "tc_total_ratio"}
KERNEL_KEYS = {"name", "calls", "total_us", "mean_us", "max_us", "min_us", "tensor_cores", "tensor_cores_guess",
               "blocks_per_sm", "achieved_occupancy_ratio"}


def test_operators_shape(api):
    by_name = api.get("/api/operators", {"run": "loss_sync_after"}).json()
    by_shape = api.get("/api/operators", {"run": "loss_sync_after", "group_by": "name_shape"}).json()
    assert by_name["group_by"] == "name" and by_shape["group_by"] == "name_shape"
    assert {k for r in by_name["rows"] for k in r} == OP_NUMBERS | {"name", "tc_eligible", "has_call_stack"}
    assert {k for r in by_shape["rows"] for k in r} == OP_NUMBERS | {"name", "input_shape", "tc_eligible",
                                                                       "has_call_stack"}
    calls = {r["name"]: r["calls"] for r in by_name["rows"]}
    for name, count in calls.items():
        assert sum(r["calls"] for r in by_shape["rows"] if r["name"] == name) == count, name
    devices = [r["device_self_us"] for r in by_name["rows"]]
    assert devices == sorted(devices, reverse=True)
    # ops of every thread: the autograd thread's backward ops too, not only the one running the steps
    host = [e for e in _loss_sync_trace()["traceEvents"] if e.get("cat") in ("cpu_op", "user_annotation")]
    step_thread = next(e["tid"] for e in host if e["name"].startswith("ProfilerStep#"))
    backward = {e["name"] for e in host if e["cat"] == "cpu_op" and e["tid"] != step_thread}
    assert "aten::nll_loss_backward" in backward and backward <= {n for n, c in calls.items() if c > 0}


def test_operator_stacks(api):
    rows = api.get("/api/operators", {"run": "loss_sync_after"}).json()["rows"]
    op = next(r for r in rows if r["has_call_stack"])
    body = api.get("/api/operators/stacks", {"run": "loss_sync_after", "name": op["name"]}).json()
    assert body["name"] == op["name"] and body["warnings"] == []
    assert sum(r["calls"] for r in body["rows"]) <= op["calls"]
    frame = body["rows"][0]["frames"][0]
    # path: where the file was found under a --source-root (none given here)
    assert set(frame) == {"file", "line", "function", "path"} and frame["path"] is None
    assert frame["file"].endswith(".py") and frame["line"] > 0
    missing = api.get("/api/operators/stacks", {"run": "loss_sync_after", "name": "aten::nothing"}).json()
    assert missing["rows"] == [] and "aten::nothing" in missing["warnings"][0]


def test_kernels_shape_and_op_filter(api):
    by_name = api.get("/api/kernels", {"run": "ddp_straggler"}).json()
    by_op = api.get("/api/kernels", {"run": "ddp_straggler", "group_by": "name_op"}).json()
    assert {k for r in by_name["rows"] for k in r} == KERNEL_KEYS
    assert {k for r in by_op["rows"] for k in r} == KERNEL_KEYS | {
        "op", "grid", "block", "registers_per_thread", "shared_memory_bytes", "op_tc_eligible"}
    assert sum(r["calls"] for r in by_op["rows"]) == sum(r["calls"] for r in by_name["rows"])
    assert any(r["name"].startswith("ncclDevKernel") for r in by_name["rows"])
    op = next(r["op"] for r in by_op["rows"] if not r["name"].startswith("ncclDevKernel"))
    mine = api.get("/api/kernels", {"run": "ddp_straggler", "op": op}).json()
    assert mine["op"] == op and 0 < len(mine["rows"]) < len(by_name["rows"])
    assert {r["name"] for r in mine["rows"]} == {r["name"] for r in by_op["rows"] if r["op"] == op}
    assert not any(r["name"].startswith("ncclDevKernel") for r in mine["rows"])


def test_trace_lanes_window_event_and_search(api):
    sel = {"run": "loss_sync_after"}
    lanes = api.get("/api/trace/lanes", sel).json()
    assert {lane["kind"] for lane in lanes["lanes"]} == {"cpu", "gpu"}
    assert lanes["start_us"] < lanes["end_us"]
    assert [s["step"] for s in lanes["steps"]] == _host_steps(_loss_sync_trace())
    whole = api.get("/api/trace/window", {**sel, "width_px": 800}).json()
    total = sum(len(l["boxes"]["id"]) + sum(l["merged"]["count"]) for l in whole["lanes"])
    assert total == sum(lane["events"] for lane in lanes["lanes"])
    found = api.get("/api/trace/search", {**sel, "q": "^cudaLaunchKernel$", "regex": "true"}).json()
    assert found["total"] > 0 and all(m["name"] == "cudaLaunchKernel" for m in found["matches"])
    event = api.get("/api/trace/event", {**sel, "id": found["matches"][0]["id"]}).json()
    assert event["kind"] == "runtime" and "launches" in {l["relation"] for l in event["links"]}
    assert_error(api.get("/api/trace/event", {**sel, "id": 10**9}), 404, "not_found")
    assert_error(api.get("/api/trace/search", {**sel, "q": "(", "regex": "true"}), 400, "bad_parameter", "regular")
    assert_error(api.get("/api/trace/window", {**sel, "start_us": 10, "end_us": 5}), 400, "bad_parameter")
    counters = api.get("/api/trace/counters", {**sel, "width_px": 50}).json()["series"]
    assert "gpu0_utilization" in {c["id"] for c in counters} and all(len(c["value"]) == 50 for c in counters)


def test_trace_raw_is_the_original_file(api, api_logdir):
    response = api.get("/api/trace/raw", {"run": "loss_sync_after"})
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
    pytest.param({"run": "loss_sync_after", "worker": "../vm_471"}, 404, "not_found", None,
                 id="worker-path-traversal"),
    pytest.param({}, 400, "bad_parameter", "run", id="missing-run"),
    pytest.param({"worker": "vm_471"}, 400, "bad_parameter", "run", id="worker-without-run"),
])
def test_overview_errors(api, params, status, code, mentions):
    assert_error(api.get("/api/overview", params), status, code, mentions)


def test_unknown_api_path_is_a_404_in_the_error_shape(api):
    assert_error(api.get("/api/no_such_view", {"run": "loss_sync_after"}), 404, "not_found")


def test_odd_requests_never_show_a_traceback(api):
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
        response = api.get(path, params)  # asserts: no traceback, no 500
        if response.status_code >= 400 and response.headers["content-type"].startswith("application/json"):
            assert set(response.json()) == {"error"}, response.text


# ---------------------------------------------------------------------------------------------
# Every registered view: good ids answer, bad ids and bad parameters get the error shape


def _api_routes(view) -> list[APIRoute]:
    return [r for r in view.router.routes if isinstance(r, APIRoute) and r.path.startswith("/api/") and "GET" in r.methods]


def _ready_selections(api) -> list[dict[str, str]]:
    out = []
    for name, run in api.runs().items():
        for file in run["files"]:
            if file["status"] == "ready":
                out.append({"run": name, "worker": file["worker"], "span": file["span"]})
    return out


# Routes whose event id must name an event of one kind: on a trace where the made-up id names another
# kind they answer 404 with this message (tests/api/test_trace_collective.py checks their answers).
ANSWERS_ONLY_ITS_KIND = {"/api/trace/collective": "event 0 "}


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


@pytest.mark.parametrize("entry", [e for e in SLICES if e.of_run is None], ids=lambda e: e.name)
def test_every_view_checks_its_ids_and_parameters(api, entry):
    """(Views of a run's snapshot files rather than its traces: tests/api/test_memory_api.py.)"""
    view = entry.view
    # A view of every worker of a span takes no worker.
    chosen = tuple(p for p in SELECTION if not (entry.all_workers and p == "worker"))
    routes = _api_routes(view)
    assert routes, f"view {view.name} registers no GET /api/ route"
    openapi = api.get("/openapi.json").json()
    assert view.name in {v["name"] for v in api.get("/api/views").json()["views"]}
    selections = _ready_selections(api)
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
            response = api.get(path, {**selection, **extra})
            if path in ANSWERS_ONLY_ITS_KIND and response.status_code == 404:
                assert response.json()["error"]["message"].startswith(ANSWERS_ONLY_ITS_KIND[path]), response.text
                continue
            assert response.status_code == 200, f"{path} {selection}: {response.text}"
            if response.headers["content-type"].startswith("application/json"):
                assert "warnings" in response.json()

        good = {"run": "loss_sync_after", **extra}
        assert_error(api.get(path, extra), 400, "bad_parameter", "run")
        assert_error(api.get(path, {**good, "run": "no_such_run"}), 404, "not_found", "no_such_run")
        if "worker" in chosen:
            assert_error(api.get(path, {**good, "worker": "nobody"}), 404, "not_found", "nobody")
        for span in ("2", "0", "x"):
            assert_error(api.get(path, {**good, "span": span}), 404, "not_found")
        for name in BAD_RUNS:
            assert_error(api.get(path, {**good, "run": name}), 422, "trace_error")
        truncated = api.get(path, {**good, "run": TRUNCATED_RUN})
        assert truncated.status_code == 200 or (path in ANSWERS_ONLY_ITS_KIND and truncated.status_code == 404), \
            truncated.text

        # each view-specific parameter refuses a value of the wrong type or outside its choices
        for name, schema in query.items():
            if name in chosen:
                continue
            bad = _invalid_value(schema)
            if bad is not None:
                assert_error(api.get(path, {**good, name: bad}), 400, "bad_parameter", name)


# ---------------------------------------------------------------------------------------------
# Schema and documentation


def test_openapi_lists_the_api(api):
    paths = api.get("/openapi.json").json()["paths"]
    for path in ("/api/runs", "/api/views", "/api/overview", "/api/operators", "/api/operators/stacks", "/api/kernels"):
        assert "get" in paths[path], path
    for entry in SLICES:
        for route in _api_routes(entry.view):
            assert route.path in paths, route.path


def _walk_routes(routes):
    """Routes with a path, looking inside included routers (newer FastAPI wraps them)."""
    for route in routes:
        if getattr(route, "path", None) is not None:
            yield route
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _walk_routes(inner.routes)


@pytest.fixture(scope="module")
def api_routes(api) -> set[tuple[str, str]]:
    """(method, path) of every /api/ route: those in the OpenAPI schema and those hidden from it."""
    app = api.app
    out = {(method.upper(), path) for path, item in app.openapi()["paths"].items() if path.startswith("/api/")
           for method in item if method.upper() in ("GET", "POST", "PUT", "PATCH", "DELETE")}
    for route in _walk_routes(app.routes):
        if route.path.startswith("/api/"):
            out |= {(method, route.path) for method in getattr(route, "methods", None) or {"GET"} if method != "HEAD"}
    return out


def _undocumented(readme: str, routes: set[tuple[str, str]]) -> list[str]:
    """The routes that `readme` does not name in its '## HTTP API' section: all of them when it has none."""
    match = re.search(r"^## HTTP API\s*$(.*?)(?=^## |\Z)", readme, re.M | re.S)
    section = match.group(1) if match else ""
    return [f"{m} {p}" for m, p in sorted(routes) if not re.search(rf"{m} {re.escape(p)}(?![\w/{{])", section)]


def test_every_api_route_is_in_the_readme(api_routes):
    assert ("GET", "/api/runs") in api_routes
    missing = _undocumented((REPO / "README.md").read_text(), api_routes)
    assert not missing, f"routes missing from README.md's '## HTTP API' section (or the section itself): {missing}"


def test_the_readme_check_fails_without_the_section_or_a_route(api_routes):
    """It once turned itself off (an xfail) when the heading was missing."""
    readme = (REPO / "README.md").read_text()
    everything = [f"{m} {p}" for m, p in sorted(api_routes)]
    assert _undocumented(readme.replace("## HTTP API", "## API"), api_routes) == everything
    assert "GET /api/runs" in _undocumented(readme.replace("GET /api/runs", "GET runs"), api_routes)


# ---------------------------------------------------------------------------------------------
# The logdir is watched, the parse cache reopened


def test_a_run_added_while_serving_appears(start_app, tmp_path):
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    watching = start_app(logdir, rescan_seconds=0.5)
    name = "late_run"
    # Built beside the logdir and moved in whole, so the watcher never sees a half-written file.
    staging = tmp_path / name
    shutil.copytree(DATA / "h200/item_logging", staging)
    shutil.move(staging, logdir / name)  # a rename: both live under pytest's basetemp
    deadline = time.monotonic() + 10
    while name not in watching.runs():
        assert time.monotonic() < deadline, f"{name} not listed 10 s after it was added"
        time.sleep(0.1)
    # Until it is loaded, its views answer 409 "loading"; then 200.
    deadline = time.monotonic() + 30
    while (response := watching.get("/api/overview", {"run": name})).status_code != 200:
        assert_error(response, 409, "loading", name)
        assert time.monotonic() < deadline, f"{name} still loading after 30 s"
        time.sleep(0.1)
    assert watching.runs()[name]["status"] == "ready"
    watching.stop()


def test_reopening_from_the_cache_gives_the_same_answers(api, start_app):
    runs = api.runs()
    selections = _ready_selections(api)
    first = {json.dumps(s): api.get("/api/overview", s).json() for s in selections}
    entries = sorted(p for p in api.cache_dir.iterdir() if not p.name.startswith("."))
    assert len(entries) >= len(selections), "the first server cached fewer traces than it loaded"
    # A damaged entry is ignored (the trace is parsed again), not an error.
    (entries[0] / "events.arrow").write_bytes(b"not arrow")
    again = start_app(api.logdir, expect=runs, cache_dir=api.cache_dir)
    try:
        assert {n: r["status"] for n, r in again.runs().items()} == {n: r["status"] for n, r in runs.items()}
        for key, body in first.items():
            assert again.get("/api/overview", json.loads(key)).json() == body, key
    finally:
        again.stop()


def test_a_missing_logdir_is_said(start_app, tmp_path):
    served = start_app(tmp_path / "nowhere")
    body = served.get("/api/runs").json()
    assert body["runs"] == []
    assert "nowhere" in (body["error"] or ""), body
    assert_error(served.get("/api/overview", {"run": "nowhere"}), 404, "not_found")
    served.stop()


def test_log_has_no_unhandled_errors(api):
    # Runs after the tests above in this file: by now every request they sent has been answered.
    log = api.log()
    assert "unhandled error" not in log and "Traceback" not in log, log


# ---------------------------------------------------------------------------------------------
# The CLI, in this process (`profboard` is `main`)


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """`profboard ARGS`: exit status, stdout and stderr."""
    try:
        code = cli_main(list(args))
    except SystemExit as exc:  # argparse's --help, --version and refusals
        code = exc.code
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err, out.err
    return code, out.out, out.err


@pytest.mark.parametrize("args", [["--help"], ["summary", "--help"], ["--version"]], ids=" ".join)
def test_cli_help(capsys, args):
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    assert "profboard" in out


def test_cli_summary_of_a_truncated_trace_warns(capsys, api_logdir):
    code, out, err = cli(capsys, "summary", str(api_logdir), "--run", TRUNCATED_RUN, "--json", "--no-cache")
    assert code == 0, err
    assert any(TRUNCATION_WARNING.search(w) for w in json.loads(out)["warnings"])


@pytest.mark.parametrize("args, code, says", [
    pytest.param(["--run", "not_json"], 1, "not a JSON", id="not-json"),
    pytest.param(["--run", "empty"], 1, "empty", id="empty"),
    pytest.param(["--run", "corrupt_gzip"], 1, "gzip", id="corrupt-gzip"),
    pytest.param(["--run", "no_such_run"], 2, "no_such_run", id="unknown-run"),
    pytest.param(["--run", "loss_sync_after", "--span", "7"], 2, "span", id="unknown-span"),
    pytest.param(["--run", "loss_sync_after", "--worker", "nobody"], 2, "nobody", id="unknown-worker"),
    pytest.param([], 2, "--run", id="several-runs-no-run"),
])
def test_cli_summary_errors_are_clear(capsys, api_logdir, args, code, says):
    status, out, err = cli(capsys, "summary", str(api_logdir), "--json", "--no-cache", *args)
    assert status == code, (status, err)
    assert says in err, err
    assert out == ""


def test_cli_summary_refuses_a_gzip_bomb(capsys, tmp_path):
    (tmp_path / "bomb").mkdir()
    # 64 MiB of zeros in about 64 KiB; refused once it inflates past 1 MiB.
    (tmp_path / "bomb" / "w.1.pt.trace.json.gz").write_bytes(gzip.compress(b"0" * (64 << 20), compresslevel=9))
    code, _, err = cli(capsys, "summary", str(tmp_path), "--json", "--no-cache", "--max-trace-size", "1M")
    assert code == 1, err
    assert "limit" in err and "--max-trace-size" in err, err


def test_cli_summary_of_a_missing_logdir(capsys, tmp_path):
    code, _, err = cli(capsys, "summary", str(tmp_path / "nowhere"), "--json", "--no-cache")
    assert code != 0
    assert "nowhere" in err


# ---------------------------------------------------------------------------------------------
# Smoke tests: the real `profboard` command


def test_real_cli_summary_prints_the_overview(api, api_logdir, tmp_path):
    script = Path(sys.executable).with_name("profboard")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "profboard.server.cli"]
    result = subprocess.run([*command, "summary", str(api_logdir), "--run", "loss_sync_after", "--span", "1",
                             "--json", "--cache-dir", str(tmp_path / "cache")],
                            capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    summary = json.loads(result.stdout)
    assert set(summary) == {"steps", "average", "gpus", "idle", "recommendations", "warnings"}
    # The CLI mirrors the API.
    assert summary == api.get("/api/overview", {"run": "loss_sync_after", "span": "1"}).json()
    # Again, on the warm store: the stored overview, read without the trace's tables or pandas (-X importtime
    # lists every module the process imported).
    again = subprocess.run([sys.executable, "-X", "importtime", "-m", "profboard.server.cli", "summary", str(api_logdir),
                            "--run", "loss_sync_after", "--span", "1", "--json", "--cache-dir", str(tmp_path / "cache")],
                           capture_output=True, text=True, timeout=120, cwd=REPO)
    assert again.returncode == 0 and json.loads(again.stdout) == summary, again.stderr
    imported = {line.rsplit("|", 1)[1].strip() for line in again.stderr.splitlines() if line.startswith("import time:")}
    assert "profboard.server.items" in imported and "pandas" not in imported


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
def test_real_server_answers_and_leaves_no_loader_behind(start_server, api, tmp_path, how):
    """The command serves what the app in this process serves; killed or terminated, it leaves no
    loader processes behind holding memory."""
    logdir = tmp_path / "logdir"
    for name in ("loss_sync_after", "corrupt_gzip"):
        shutil.copytree(api.logdir / name, logdir / name)
    server = start_server(logdir, tmp_path, expect=["loss_sync_after", "corrupt_gzip"])
    runs = server.runs()
    assert runs["loss_sync_after"]["status"] == "ready" and runs["corrupt_gzip"]["status"] == "error", runs
    for path in ("/api/overview", "/api/kernels"):
        assert server.get(path, {"run": "loss_sync_after"}).json() == api.get(path, {"run": "loss_sync_after"}).json()
    assert_error(server.get("/api/overview", {"run": "corrupt_gzip"}), 422, "trace_error")
    assert 'data-view="overview"' in server.get("/overview", {"run": "loss_sync_after"}).text
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
    assert "unhandled error" not in server.log() and "Traceback" not in server.log(), server.log()


def test_a_loader_whose_server_died_while_it_started_leaves():
    """A loader's pool starts it on demand; when the server died during its imports, the loader found
    init as its parent, watched init instead, and stayed forever (with its resource tracker)."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    loader = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "from profboard.server.loaders import watch_parent\n"
                               "watch_parent(int(sys.argv[1])); time.sleep(60)", gone.stdout.strip()])
    try:
        assert loader.wait(timeout=20) == 0
    finally:
        loader.kill()


def test_the_compile_view_of_a_trace_without_compiled_code_is_computed_when_asked(api):
    # Not listed for such a trace, its answer is not stored (items.py): asked anyway, it is computed.
    assert "compile" not in api.runs()["loss_sync_after"]["views"]
    body = api.get("/api/compile", {"run": "loss_sync_after"}).json()
    assert body["regions"]["summary"]["calls"] == 0 and body["regions"]["locations"] == []
    assert body["launch"]["steps"], body["launch"]
