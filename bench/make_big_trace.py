"""Make a large, realistic PyTorch profiler trace by replicating the profiled steps of a real one.

    .venv/bin/python bench/make_big_trace.py SRC OUT [--target-gb 1.0] [--copies N]
                                             [--gap-us 1000] [--gzip] [--compresslevel 6]

    # e.g. a ~1.1 GB trace from the 110 MB fixture (10 copies of its 3 steps, 30 steps):
    .venv/bin/python bench/make_big_trace.py \\
        ../shared/fixtures/big/gpt_big_bf16/h100_worker0.1795349296458661465.pt.trace.json.gz \\
        /tmp/big/h100_worker0.1795349296458661465.pt.trace.json --target-gb 1.0

SRC is a Kineto trace (`.json` or `.json.gz`). OUT gets the source's events (copy 0)
followed by copies 1..N-1, each shifted in time by k * period, where
period = ceil(span of the replicated events, us) + --gap-us. N is the smallest number of
copies that makes the uncompressed JSON at least --target-gb * 10^9 bytes (or --copies).
Keep OUT outside the repository (it is large).

What each copy k changes (everything else is byte-for-byte the source's text, so the bytes
per event, whitespace included, are those of a real Kineto trace):
- `ts` += k * period (exact decimal arithmetic: the source's digits are kept);
- ids get k * stride added, where stride = max - min + 1 of that id space in the source:
  `External id` / `external id`; `correlation` together with the ids of `ac2g` flows (the
  flow id of a launch -> kernel arrow *is* the correlation id, so they stay equal); the id
  of every other flow category (`fwdbwd`, ...) in its own space; `Ev Idx`; `Python id`
  together with `Python parent id` (a null parent stays null); `Sequence number` (autograd's
  forward/backward link, monotonic in a real run);
- `ProfilerStep#N` (host and GPU-side copies) becomes `ProfilerStep#(N + k * steps)`.
Ids that are not per-event stay as they are: `Python module id` (the same module instance
every step), `Fwd thread id`, `Record function id`, `cbid`, `context`, `Addr`, pid/tid.

Events written once (not replicated): metadata events (`ph: "M"`), the profiler's span
(`cat: "Trace"`, its `dur` stretched over all copies) and global instants (`s: "g"`; one
after the replicated events, e.g. "Record Window End", moves to the end of the last copy).
Top-level keys (deviceProperties, schemaVersion, baseTimeNanoseconds, distributedInfo, ...)
are copied verbatim and in order.

Every rewritten event is checked once: copy 1's text of each event is decoded and compared
with the same edits applied to the decoded source event; an event whose text the rewriter
cannot handle is written re-encoded (compact) from the edited object instead.

Output is streamed a slice of events at a time (never the whole document in memory), to
OUT.tmp then renamed; `--gzip` (or an OUT ending in .gz) gzips it with a fixed header
(mtime 0, no name), so the same inputs always give the same bytes. A manifest OUT.bench.json
(source, copies, steps, event counts, period, strides) is written next to it; bench/scale.py
reads it for its sanity check. Prints a summary line to stderr and the manifest to stdout.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import re
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

FLOW_PHASES = ("s", "f", "t")
# args keys that are per-event ids, and the id space each belongs to.
ARG_SPACES = {
    "External id": "external",
    "external id": "external",
    "correlation": "correlation",
    "Ev Idx": "ev_idx",
    "Python id": "python",
    "Python parent id": "python",
    "Sequence number": "sequence",
}
STEP_PREFIX = "ProfilerStep#"
_STEP_NAME = re.compile(r"ProfilerStep#(\d+)")
_NUMBER = rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_SLOT = re.compile(
    rb'"(ts|id|External id|external id|correlation|Ev Idx|Python id|Python parent id|Sequence number)"\s*:\s*('
    + _NUMBER + rb')|"name"\s*:\s*"ProfilerStep#(\d+)"')
_TS_TEXT = re.compile(rb"(\d+)(?:\.(\d{1,9}))?")
_INT_TEXT = re.compile(rb"-?\d+")
_SEPARATOR = b",\n  "
_WRITE_EVERY = 20_000  # events per write

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _flow_space(cat: Any) -> str:
    return "correlation" if cat == "ac2g" else f"flow:{cat}"


def _is_singleton(ev: dict) -> bool:
    if ev.get("ph") == "M":
        return True
    if ev.get("ph") == "X" and str(ev.get("cat", "")).lower() == "trace":
        return True
    return ev.get("ph") in ("i", "I") and ev.get("s") == "g"


def _read_source(path: str) -> bytes:
    with open(path, "rb") as fh:
        head = fh.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open
    with opener(path, "rb") as fh:
        return fh.read()


class _Plan:
    """What one copy changes: id strides, step stride, period; and the edit on a decoded event."""

    def __init__(self, events: list[dict], gap_us: int) -> None:
        lo: dict[str, int] = {}
        hi: dict[str, int] = {}

        def see(space: str, v: int) -> None:
            lo[space] = min(lo.get(space, v), v)
            hi[space] = max(hi.get(space, v), v)

        t0, t1 = math.inf, -math.inf
        self.source_steps: set[int] = set()
        for ev in events:
            ts = ev.get("ts")
            if _is_num(ts):
                t0 = min(t0, ts)
                dur = ev.get("dur")
                t1 = max(t1, ts + (dur if _is_num(dur) and dur > 0 else 0))
            if ev.get("ph") in FLOW_PHASES and _is_int(ev.get("id")):
                see(_flow_space(ev.get("cat")), ev["id"])
            name = ev.get("name")
            if isinstance(name, str) and (m := _STEP_NAME.fullmatch(name)):
                see("step", int(m[1]))
                if ev.get("cat") != "gpu_user_annotation":
                    self.source_steps.add(int(m[1]))
            args = ev.get("args")
            if isinstance(args, dict):
                for key, space in ARG_SPACES.items():
                    if _is_int(args.get(key)):
                        see(space, args[key])
        self.strides = {s: hi[s] - lo[s] + 1 for s in lo}
        self.first_ts, self.last_end = t0, t1
        span = t1 - t0 if t1 >= t0 else 0.0
        self.period_us = int(math.ceil(span)) + gap_us

    def stride(self, space: str) -> int:
        return self.strides.get(space, 0)

    def edit(self, ev: dict, k: int) -> dict:
        """The event of copy k, as an object (used to check the text rewriter, and as its fallback)."""
        out = dict(ev)
        if _is_num(out.get("ts")):
            out["ts"] = out["ts"] + k * self.period_us
        if out.get("ph") in FLOW_PHASES and _is_int(out.get("id")):
            out["id"] = out["id"] + k * self.stride(_flow_space(out.get("cat")))
        name = out.get("name")
        if isinstance(name, str) and (m := _STEP_NAME.fullmatch(name)):
            out["name"] = f"{STEP_PREFIX}{int(m[1]) + k * self.stride('step')}"
        args = out.get("args")
        if isinstance(args, dict):
            args = dict(args)
            for key, space in ARG_SPACES.items():
                if _is_int(args.get(key)):
                    args[key] = args[key] + k * self.stride(space)
            out["args"] = args
        return out


class _Templates:
    """Each replicated event as a %-template of its source text plus numeric slots.

    Slot values of copy k are base + k * step, computed for all events at once with numpy;
    a `ts` with d decimals is one integer in units of 10^-d us, split into "%d.%0dd".
    """

    def __init__(self) -> None:
        self.items: list[tuple[bytes | None, int, int]] = []  # (template or None, value start, end)
        self.base: list[int] = []
        self.step: list[int] = []
        self.ts_at: list[int] = []
        self.ts_scale: list[int] = []
        self.fallback: dict[int, dict] = {}  # event index -> decoded source event

    def add(self, raw: bytes, ev: dict, plan: _Plan) -> None:
        parts: list[bytes] = []
        base: list[int] = []
        step: list[int] = []
        ts_at: list[int] = []
        ts_scale: list[int] = []
        pos = 0
        flow_space = _flow_space(ev.get("cat")) if ev.get("ph") in FLOW_PHASES else None
        for m in _SLOT.finditer(raw):
            key = m[1]
            if key is None:  # ProfilerStep#N
                start, end = m.span(3)
                value, stride = int(m[3]), plan.stride("step")
            else:
                start, end = m.span(2)
                text = m[2]
                if key == b"ts":
                    tm = _TS_TEXT.fullmatch(text)
                    if tm is None:
                        continue  # negative or exponent: left alone, caught by the check
                    decimals = len(tm[2] or b"")
                    scale = 10 ** decimals
                    parts.append(raw[pos:start].replace(b"%", b"%%"))
                    if decimals:
                        parts.append(b"%d.%0" + str(decimals).encode() + b"d")
                        ts_at.append(len(base))
                        ts_scale.append(scale)
                        base += [int(tm[1]) * scale + int(tm[2]), 0]
                        step += [plan.period_us * scale, 0]
                    else:
                        parts.append(b"%d")
                        base.append(int(tm[1]))
                        step.append(plan.period_us)
                    pos = end
                    continue
                if not _INT_TEXT.fullmatch(text):
                    continue
                if key == b"id":
                    if flow_space is None:
                        continue
                    space = flow_space
                else:
                    space = ARG_SPACES[key.decode()]
                value, stride = int(text), plan.stride(space)
            parts.append(raw[pos:start].replace(b"%", b"%%"))
            parts.append(b"%d")
            base.append(value)
            step.append(stride)
            pos = end
        parts.append(raw[pos:].replace(b"%", b"%%"))
        template = b"".join(parts)
        offset = len(self.base)
        # Check the template on copy 1 against the edit applied to the decoded event.
        values = [b + s for b, s in zip(base, step)]
        for i, scale in zip(ts_at, ts_scale):
            values[i], values[i + 1] = divmod(values[i], scale)
        ok = _same(_decode(template % tuple(values)), plan.edit(ev, 1))
        index = len(self.items)
        if not ok:
            self.items.append((None, offset, offset))
            self.fallback[index] = ev
            return
        self.items.append((template, offset, offset + len(base)))
        self.base += base
        self.step += step
        self.ts_at += [offset + i for i in ts_at]
        self.ts_scale += ts_scale

    def freeze(self) -> None:
        self._base = np.array(self.base, dtype=np.int64)
        self._step = np.array(self.step, dtype=np.int64)
        self._ts_at = np.array(self.ts_at, dtype=np.int64)
        self._ts_scale = np.array(self.ts_scale, dtype=np.int64)
        self.base = self.step = self.ts_at = self.ts_scale = []  # type: ignore[assignment]

    def values(self, k: int) -> list[int]:
        v = self._base + k * self._step
        if len(self._ts_at):
            units = v[self._ts_at]
            v[self._ts_at + 1] = units % self._ts_scale
            v[self._ts_at] = units // self._ts_scale
        return v.tolist()


def _same(got: Any, want: Any) -> bool:
    """Equal, with `ts` compared to a few ulps (the edit adds in floating point, the text exactly)."""
    if not isinstance(got, dict) or not isinstance(want, dict) or got.keys() != want.keys():
        return False
    for key, w in want.items():
        g = got[key]
        if key == "ts" and _is_num(w) and _is_num(g):
            if abs(g - w) > 4 * math.ulp(max(abs(w), 1.0)):
                return False
        elif g != w or type(g) is not type(w):
            return False
    return True


def _shift_key(raw: bytes, key: str, delta_us: int) -> bytes:
    """Add delta_us to the number of `key` in one event's text, exactly (Decimal)."""
    pattern = re.compile(rb'("' + re.escape(key.encode()) + rb'"\s*:\s*)(' + _NUMBER + rb")")
    match = pattern.search(raw)
    if match is None or delta_us == 0:
        return raw
    text = match[2].decode()
    value = Decimal(text) + delta_us
    places = len(text.split(".", 1)[1]) if "." in text and "e" not in text.lower() else 0
    new = f"{value:.{places}f}".encode()
    out = raw[:match.start(2)] + new + raw[match.end(2):]
    assert _decode(out)[key] == _decode(new), key
    return out


