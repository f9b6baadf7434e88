"""Opening and inflating trace files (server/files.py, server/inflate.py, server/trace/read.py):
special files are refused at once, and a gzip bomb is refused within its limit."""

from __future__ import annotations

import gzip
import os
import threading
from pathlib import Path

import pytest

from processes import memory_rise
from profboard.server import inflate
from profboard.server.trace.decode import TraceFormatError
from profboard.server.trace.read import read_trace_bytes


def read_in_thread(path: str, timeout: float = 5.0, **kwargs) -> BaseException | object:
    """read_trace_bytes(path) with a deadline: what it returned or raised, or fail if it hangs."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(read_trace_bytes(path, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        # Unblock the reader (it waits for a writer on the FIFO) so the thread can end.
        if os.path.exists(path):
            with open(path, "wb"):
                pass
        pytest.fail(f"reading {path} did not return within {timeout} s")
    return outcome[0]


@pytest.mark.parametrize("name", ["w.1.pt.trace.json", "w.1.pt.trace.json.gz"])
def test_fifo_named_like_a_trace_is_refused_at_once(tmp_path, name):
    path = tmp_path / name
    os.mkfifo(path)
    outcome = read_in_thread(str(path))
    assert isinstance(outcome, TraceFormatError) and "FIFO" in str(outcome)


def test_link_to_a_device_is_refused(tmp_path):
    path = tmp_path / "w.1.pt.trace.json"
    path.symlink_to("/dev/zero")
    outcome = read_in_thread(str(path))
    assert isinstance(outcome, TraceFormatError) and "device" in str(outcome)


def read_peak(path, limit: int) -> tuple[object, int]:
    """(bytes read or the refusal, how far resident memory rose) for reading `path` in a fresh process."""
    return memory_rise("from profboard.server.trace.read import read_trace_bytes",
                       "len(read_trace_bytes(sys.argv[1], max_bytes=int(sys.argv[2])).data)", str(path), str(limit))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads peak memory from /proc")
def test_gzip_bomb_is_refused_within_its_limit(tmp_path):
    """Refusing a bomb takes its limit in memory plus a few MiB, not twice the limit."""
    limit = 128 << 20
    path = tmp_path / "bomb.1.pt.trace.json.gz"
    path.write_bytes(gzip.compress(b"\0" * (3 * limit), 6))
    outcome, peak = read_peak(path, limit)
    assert "limit" in outcome
    assert peak < limit + (8 << 20), f"peak {peak / 2**20:.0f} MiB for a {limit >> 20} MiB limit"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads peak memory from /proc")
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_a_trace_takes_its_size_once(tmp_path, gz):
    """A file under the limit is held once (not as pieces joined at the end): a few MiB over its size."""
    data = b'{"traceEvents": [' + b" " * (96 << 20) + b"]}"
    path = tmp_path / ("w.1.pt.trace.json" + (".gz" if gz else ""))
    path.write_bytes(gzip.compress(data, 1) if gz else data)
    outcome, peak = read_peak(path, 1 << 30)
    assert outcome == len(data)
    assert peak < len(data) + (8 << 20), f"peak {peak / 2**20:.0f} MiB for {len(data) >> 20} MiB"


REAL_GZ = sorted(Path(__file__).resolve().parents[2].glob("examples/logdir/*/*.pt.trace.json.gz"))


@pytest.mark.skipif(inflate.isal_zlib is None, reason="isal is installed only where it has wheels (pyproject.toml)")
@pytest.mark.parametrize("path", REAL_GZ[:3], ids=lambda p: p.parent.name)
def test_isal_inflates_a_healthy_stream_as_zlib_does(monkeypatch, path):
    expected = gzip.decompress(path.read_bytes())
    # zlib is not asked: ISA-L alone inflates a healthy stream.
    monkeypatch.setattr(inflate.zlib, "decompressobj", None)
    with open(path, "rb") as fh:
        inflated = inflate.gunzip_capped(fh, 1 << 30)
    assert inflated.data == expected
    assert inflated.corrupt is None and not inflated.cut_short


def test_a_stream_isal_finds_damaged_is_inflated_again_by_zlib(tmp_path):
    data = b'{"traceEvents": [' + b'{"ph": "X", "name": "op", "ts": 1, "dur": 2},' * 50_000 + b"{}]}"
    packed = bytearray(gzip.compress(data))
    packed[len(packed) // 2:len(packed) // 2 + 64] = bytes(64)
    path = tmp_path / "damaged.1.pt.trace.json.gz"
    path.write_bytes(packed)
    with open(path, "rb") as fh:
        inflated = inflate.gunzip_capped(fh, 1 << 30)
    # zlib's salvage (ISA-L's inflater cannot be copied): what came before the damage, in zlib's words.
    assert inflated.corrupt is not None and "while decompressing data" in inflated.corrupt
    assert len(inflated.data) > len(data) // 4 and inflated.data[:100_000] == data[:100_000]
