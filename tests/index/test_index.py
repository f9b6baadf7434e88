"""`profboard index`: real traces indexed in this process and on a real Dask LocalCluster of two
worker processes give the same entries byte for byte; a garbage rank is reported and the rest of
its run works; a store on a local S3 server (moto) is filled by the cluster and served without
parsing a trace; bad input exits with 2."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="dask[distributed] is not installed (pip install -e '.[index]')")

from profboard.server.index import index  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests/data/h200x2"
GARBAGE = "vm_999.1796119907666078999.pt.trace.json"


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "profboard.server.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def _files(store: Path) -> dict[str, bytes]:
    """Relative path -> bytes of every file of every entry in a local store."""
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.glob("*/*")) if p.is_file()}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two real DDP runs; the straggler run has a third rank that is not JSON."""
    root = tmp_path_factory.mktemp("index") / "logs"
    for run in ("ddp_balanced", "ddp_straggler_rank0"):
        shutil.copytree(DATA / run, root / run)
    (root / "ddp_straggler_rank0" / GARBAGE).write_bytes(b"\x00 not a trace {{{" * 64)
    return root


@pytest.fixture(scope="module")
def indexed(logdir: Path, tmp_path_factory: pytest.TempPathFactory):
    """(store, report) of the logdir indexed in this process."""
    store = tmp_path_factory.mktemp("in_process")
    return store, index(str(logdir), str(store), workers=0)


def test_dask_and_in_process_give_identical_entries(logdir, indexed, tmp_path):
    store, report = indexed
    on_dask = index(str(logdir), str(tmp_path), workers=2)
    for got in (report, on_dask):
        assert (got.total, got.indexed, got.present) == (5, 4, 0)
        [failed] = got.failures
        assert failed.path.endswith(GARBAGE) and "\n" not in failed.reason and failed.reason
    here, there = _files(store), _files(tmp_path)
    assert len(here) == 4 * 9  # meta.json, four tables, the items of load (views, steps, breakdown, summary)
    assert any("/summary-" in name for name in here)
    assert here.keys() == there.keys() and all(here[name] == there[name] for name in here)


def test_a_second_index_finds_everything_present(logdir, indexed):
    store, _ = indexed
    again = index(str(logdir), str(store), workers=0)
    assert (again.indexed, again.present, len(again.failures)) == (0, 4, 1)


def test_the_command_lists_the_garbage_rank_and_exits_1(logdir, tmp_path):
    done = _cli("index", str(logdir), "--cache-dir", str(tmp_path), "--workers", "0")
    assert done.returncode == 1, done.stderr
    assert f"cannot read {logdir / 'ddp_straggler_rank0' / GARBAGE}: " in done.stderr
    assert "5 traces: 4 indexed, 0 already in the store, 1 could not be read" in done.stderr


def test_server_shows_the_garbage_rank_as_its_workers_error(logdir, indexed, start_server, tmp_path):
    store, _ = indexed
    server = start_server(logdir, tmp_path, expect=["ddp_balanced", "ddp_straggler_rank0"], cache_dir=store)
    run = server.runs()["ddp_straggler_rank0"]
    assert run["status"] == "ready" and run["error"].startswith("vm_999 span 1: "), run
    assert server.get("/api/overview", {"run": "ddp_straggler_rank0", "worker": "vm_645"}).json()["steps"]
    assert server.get("/api/distributed", {"run": "ddp_straggler_rank0"}).status_code == 200


# `profboard` whose index gives up on a scheduler after 1 s: the unreachable one is tried for 10 s otherwise.
_QUICK_CLI = ("import sys; import profboard.server.index as index; index.SCHEDULER_TIMEOUT = '1s'; "
              "from profboard.server.cli import main; sys.exit(main())")


