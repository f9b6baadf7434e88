"""Reading damaged or odd trace files (server/trace/{read,decode,tables,load}.py).

Each case is a tiny file: what can be recovered is kept with a warning; what cannot raises
TraceFormatError with a message meant for the user.
"""

from __future__ import annotations

import gzip
import json
import random
import time
import tracemalloc

import pytest

from profboard.server.trace.decode import TraceFormatError
from profboard.server.trace.load import load_trace, parse_trace_bytes
from profboard.server.trace.read import read_trace_bytes
from profboard.server.trace.schema import Kind
from profboard.server.trace.tables import MAX_TEXT_CHARS
from synth import Trace, to_bytes, write_trace


def small_trace() -> Trace:
    t = Trace()
    t.device(0)
    t.step(1, 0, 100)
    t.op("aten::mm", 10, 20)
    t.launch(20, 5, 30, 40)
    t.op("aten::add", 50, 10)
    return t


def names(tables) -> list[str]:
    return tables.events["name"].astype(str).tolist()


def load(path):
    st = path.stat()
    return load_trace(str(path), st.st_size, st.st_mtime)


def has_warning(tables, *words: str) -> bool:
    return any(all(w in text for w in words) for text in tables.warnings)


# --- truncated JSON ---------------------------------------------------------------------------

ALL_NAMES = ["ProfilerStep#1", "aten::mm", "cudaLaunchKernel", "void at::native::vectorized_elementwise_kernel",
             "aten::add"]


def cut_points(data: bytes) -> dict[str, int]:
    last = data.rindex(b'"aten::add"')
    return {
        # inside the last event's name
        "mid-event-name": last + 5,
        # after `{"ph":"X",` of the last event
        "mid-event-keys": data.rindex(b'{"ph"') + 10,
        # right after the comma that follows the kernel event
        "after-comma": data.rindex(b"},{") + 2,
        # inside the kernel's args object
        "mid-nested-args": data.index(b'"grid"'),
        # only the document's final '}' is missing: every event is complete and closed by ']'
        "no-final-brace": data.rindex(b"}"),
    }


@pytest.mark.parametrize("where, kept", [
    pytest.param("mid-event-name", 4, id="mid-event-name"),
    pytest.param("mid-event-keys", 4, id="mid-event-keys"),
    pytest.param("after-comma", 4, id="after-comma"),
    pytest.param("mid-nested-args", 3, id="mid-nested-args"),
    pytest.param("no-final-brace", 5, id="no-final-brace"),
])
def test_truncated_json_keeps_complete_events(where, kept):
    data = to_bytes(small_trace().build())
    cut = cut_points(data)[where]
    tables = parse_trace_bytes(data[:cut])
    assert [n[:46] for n in names(tables)] == [n[:46] for n in ALL_NAMES[:kept]]
    assert has_warning(tables, "cut short", f"kept the {kept} complete events")
    # deviceProperties sits before traceEvents and survives the cut
    assert tables.metadata["deviceProperties"][0]["name"] == "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize("where, kept", [
    # ...kernel event}|,{"ph":"X",..."aten::add"...
    pytest.param(lambda data: data.rindex(b"},{") + 1, 4, id="after-an-event-brace"),
    # ...aten::add event}|]}  (cut before traceEvents' closing bracket)
    pytest.param(lambda data: data.rindex(b"]"), 5, id="missing-closing-bracket"),
])
def test_truncated_right_after_an_event_keeps_it(where, kept):
    data = to_bytes(small_trace().build())
    tables = parse_trace_bytes(data[:where(data)])
    assert len(tables.events) == kept


def test_truncated_bare_array():
    data = to_bytes(small_trace().build()["traceEvents"])
    cut = data.rindex(b'"aten::add"')
    tables = parse_trace_bytes(data[:cut])
    assert len(tables.events) == 4
    assert has_warning(tables, "cut short")


def test_truncated_before_any_event_is_an_error():
    data = to_bytes(small_trace().build())
    with pytest.raises(TraceFormatError, match="no complete event"):
        parse_trace_bytes(data[: data.index(b"traceEvents") + 15])


def test_truncated_json_file_through_load(tmp_path):
    data = to_bytes(small_trace().build())
    path = write_trace(tmp_path, "run", "w", 1, data[: data.rindex(b'"aten::add"')], gz=False)
    tables = load(path)
    assert len(tables.events) == 4 and has_warning(tables, "cut short")


