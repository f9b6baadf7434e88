"""A logdir on S3, against a local S3 server (moto's server mode on a free 127.0.0.1 port).

The bucket holds real traces from the repository: a gzip run, the same trace as plain JSON, a
two-rank DDP run, a memory snapshot, and an archived (Glacier) object that cannot be read. The real `profboard`
serves `s3://bucket/logs` with the endpoint and fake credentials from the environment; a
second server serves a local copy of the same runs, and every answer must be the same.
No other network address is used: AWS_ENDPOINT_URL points every S3 call at the local server.
"""

from __future__ import annotations

import gzip
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

boto3 = pytest.importorskip("boto3", reason="boto3 is not installed (pip install -e '.[test]')")
pytest.importorskip("s3fs", reason="s3fs is not installed (pip install -e '.[test]')")
moto_server = pytest.importorskip("moto.server", reason="moto[server] is not installed (pip install -e '.[test]')")

BUCKET = "profboard-test"
PREFIX = "logs"
LOGDIR = f"s3://{BUCKET}/{PREFIX}"
FAKE_SECRET = "fake-secret-that-must-never-be-logged"
DDP = REPO / "tests/data/h200x2/ddp_straggler_rank1"
LOSS = REPO / "examples/logdir/loss_sync_after"
SNAPSHOT = REPO / "examples/logdir/resnet50_fp32/memory_snapshot.pickle.gz"
READY_RUNS = ["loss_sync_gzip", "loss_sync_plain", "ddp_straggler"]
ARCHIVED_RUN = "archived"


def _traces(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.endswith((".pt.trace.json", ".pt.trace.json.gz")))


def _layout() -> dict[str, bytes]:
    """Key under the prefix -> bytes, for the runs that can be read."""
    [loss] = _traces(LOSS)
    files = {f"loss_sync_gzip/{loss.name}": loss.read_bytes(),
             f"loss_sync_plain/{loss.name.removesuffix('.gz')}": gzip.decompress(loss.read_bytes()),
             f"loss_sync_gzip/{SNAPSHOT.name}": SNAPSHOT.read_bytes(),
             "notes/README.txt": b"not a trace: ignored"}
    for trace in _traces(DDP):
        files[f"ddp_straggler/{trace.name}"] = trace.read_bytes()
    return files


@pytest.fixture(scope="module")
def s3():
    """A local S3 server, the environment that points S3 clients at it, and a client."""
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    with pytest.MonkeyPatch.context() as env:
        # Child processes (the server, its loaders) inherit these; AWS_ENDPOINT_URL is honoured
        # by botocore and so by s3fs. Fake credentials: moto accepts any.
        for name in [n for n in os.environ if n.startswith(("AWS_", "FSSPEC_"))]:
            env.delenv(name)
        env.setenv("AWS_ENDPOINT_URL", endpoint)
        env.setenv("AWS_ACCESS_KEY_ID", "testing")
        env.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET)
        env.setenv("AWS_DEFAULT_REGION", "us-east-1")
        env.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never probe 169.254.169.254
        client = boto3.client("s3", endpoint_url=endpoint)
        yield endpoint, client
    server.stop()