def make_big_trace(src: str, out: str, target_bytes: int, copies: int | None = None, gap_us: int = 1000,
                   use_gzip: bool = False, compresslevel: int = 6, log=print) -> dict[str, Any]:
    t_start = time.perf_counter()
    data = _read_source(src)
    top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    if "traceEvents" not in top:
        raise SystemExit(f"{src}: no traceEvents array")
    raws = msgspec.json.decode(top["traceEvents"], type=list[msgspec.Raw])
    raws = [bytes(r) for r in raws]
    del data
    decoded = [_decode(r) for r in raws]
    single = [i for i, ev in enumerate(decoded) if not isinstance(ev, dict) or _is_singleton(ev)]
    single_set = set(single)
    replicated = [i for i in range(len(raws)) if i not in single_set]
    if not replicated:
        raise SystemExit(f"{src}: no events to replicate")
    plan = _Plan([decoded[i] for i in replicated], gap_us)
    first_rep = replicated[0]
    leading = [i for i in single if i < first_rep]
    trailing = [i for i in single if i > first_rep]

    templates = _Templates()
    for i in replicated:
        templates.add(raws[i], decoded[i], plan)
    templates.freeze()
    rep_raws = [raws[i] for i in replicated]
    rep_events = [decoded[i] for i in replicated]
    del decoded
    log(f"templates: {len(replicated):,} events to replicate, {len(templates.fallback)} re-encoded, "
        f"period {plan.period_us:,} us ({time.perf_counter() - t_start:.1f} s)")

    keys = list(top)
    at = keys.index("traceEvents")
    head = b"{\n" + b"".join(b"  " + _encode(k) + b": " + bytes(top[k]) + b",\n" for k in keys[:at])
    head += b'  "traceEvents": [\n  '
    tail = b"\n  ]" + b"".join(b",\n  " + _encode(k) + b": " + bytes(top[k]) for k in keys[at + 1:]) + b"\n}\n"
    copy_bytes = sum(len(r) for r in rep_raws) + len(_SEPARATOR) * len(rep_raws)
    fixed = len(head) + len(tail) + sum(len(raws[i]) + len(_SEPARATOR) for i in single)
    if copies is None:
        copies = max(1, math.ceil((target_bytes - fixed) / copy_bytes))
    stretch = (copies - 1) * plan.period_us

    def singleton_text(i: int) -> bytes:
        raw = raws[i]
        ev = _decode(raw)
        if not isinstance(ev, dict):
            return raw
        if ev.get("ph") == "X" and _is_num(ev.get("dur")):  # the profiler's span covers every copy
            return _shift_key(raw, "dur", stretch)
        if ev.get("ph") in ("i", "I") and _is_num(ev.get("ts")) and ev["ts"] >= plan.last_end:
            return _shift_key(raw, "ts", stretch)  # e.g. "Record Window End"
        return raw

    out_path = Path(out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(out_path.name + ".tmp")
    written = 0
    n_events = 0
    with open(tmp, "wb") as raw_fh:
        fh = gzip.GzipFile(filename="", mode="wb", fileobj=raw_fh, compresslevel=compresslevel, mtime=0) \
            if use_gzip else raw_fh
        first = True

        def emit(texts: list[bytes]) -> None:
            nonlocal written, first, n_events
            if not texts:
                return
            blob = (b"" if first else _SEPARATOR) + _SEPARATOR.join(texts)
            first = False
            fh.write(blob)
            written += len(blob)
            n_events += len(texts)

        fh.write(head)
        written += len(head)
        emit([singleton_text(i) for i in leading])
        items = templates.items
        for k in range(copies):
            t_copy = time.perf_counter()
            values = templates.values(k)
            for lo in range(0, len(items), _WRITE_EVERY):
                chunk = []
                for j in range(lo, min(lo + _WRITE_EVERY, len(items))):
                    template, a, b = items[j]
                    if template is None:
                        chunk.append(_encode(plan.edit(rep_events[j], k)))
                    elif a == b:
                        chunk.append(rep_raws[j])
                    else:
                        chunk.append(template % tuple(values[a:b]))
                emit(chunk)
            log(f"copy {k + 1}/{copies}: {written / 1e9:.3f} GB written ({time.perf_counter() - t_copy:.1f} s)")
        emit([singleton_text(i) for i in trailing])
        fh.write(tail)
        written += len(tail)
        if fh is not raw_fh:
            fh.close()
    os.replace(tmp, out_path)
    step_nums = sorted(plan.source_steps)
    manifest = {
        "source": str(Path(src).resolve()),
        "out": str(out_path.resolve()),
        "gzip": use_gzip,
        "copies": copies,
        "period_us": plan.period_us,
        "gap_us": gap_us,
        "source_events": len(raws),
        "replicated_events_per_copy": len(replicated),
        "singleton_events": len(single),
        "reencoded_events_per_copy": len(templates.fallback),
        "events": n_events,
        "json_bytes": written,
        "file_bytes": out_path.stat().st_size,
        "source_steps": [str(s) for s in step_nums],
        "steps": [str(s + k * plan.stride("step")) for k in range(copies) for s in step_nums],
        "strides": plan.strides,
        "seconds": round(time.perf_counter() - t_start, 2),
    }
    Path(str(out_path) + ".bench.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", help="a Kineto trace (.json or .json.gz)")
    parser.add_argument("out", help="output path (.pt.trace.json, or .pt.trace.json.gz with --gzip)")
    parser.add_argument("--target-gb", type=float, default=1.0, help="uncompressed JSON size to reach, in 10^9 bytes")
    parser.add_argument("--copies", type=int, help="number of copies (the source included); overrides --target-gb")
    parser.add_argument("--gap-us", type=int, default=1000, help="idle time between one copy's last event and the next's first")
    parser.add_argument("--gzip", action="store_true", help="gzip the output (also implied by an OUT ending in .gz)")
    parser.add_argument("--compresslevel", type=int, default=6)
    args = parser.parse_args()
    use_gzip = args.gzip or args.out.endswith(".gz")
    out = args.out if not use_gzip or args.out.endswith(".gz") else args.out + ".gz"
    if args.copies is not None and args.copies < 1:
        parser.error("--copies must be >= 1")
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    m = make_big_trace(args.src, out, int(args.target_gb * 1e9), args.copies, args.gap_us, use_gzip,
                       args.compresslevel, log)
    gz = f", {m['file_bytes'] / 1e9:.3f} GB gzipped" if m["gzip"] else ""
    log(f"wrote {m['out']}: {m['copies']} copies x {m['replicated_events_per_copy']:,} events + "
        f"{m['singleton_events']} once = {m['events']:,} events, {m['json_bytes'] / 1e9:.3f} GB JSON"
        f"{gz}, "
        f"steps {m['steps'][0]}..{m['steps'][-1]} ({len(m['steps'])}), in {m['seconds']:.1f} s")
    print(json.dumps(m, indent=1))


if __name__ == "__main__":
    main()