# --- gzip ----------------------------------------------------------------------------------------

def many_ops(n: int = 300) -> bytes:
    t = Trace()
    for i in range(n):
        t.op(f"aten::op{i % 7}", i * 10, 5)
    return to_bytes(t.build())


def test_truncated_gzip_keeps_what_was_inflated(tmp_path):
    packed = gzip.compress(many_ops())
    path = tmp_path / "w.1.pt.trace.json.gz"
    path.write_bytes(packed[: len(packed) // 2])
    tables = load(path)
    assert 0 < len(tables.events) < 300
    assert has_warning(tables, "gzip", "cut short")
    assert has_warning(tables, "complete events")
    # what was kept is the start of the trace, in order
    assert tables.events["ts"].tolist() == [i * 10.0 for i in range(len(tables.events))]


@pytest.mark.parametrize("content, message", [
    pytest.param(random.Random(1).randbytes(4096), "not a valid gzip file", id="random-bytes"),
    pytest.param(b"", "empty or cut short", id="zero-bytes"),
    pytest.param(gzip.compress(b"{}")[:8], "empty or cut short", id="header-only"),
    pytest.param(b'{"traceEvents": []}', "not a valid gzip file", id="plain-json-named-gz"),
])
def test_corrupt_gzip_is_a_clear_error(tmp_path, content, message):
    path = tmp_path / "w.1.pt.trace.json.gz"
    path.write_bytes(content)
    with pytest.raises(TraceFormatError, match=message):
        read_trace_bytes(str(path))


def test_gzip_of_nothing_reads_as_empty_file(tmp_path):
    path = tmp_path / "w.1.pt.trace.json.gz"
    path.write_bytes(gzip.compress(b""))
    with pytest.raises(TraceFormatError, match="empty"):
        load(path)


def test_gzip_corrupt_mid_stream_keeps_the_start(tmp_path):
    packed = bytearray(gzip.compress(many_ops()))
    rnd = random.Random(0)
    middle = len(packed) // 2
    packed[middle:middle + 64] = rnd.randbytes(64)
    path = tmp_path / "w.1.pt.trace.json.gz"
    path.write_bytes(bytes(packed))
    tables = load(path)
    assert len(tables.events) > 0 and has_warning(tables, "gzip")


def test_gzip_bomb_stops_at_the_cap(tmp_path):
    path = tmp_path / "bomb.1.pt.trace.json.gz"
    path.write_bytes(gzip.compress(b" " * (50 << 20), 9))    # ~50 KB that inflates to 50 MB
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(TraceFormatError, match="limit"):
            read_trace_bytes(str(path), max_bytes=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 2.0
    # one read block (8 MiB) plus the 1 MiB cap, far below the 50 MB it would inflate to
    assert peak < 16 << 20


def test_plain_file_over_the_cap(tmp_path):
    path = tmp_path / "big.1.pt.trace.json"
    path.write_bytes(b" " * 2048)
    with pytest.raises(TraceFormatError, match="limit"):
        read_trace_bytes(str(path), max_bytes=1024)


def test_missing_file(tmp_path):
    with pytest.raises(TraceFormatError, match="could not read"):
        read_trace_bytes(str(tmp_path / "nope.pt.trace.json"))


# --- not a trace ---------------------------------------------------------------------------------

@pytest.mark.parametrize("data, message", [
    pytest.param(b"", "empty", id="empty"),
    pytest.param(b"  \n\t ", "empty", id="whitespace"),
    pytest.param(b"hello world", "not a JSON trace", id="text"),
    pytest.param(b"<html><body>502 Bad Gateway</body></html>", "not a JSON trace", id="html"),
    pytest.param(b"42", "not a JSON trace", id="json-number"),
    pytest.param(b'{"foo": 1, "bar": [1, 2]}', "no traceEvents", id="json-without-traceEvents"),
    pytest.param(b'{"traceEvents": {"ph": "X"}}', "not an array", id="traceEvents-not-array"),
    pytest.param(b'{"schemaVersion": 1, "traceEvents": [{"ph": "X"', "no complete event", id="cut-in-first-event"),
    pytest.param(b'{"schemaVersion": 1 "oops"}', "no traceEvents", id="broken-json-without-events"),
])
def test_not_a_trace(data, message):
    with pytest.raises(TraceFormatError, match=message):
        parse_trace_bytes(data)


def test_non_json_file_through_load(tmp_path):
    path = write_trace(tmp_path, "run", "w", 1, b"\x00\x01garbage", gz=False)
    with pytest.raises(TraceFormatError, match="not a JSON trace"):
        load(path)


# --- odd but readable ----------------------------------------------------------------------------

def test_bare_event_array():
    t = small_trace()
    tables = parse_trace_bytes(to_bytes(t.build()["traceEvents"]))
    assert len(tables.events) == 5
    assert "deviceProperties" not in tables.metadata
    assert tables.warnings == []


def test_empty_event_array_warns():
    tables = parse_trace_bytes(b'{"traceEvents": []}')
    assert tables.events.empty and has_warning(tables, "no complete events")


def event(**fields):
    base = {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 0, "dur": 1}
    base.update(fields)
    return base


def doc(*events) -> bytes:
    return json.dumps({"traceEvents": list(events)}).encode()


def test_nan_and_infinity_tokens():
    data = (b'{"traceEvents": ['
            b'{"ph": "X", "cat": "cpu_op", "name": "nan-dur", "pid": 1, "tid": 1, "ts": 0, "dur": NaN},'
            b'{"ph": "X", "cat": "kernel", "name": "inf-blocks", "pid": 0, "tid": 7, "ts": 0, "dur": 5,'
            b' "args": {"blocks per SM": Infinity, "correlation": 3, "est. achieved occupancy %": -Infinity}},'
            b'{"ph": "X", "cat": "cpu_op", "name": "fine", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]}')
    tables = parse_trace_bytes(data)
    assert names(tables) == ["inf-blocks", "fine"]
    kernel = tables.events.iloc[0]
    assert kernel["correlation"] == 3 and kernel["dur"] == 5
    assert kernel["blocks_per_sm"] != kernel["blocks_per_sm"]            # NaN: read as missing
    assert has_warning(tables, "non-standard JSON", "NaN")
    assert has_warning(tables, "1 complete events", "skipped")


def test_negative_and_missing_durations_are_skipped_and_counted():
    no_dur = event(name="no-dur")
    del no_dur["dur"]
    no_ts = event(name="no-ts")
    del no_ts["ts"]
    tables = parse_trace_bytes(doc(event(name="neg", dur=-5), no_dur, no_ts, event(name="zero", dur=0),
                                   event(name="ok", ts=3, dur=2)))
    assert names(tables) == ["zero", "ok"]
    assert has_warning(tables, "3 complete events", "negative")


def test_unknown_categories_are_kept_as_other():
    tables = parse_trace_bytes(doc(event(cat="overhead", name="Activity Buffer Request"),
                                   event(cat="my_custom_cat", name="x"), event(cat="cpu_op", name="aten::mm")))
    kinds = dict(zip(names(tables), tables.events["kind"].tolist()))
    assert kinds == {"Activity Buffer Request": Kind.OTHER, "x": Kind.OTHER, "aten::mm": Kind.CPU_OP}


@pytest.mark.parametrize("cat, kind", [
    pytest.param("Operator", Kind.CPU_OP, id="legacy-Operator"),
    pytest.param("Runtime", Kind.RUNTIME, id="legacy-Runtime"),
    pytest.param("Kernel", Kind.KERNEL, id="legacy-Kernel"),
    pytest.param("Memcpy", Kind.MEMCPY, id="legacy-Memcpy"),
    pytest.param("Memset", Kind.MEMSET, id="legacy-Memset"),
    pytest.param("cuda_driver", Kind.DRIVER, id="cuda_driver"),
    pytest.param("xpu_runtime", Kind.RUNTIME, id="other-vendor-runtime"),
    pytest.param("gpu_user_annotation", Kind.GPU_USER_ANNOTATION, id="gpu_user_annotation"),
    pytest.param("python_function", Kind.PYTHON_FUNCTION, id="python_function"),
])
def test_category_kinds(cat, kind):
    tables = parse_trace_bytes(doc(event(cat=cat)))
    assert tables.events["kind"].tolist() == [kind]


def test_args_of_unexpected_types_keep_the_event():
    tables = parse_trace_bytes(doc(
        event(cat="kernel", name="bad-ext", pid=0, tid=7, ts=0, dur=5,
              args={"External id": "abc", "correlation": 3, "stream": 7, "blocks per SM": 0.5}),
        event(cat="kernel", name="str-device", pid=0, tid=7, ts=10, dur=5,
              args={"device": "0", "correlation": 4, "stream": 7, "grid": [2, 1, 1]}),
        event(cat="python_function", name="root-frame", ts=20, dur=5,
              args={"Python parent id": None, "Python id": 4}),
        event(cat="cpu_op", name="args-not-object", ts=30, dur=5, args=[1, 2]),
        event(cat="cpu_op", name="fine", ts=40, dur=5, args={"External id": 9}),
    ))
    rows = tables.events.set_index(tables.events["name"].astype(str))
    assert list(rows.index) == ["bad-ext", "str-device", "root-frame", "args-not-object", "fine"]
    assert rows.loc["bad-ext", "external_id"] == -1             # dropped
    assert rows.loc["bad-ext", "correlation"] == 3              # the rest survives
    assert rows.loc["bad-ext", "stream"] == 7
    assert rows.loc["bad-ext", "blocks_per_sm"] == 0.5
    assert rows.loc["str-device", "device"] == -1
    assert rows.loc["str-device", "correlation"] == 4
    assert rows.loc["str-device", "grid"] == "[2, 1, 1]"
    assert rows.loc["root-frame", "python_parent_id"] == -1
    assert rows.loc["root-frame", "python_id"] == 4
    assert rows.loc["fine", "external_id"] == 9
    assert rows.loc["fine", "kind"] == Kind.CPU_OP
    # nothing was skipped
    assert not has_warning(tables, "skipped")


    assert has_warning(tables, "3 events had fields that could not be read")


@pytest.mark.parametrize("args", [
    pytest.param({"Bytes": 2**70}, id="bytes-beyond-int64"),
    pytest.param({"Bytes": -(2**64)}, id="bytes-below-int64"),
    pytest.param({"Addr": 2**64, "Bytes": 512}, id="address-beyond-int64"),
])
def test_a_number_beyond_int64_costs_only_its_field(args):
    """One [memory] record with an integer that fits no int64 column used to fail the whole trace
    (OverflowError in the tables builder)."""
    record = {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5,
              "args": {"Device Type": 1, "Device Id": 0, "Addr": 7, "Bytes": 256, "Total Allocated": 256} | args}
    tables = parse_trace_bytes(doc(event(name="before", ts=0), record, event(name="after", ts=9)))
    assert names(tables) == ["before", "after"]
    assert len(tables.memory) == 1 and tables.memory["device_id"].tolist() == [0]
    assert has_warning(tables, "1 events had fields that could not be read")


@pytest.mark.parametrize("text, read_as", [
    pytest.param(rb"b\ud800c", "b\ufffdc", id="lone-high"),
    pytest.param(rb"b\udc00", "b\ufffd", id="lone-low"),
    pytest.param(rb"\ud83d\ude00 ok \ud800", "\U0001F600 ok \ufffd", id="pair-then-lone"),
    pytest.param(rb"\\ud800", "\\ud800", id="escaped-backslash-not-an-escape"),
])
def test_lone_surrogate_escapes_keep_every_event(text, read_as):
    """A lone \\ud800 (Python's json writes them) made the document unreadable from there on:
    every later event was dropped."""
    data = doc(event(name="first", ts=0), event(name="NAME", ts=1), event(name="last", ts=2))
    tables = parse_trace_bytes(data.replace(b"NAME", text))
    assert names(tables) == ["first", read_as, "last"]


def test_text_that_is_not_utf8_keeps_its_event():
    data = doc(event(name="first", ts=0), event(name="NAME", ts=1), event(name="last", ts=2))
    tables = parse_trace_bytes(data.replace(b"NAME", b"b\xff\xfec"))
    assert names(tables) == ["first", "b\ufffd\ufffdc", "last"]
    assert has_warning(tables, "1 events had fields that could not be read")


@pytest.mark.parametrize("content", [
    pytest.param(b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1", id="passwd"),
    pytest.param(b"SECRET_TOKEN=hunter2\0PATH=/usr/bin\0", id="environ"),
    pytest.param(b"\x80\x04\x95secret", id="pickle"),
])
def test_errors_never_quote_the_file(content):
    """A trace file may be a link to a file outside the logdir: its bytes must not reach a message."""
    with pytest.raises(TraceFormatError, match="not a JSON trace") as err:
        parse_trace_bytes(content)
    for word in (b"root", b"daemon", b"SECRET", b"hunter2", b"secret", b"PATH"):
        assert word.decode() not in str(err.value)


def test_over_long_names_are_cut_with_a_warning():
    """A 10 MB operator name stalled every request for seconds (each analysis tests names against
    patterns); names are kept to MAX_TEXT_CHARS, and two names alike up to the cut stay apart
    from shorter ones."""
    huge = "aten::" + "x" * (10 << 20)
    tables = parse_trace_bytes(doc(event(name=huge, ts=0), event(name=huge + "y", ts=1), event(name="aten::mm", ts=2)))
    got = names(tables)
    assert got[2] == "aten::mm"
    assert all(len(n) < MAX_TEXT_CHARS + 64 and n.startswith("aten::xxx") and "cut from" in n for n in got[:2])
    assert has_warning(tables, "2 names or other texts longer than")


def test_absurd_nesting_is_a_clear_error():
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(TraceFormatError, match="nests"):
        parse_trace_bytes(doc(event(name="a"), event(name="NAME")).replace(b'"NAME"', deep))


def test_wrong_type_basic_fields():
    tables = parse_trace_bytes(doc(event(name=123, ts=0, dur=5), event(name="ok", cat=None, ts=1, dur=1)))
    # a non-string name or cat falls back to empty; the event stays
    assert names(tables) == ["", "ok"]
    assert tables.events["cat"].astype(str).tolist() == ["cpu_op", ""]


def test_events_that_are_not_objects_are_skipped_and_counted():
    tables = parse_trace_bytes(b'{"traceEvents": [42, "text", null, ' + json.dumps(event(name="ok")).encode() + b"]}")
    assert names(tables) == ["ok"]
    assert has_warning(tables, "3 events could not be read")


def test_string_and_int_pid_tid_are_one_identity():
    tables = parse_trace_bytes(doc(
        event(name="a", pid=1000, tid=7),
        event(name="b", pid="1000", tid="7", ts=1),
        event(name="c", pid=0, tid="stream 7", ts=2),
    ))
    assert tables.events["pid"].astype(str).tolist() == ["1000", "1000", "0"]
    assert tables.events["tid"].astype(str).tolist() == ["7", "7", "stream 7"]
    assert sorted(tables.events["pid"].cat.categories) == ["0", "1000"]
    assert sorted(tables.events["tid"].cat.categories) == ["7", "stream 7"]


def test_begin_end_events_are_ignored_with_a_warning():
    tables = parse_trace_bytes(doc(event(name="x"), {"ph": "B", "name": "b", "pid": 1, "tid": 1, "ts": 0},
                                   {"ph": "E", "pid": 1, "tid": 1, "ts": 1}))
    assert names(tables) == ["x"]
    assert has_warning(tables, "2 begin/end")


def test_events_sorted_by_start():
    tables = parse_trace_bytes(doc(event(name="late", ts=50), event(name="early", ts=5), event(name="mid", ts=20)))
    assert names(tables) == ["early", "mid", "late"]


def test_memory_flows_counters_and_metadata_tables():
    t = Trace()
    t.launch(10, 5, 20, 30, flow=True)
    t.memory(12, 512, 0x1000, 512, 2 << 20)
    t.memory(40, -512, 0x1000, 0, 2 << 20)
    t.add({"ph": "C", "name": "GPU 0 Utilization", "pid": 0, "ts": 5, "args": {"util": 0.5, "label": "x"}})
    t.add({"ph": "C", "name": "no values", "pid": 0, "ts": 6})  # failed the whole trace once
    t.add({"ph": "C", "name": "null values", "pid": 0, "ts": 7, "args": None})
    t.add({"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}})
    t.add({"ph": "M", "name": "thread_name", "pid": 1000, "tid": 1000, "args": {"name": "python"}})
    tables = parse_trace_bytes(to_bytes(t.build()))
    assert tables.memory["bytes"].tolist() == [512, -512]
    assert tables.memory["addr"].tolist() == [0x1000, 0x1000]
    assert tables.flows["ph"].astype(str).tolist() == ["s", "f"]
    assert tables.flows["id"].astype(str).tolist() == [str(tables.events["correlation"].max())] * 2
    # only numeric counter args become samples
    assert tables.counters["series"].astype(str).tolist() == ["util"]
    assert tables.metadata["processes"] == {"0": {"name": "GPU 0"}}
    assert tables.metadata["threads"] == {"1000/1000": {"name": "python"}}