@pytest.fixture(scope="module")
def bucket(s3, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Uploads the runs; returns a local folder holding the same readable runs."""
    _, client = s3
    client.create_bucket(Bucket=BUCKET)
    local = tmp_path_factory.mktemp("local_logdir") / PREFIX
    for key, data in _layout().items():
        client.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{key}", Body=data)
        (local / key).parent.mkdir(parents=True, exist_ok=True)
        (local / key).write_bytes(data)
    [loss] = _traces(LOSS)
    # An archived object is listed but cannot be read until restored: GetObject fails.
    client.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{ARCHIVED_RUN}/{loss.name}", Body=loss.read_bytes(),
                      StorageClass="GLACIER")
    return local


@pytest.fixture(scope="module")
def servers(bucket, start_server, tmp_path_factory):
    """(remote, local): `profboard` on the bucket and on the local copy, started side by side."""
    with ThreadPoolExecutor(2) as pool:
        remote = pool.submit(start_server, LOGDIR, tmp_path_factory.mktemp("remote_server"),
                             expect=[*READY_RUNS, ARCHIVED_RUN])
        local = pool.submit(start_server, bucket, tmp_path_factory.mktemp("local_server"), expect=READY_RUNS)
        return remote.result(), local.result()


@pytest.fixture(scope="module")
def remote(servers):
    return servers[0]


@pytest.fixture(scope="module")
def local(servers):
    return servers[1]


def _selections(server) -> list[dict[str, str]]:
    return [{"run": name, "worker": w, "span": s}
            for name, run in server.runs().items() if run["status"] == "ready"
            for w, spans in run["spans"].items() for s in spans]


def test_remote_runs_are_listed_with_workers_and_spans(remote, local):
    remote_runs, local_runs = remote.runs(), local.runs()
    assert set(remote_runs) == {*READY_RUNS, ARCHIVED_RUN}, remote_runs
    for name in READY_RUNS:
        got, want = remote_runs[name], local_runs[name]
        assert got["status"] == "ready", got
        for key in ("workers", "spans", "views", "snapshots"):
            assert got[key] == want[key], (name, key)
    assert remote_runs["ddp_straggler"]["workers"] == ["vm_681", "vm_682"]
    assert "distributed" in remote_runs["ddp_straggler"]["views"]
    assert remote_runs["loss_sync_gzip"]["snapshots"] == [SNAPSHOT.name]


@pytest.mark.parametrize("path", ["/api/overview", "/api/operators", "/api/kernels"])
def test_remote_answers_match_the_local_copy(remote, local, path):
    selections = _selections(remote)
    assert len(selections) == 4  # gzip, plain, two DDP ranks
    for sel in selections:
        assert remote.get(path, sel).json() == local.get(path, sel).json(), (path, sel)


def test_remote_gzip_and_plain_json_give_the_same_overview(remote):
    gz = remote.get("/api/overview", {"run": "loss_sync_gzip"}).json()
    plain = remote.get("/api/overview", {"run": "loss_sync_plain"}).json()
    assert gz["steps"] and gz["steps"] == plain["steps"]


def test_remote_distributed_view_matches_the_local_copy(remote, local):
    params = {"run": "ddp_straggler"}
    assert remote.get("/api/distributed", params).json() == local.get("/api/distributed", params).json()


def test_remote_raw_download_is_the_original_object(remote, bucket):
    response = remote.get("/api/trace/raw", {"run": "loss_sync_gzip"})
    [original] = _traces(bucket / "loss_sync_gzip")
    assert response.status_code == 200 and response.content == original.read_bytes()
    assert original.name in response.headers["content-disposition"]


def test_remote_memory_snapshot_loads(remote):
    response = remote.get("/api/snapshot", {"run": "loss_sync_gzip", "file": SNAPSHOT.name}, timeout=60)
    assert response.status_code == 200, response.text


def test_remote_unreadable_object_is_an_error_of_its_run_only(remote):
    runs = remote.runs()
    archived = runs[ARCHIVED_RUN]
    assert archived["status"] == "error", archived
    assert "permission" in archived["error"] and "storage class" in archived["error"], archived["error"]
    assert all(runs[name]["status"] == "ready" for name in READY_RUNS)
    response = remote.get("/api/overview", {"run": ARCHIVED_RUN})
    assert response.status_code == 422 and response.json()["error"]["code"] == "trace_error"


def test_remote_file_uploaded_while_serving_appears(remote, s3):
    _, client = s3
    [trace] = _traces(DDP)[:1]
    client.put_object(Bucket=BUCKET, Key=f"{PREFIX}/late_run/{trace.name}", Body=trace.read_bytes())
    deadline = time.monotonic() + 15  # the store rescans every 5 s
    while "late_run" not in remote.runs():
        assert time.monotonic() < deadline, "late_run not listed 15 s after it was uploaded"
        time.sleep(0.25)
    runs = remote.wait_until_loaded(["late_run"], timeout=30)
    assert runs["late_run"]["status"] == "ready" and runs["late_run"]["workers"] == ["vm_681"]


def test_remote_server_never_logs_the_secret(remote):
    assert FAKE_SECRET not in remote.log()


@pytest.mark.parametrize("logdir, says", [
    pytest.param("s3://no-such-bucket-here/logs", "The specified bucket does not exist", id="bucket"),
    pytest.param(f"s3://{BUCKET}/no/such/prefix", "nothing found at s3://profboard-test/no/such/prefix (no such bucket",
                 id="prefix"),
])
def test_remote_missing_bucket_or_prefix_is_a_clear_message(bucket, logdir, says):
    # The store's own scan, as the server runs it (the message is /api/runs' "error"), without
    # the cost of starting a server per case.
    from profboard.server.settings import Settings
    from profboard.server.store import TraceStore

    store = TraceStore(Settings(logdir=logdir))
    try:
        store.rescan()
        assert store.runs() == []
        assert store.discovery_error is not None
        assert store.discovery_error.startswith(f"cannot list the logdir {logdir}: ") and says in store.discovery_error
    finally:
        store.close()


def test_remote_storage_option_flag_sets_the_endpoint(s3, bucket, start_server, tmp_path, monkeypatch):
    endpoint, _ = s3
    # Port 1 refuses connections: only the flag's endpoint can reach the bucket, in the server
    # and in the loader processes it spawns.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    # One run's folder as the logdir: the run is named after it.
    server = start_server(f"{LOGDIR}/loss_sync_gzip", tmp_path, expect=["loss_sync_gzip"],
                          extra_args=["--storage-option", f"endpoint_url={endpoint}"])
    runs = server.runs()
    assert runs["loss_sync_gzip"]["status"] == "ready", runs["loss_sync_gzip"]
    assert server.get("/api/overview", {"run": "loss_sync_gzip"}).json()["steps"]


@pytest.mark.parametrize("option, says", [
    pytest.param("secret=abc", "environment variables", id="secret"),
    pytest.param("no-equals-sign", "KEY=VALUE", id="malformed"),
])
def test_remote_storage_option_refuses_bad_options(option, says):
    done = subprocess.run([sys.executable, "-m", "profboard.server.cli", "--logdir", LOGDIR, "--port", "1",
                           "--storage-option", option], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2 and says in done.stderr, done.stderr
    assert "abc" not in done.stderr


def test_remote_store_that_never_answers_does_not_block_the_server(bucket, start_server, tmp_path, monkeypatch):
    # A socket that takes connections and never answers: S3 calls wait for their timeouts and
    # retries (minutes); the server must answer meanwhile, its first scan running in the background.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{silent.getsockname()[1]}")
        server = start_server(LOGDIR, tmp_path, timeout=60)
        body = server.get("/api/runs", timeout=5).json()
        assert body == {"runs": [], "error": None, "notes": []}
        assert server.get("/", timeout=5).status_code == 200
        server.stop()