@pytest.mark.parametrize("args, says", [
    pytest.param(["/no/such/logdir"], "profboard index: cannot list /no/such/logdir: ", id="logdir"),
    pytest.param([str(DATA / "fsdp"), "--scheduler", "tcp://127.0.0.1:1"],
                 "profboard index: cannot reach the Dask scheduler at tcp://127.0.0.1:1: ", id="scheduler"),
])
def test_bad_input_exits_2_with_one_line(args, says, tmp_path):
    done = subprocess.run([sys.executable, "-c", _QUICK_CLI, "index", *args, "--cache-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 2 and done.stderr.startswith(says) and done.stderr.count("\n") == 1, done.stderr


# A store on S3: a local moto server, as tests/api/test_remote.py uses.
BUCKET = "profboard-index"
STORE = f"s3://{BUCKET}/cache"


@pytest.fixture
def s3(tmp_path, monkeypatch):
    pytest.importorskip("s3fs", reason="s3fs is not installed (pip install -e '.[test]')")
    moto_server = pytest.importorskip("moto.server", reason="moto[server] is not installed (pip install -e '.[test]')")
    import boto3

    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    for name in [n for n in os.environ if n.startswith(("AWS_", "FSSPEC_"))]:
        monkeypatch.delenv(name)
    # Child processes (Dask workers, the server, `profboard summary`) inherit these; the shared store's
    # local mirror goes under TMPDIR.
    for name, value in {"AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                        "AWS_EC2_METADATA_DISABLED": "true", "TMPDIR": str(tmp_path)}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    # fsspec keeps one filesystem per set of arguments, whatever the environment: one made by an earlier
    # test in this process (tests/api/test_remote.py's) would still talk to that test's stopped server.
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    client = boto3.client("s3", endpoint_url=f"http://{host}:{port}")
    client.create_bucket(Bucket=BUCKET)
    yield client
    s3fs.S3FileSystem.clear_instance_cache()
    server.stop()


def test_a_cluster_fills_an_s3_store_that_is_served_without_parsing(s3, tmp_path, start_server, monkeypatch):
    logdir = tmp_path / "logs"
    shutil.copytree(DATA / "ddp_balanced", logdir / "ddp_balanced")
    local = tmp_path / "local_store"
    index(str(logdir), str(local), workers=0)
    report = index(str(logdir), STORE, workers=2)
    assert (report.indexed, report.failures) == (2, [])
    objects = {o["Key"].removeprefix("cache/"): s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
               for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert objects == _files(local)
    before = _cli("summary", str(logdir), "--worker", "vm_762", "--cache-dir", str(local))
    assert before.returncode == 0, before.stderr

    # Each trace becomes garbage of its size and modification time: its key stays, and parsing it fails.
    for trace in logdir.glob("*/*.gz"):
        st = trace.stat()
        trace.write_bytes(gzip.compress(b"x")[:1].ljust(st.st_size, b"\0"))
        os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = _cli("summary", str(logdir), "--worker", "vm_762", "--cache-dir", STORE)
    assert after.returncode == 0 and after.stdout == before.stdout, after.stderr
    # The server reaches the store through --storage-option alone (port 1 refuses connections): a
    # local logdir with a shared store takes the flag for the store.
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    server = start_server(logdir, tmp_path / "server", expect=["ddp_balanced"],
                          extra_args=["--cache-dir", STORE, "--storage-option", f"endpoint_url={endpoint}"])
    run = server.runs()["ddp_balanced"]
    assert run["status"] == "ready" and run["error"] is None, run
    overview = server.get("/api/overview", {"run": "ddp_balanced", "worker": "vm_762"}).json()
    assert overview["steps"]
    assert server.get("/api/distributed", {"run": "ddp_balanced"}).status_code == 200


def test_the_server_and_summary_never_import_dask():
    code = ("import sys; import profboard.server.app, profboard.server.store, profboard.server.cli; "
            "profboard.server.cli._index_parser(); "
            "assert not {'dask', 'distributed'} & set(sys.modules), sorted({'dask', 'distributed'} & set(sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr


def test_a_damaged_shared_entry_is_checked_and_the_trace_parsed_again(s3, tmp_path, caplog):
    from profboard.server.index import traces
    from profboard.server.trace.keys import entry_key
    from profboard.server.trace.load import store_trace

    logdir = tmp_path / "logs"
    shutil.copytree(DATA / "ddp_balanced", logdir / "ddp_balanced")
    assert index(str(logdir), STORE, workers=0).indexed == 2
    trace = traces(str(logdir))[0]
    key = f"cache/{entry_key(trace.path, trace.size, trace.mtime)}/events.arrow"
    size = s3.head_object(Bucket=BUCKET, Key=key)["ContentLength"]
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"\xff" * size)  # the size recorded, other bytes
    entry, tables = store_trace(trace.path, trace.size, trace.mtime, [STORE])
    assert "the bytes do not match their checksum" in caplog.text
    assert entry is not None and len(tables.events) == entry.rows["events"] > 0
