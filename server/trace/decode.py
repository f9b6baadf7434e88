"""JSON bytes of a Chrome trace -> metadata and typed events, tolerating damage.

1. Find the event array. A plainly shaped document (the `traceEvents` key once, as trace
   writers put it, or a bare event array: Chrome's "JSON array format") is split by
   find_events without a JSON pass over the array, whose syntax is checked as its pieces are
   decoded; any other, or one whose array turns out not to be valid JSON, by decode_trace: a
   JSON pass over the whole document, keeping `traceEvents` raw.
2. Decode a piece of the array with the typed schema (decode_events). A piece that fails
   validation is decoded CHUNK_EVENTS at a time, a chunk that fails event by event, and an
   event that still fails is kept as far as its fields allow, else skipped and counted.
Damage handling (decode_trace): non-standard tokens (`NaN`, `Infinity`, bare `N/A`) are replaced
by `null`, and escapes of lone UTF-16 surrogates (`\ud800`, which Python's json module writes
for some byte strings) by U+FFFD, and decoding is retried; an event whose strings are not UTF-8
is read with U+FFFD in their place; a document cut short (a job killed mid-write) is closed
after its last complete event, keeping everything before the cut, with a warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from .schema import Args, CounterEvent, Event

if TYPE_CHECKING:
    from .read import FileSpan

# How many events a one-process load read at a time from arrays over WHOLE_DECODE_BYTES (and
# from any whose events did not all decode): the order of rows that start together depends on it
# (DecodedTrace.read_chunk), and odd events are read on their own a chunk at a time.
CHUNK_EVENTS = 40_000
WHOLE_DECODE_BYTES = 192 << 20
# How many candidate cut points to try when closing a truncated document.
_MAX_REPAIR_TRIES = 64
_REPAIR_WINDOW = 8 << 20


class TraceFormatError(ValueError):
    """The bytes are not a readable trace; the message is meant for the user."""


@dataclass
class DecodedTrace:
    """Top-level metadata plus the JSON text of the `traceEvents` array, or, for a document
    closed after its last complete event, the raw slices of those events."""

    metadata: dict[str, Any]
    array: bytes | bytearray | memoryview | msgspec.Raw | FileSpan  # the JSON text of the event array
    warnings: list[str] = field(default_factory=list)
    raw_events: list[msgspec.Raw] | None = None
    # Whether the array is known to be valid JSON (decode_trace); locate_events leaves that to
    # the reading of its pieces.
    checked: bool = True

    def read_chunk(self, lenient: bool) -> int | None:
        """How many events a one-process load has always read at a time (the order of rows that
        start at the same time depends on it, see tables.py): the whole array (None) when it
        fits WHOLE_DECODE_BYTES and every event decoded (not `lenient`), else CHUNK_EVENTS."""
        if self.raw_events is None and not lenient and len(self.array) <= WHOLE_DECODE_BYTES:
            return None
        return CHUNK_EVENTS

    def release(self) -> None:
        """Drop the JSON text (and with it the input buffer) once the events are read."""
        self.array, self.raw_events = b"", None


@dataclass
class DecodedEvents:
    """Typed events of a run of array elements, with what a one-process load needs to know
    about them: their positions among the elements (`index`, None when every element was
    read), how many elements there were, and whether some had to be read on their own."""

    events: list[Event]
    raws: Sequence[msgspec.Raw]  # the JSON text of each event
    index: np.ndarray | None
    count: int
    lenient: bool = False
    skipped: int = 0  # elements that could not be read at all
    repaired: int = 0  # events kept without the fields that could not be read


class _LazyRaws(Sequence):
    """The raw slices of a text decoded in one pass, split only if someone asks for one (a
    counter event reads its free-form args from its slice)."""

    def __init__(self, text: bytes | bytearray | memoryview, count: int) -> None:
        self._text, self._count, self._raws = text, count, None

    def __getitem__(self, index):
        if self._raws is None:
            self._raws = _RAW_LIST_DECODER.decode(self._text)
        return self._raws[index]

    def __len__(self) -> int:
        return self._count


def split_events(array: bytes | bytearray | memoryview | msgspec.Raw) -> list[msgspec.Raw]:
    """The raw JSON text of each element of a valid JSON array."""
    return _RAW_LIST_DECODER.decode(array)


def decode_events(text: bytes | bytearray | memoryview) -> DecodedEvents:
    """The events of a JSON array; an element that fails the typed decode is read on its own
    (_decode_leniently). Raises msgspec.DecodeError if `text` is not a JSON array."""
    try:
        events = _LIST_DECODER.decode(text)
    except (msgspec.ValidationError, msgspec.DecodeError):
        # Not valid JSON (DecodeError is raised here), or some event is of unexpected types or
        # holds text that is not UTF-8.
        return decode_raw_events(_RAW_LIST_DECODER.decode(text))
    return DecodedEvents(events, _LazyRaws(text, len(events)), None, len(events))


def decode_raw_events(raws: list[msgspec.Raw]) -> DecodedEvents:
    """The events of raw array elements, decoded CHUNK_EVENTS at a time: a chunk that fails the
    typed decode is read event by event, bounding the cost of a few odd events."""
    events: list[Event] = []
    kept: list[msgspec.Raw] = []
    index: list[np.ndarray] = []
    out = DecodedEvents(events, kept, None, len(raws))
    for start in range(0, len(raws), CHUNK_EVENTS):
        chunk = raws[start:start + CHUNK_EVENTS]
        try:
            typed = _LIST_DECODER.decode(b"[" + b",".join(chunk) + b"]")
            positions = np.arange(start, start + len(chunk))
        except (msgspec.ValidationError, msgspec.DecodeError):
            typed, chunk, positions, bad, repaired = _decode_leniently(chunk)
            positions += start
            out.lenient = True
            out.skipped += bad
            out.repaired += repaired
        events += typed
        kept += chunk
        index.append(positions)
    out.index = np.concatenate(index) if index else np.empty(0, np.int64)
    return out


_LIST_DECODER = msgspec.json.Decoder(list[Event])
_EVENT_DECODER = msgspec.json.Decoder(Event)
_COUNTER_DECODER = msgspec.json.Decoder(CounterEvent)
_ANY_DECODER = msgspec.json.Decoder()
_BASIC_FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "bp")


def decode_event(raw: msgspec.Raw | bytes | memoryview) -> Event:
    """One event that the typed decode of its array already read (schema.Event)."""
    return _EVENT_DECODER.decode(raw)


def decode_counter(raw: msgspec.Raw | bytes | memoryview) -> CounterEvent | None:
    """Decode a `ph: "C"` event with its free-form args; None if it is unreadable."""
    try:
        return _COUNTER_DECODER.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None


def _decode_leniently(raws: list[msgspec.Raw]) -> tuple[list[Event], list[msgspec.Raw], np.ndarray, int, int]:
    """(events, their raw slices, their positions in `raws`, how many were skipped, how many
    were kept in part)."""
    events: list[Event] = []
    kept: list[msgspec.Raw] = []
    positions: list[int] = []
    bad = repaired = 0
    for i, raw in enumerate(raws):
        try:
            event = _EVENT_DECODER.decode(raw)
        except (msgspec.ValidationError, msgspec.DecodeError):
            event = _salvage(raw)
            if event is None:
                bad += 1
                continue
            repaired += 1
        events.append(event)
        kept.append(raw)
        positions.append(i)
    return events, kept, np.array(positions, dtype=np.int64), bad, repaired


def _salvage(raw: msgspec.Raw) -> Event | None:
    """Keep an event whose fields have unexpected types: every field and arg that converts."""
    try:
        obj = _ANY_DECODER.decode(raw)
    except msgspec.DecodeError:
        try:  # strings that are not UTF-8: keep the event with U+FFFD in their place
            obj = _ANY_DECODER.decode(bytes(raw).decode("utf-8", "replace").encode())
        except msgspec.DecodeError:
            return None
    if not isinstance(obj, dict):
        return None
    basic = {k: obj[k] for k in _BASIC_FIELDS if k in obj and _converts({k: obj[k]}, Event)}
    args = obj.get("args")
    if isinstance(args, dict):
        basic["args"] = {k: v for k, v in args.items() if _converts({k: v}, Args)}
    try:
        return msgspec.convert(basic, Event)
    except msgspec.ValidationError:
        return None


def _converts(obj: dict[str, Any], kind: type) -> bool:
    try:
        msgspec.convert(obj, kind)
        return True
    except msgspec.ValidationError:
        return False


_TOP_DECODER = msgspec.json.Decoder(dict[str, msgspec.Raw])
_RAW_LIST_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
_TOP_ANY_DECODER = msgspec.json.Decoder(msgspec.Raw)
# Tokens Python's json module or ad-hoc writers emit that strict JSON forbids.
_NONSTANDARD = re.compile(rb'(?<=[:\[,\s])(?:NaN|-?Infinity|N/A)(?=\s*[,\]\}])')
# A \uXXXX escape (not an escaped backslash before "u") of a surrogate pair or of a lone surrogate.
_SURROGATE_ESCAPE = re.compile(
    rb'(?<!\\)((?:\\\\)*)\\u([dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|[dD][89a-fA-F][0-9a-fA-F]{2})')


def _without_lone_surrogates(data: bytes) -> bytes:
    """`data` with escapes of lone surrogates replaced by U+FFFD's (msgspec rejects them)."""
    return _SURROGATE_ESCAPE.sub(lambda m: m[0] if len(m[2]) > 4 else m[1] + rb"\ufffd", data)


def decode_trace(data: bytes) -> DecodedTrace:
    """Split a trace document into metadata and its event array; raises TraceFormatError."""
    first = _first_char(data)
    if first is None:
        raise TraceFormatError("the file is empty")
    if first not in (b"{", b"["):
        raise TraceFormatError(f"not a JSON trace ({_looks_like(data)})")
    warnings: list[str] = []
    try:
        metadata, array = _split(data)
    except RecursionError:
        # msgspec nests as deep as Python's recursion limit (about 1,000); a trace nests about 5.
        raise TraceFormatError("the JSON nests arrays or objects too deeply to be a profiler trace") from None
    except msgspec.DecodeError as first_error:
        cleaned = _without_lone_surrogates(_NONSTANDARD.sub(b"null", data))
        try:
            metadata, array = _split(cleaned)
            warnings.append("the trace holds non-standard JSON (NaN, Infinity or N/A tokens, read as missing values, "
                            "or escapes of lone UTF-16 surrogates, read as U+FFFD)")
        except msgspec.DecodeError:
            metadata, raw_events, note = _recover_prefix(cleaned, first_error)
            warnings.append(note)
            return DecodedTrace(metadata, b"", warnings, raw_events)
    return DecodedTrace(metadata, array, warnings)


# The events key as trace writers put it, the start of its array included.
_EVENTS_KEY = re.compile(rb'"traceEvents"[ \t\r\n]*:[ \t\r\n]*\[')


def find_events(data: bytes | bytearray) -> tuple[dict[str, Any], int, int] | None:
    """(metadata, start, end of the event array) of a plainly shaped document, found without a
    JSON pass over the array, which is most of the document: the array is checked as its pieces
    are decoded. None when the document is not plainly shaped; decode_trace then reads it."""
    first = _first_char(data)
    end = data.rfind(b"]") + 1
    if end == 0:
        return None
    if first == b"[":
        return None if data[end:].strip(b" \t\r\n") else ({}, 0, len(data))
    key = _EVENTS_KEY.search(data) if first == b"{" else None
    if key is None or end <= key.end():
        return None
    start = key.end() - 1
    header, trailer = data[:start], data[end:]
    # Another key that reads as "traceEvents" (repeated, or escaped as \u0065...) would make this
    # one not the document's events: such documents are left to decode_trace.
    if header.count(b"traceEvents") != 1 or b"traceEvents" in trailer or b"\\u" in header or b"\\u" in trailer:
        return None
    try:
        top = _TOP_DECODER.decode(header + b"[]" + trailer)
    except (msgspec.DecodeError, RecursionError):
        return None
    if bytes(top.pop("traceEvents", b"")) != b"[]":
        return None
    return _decode_values(top), start, end


def locate_events(data: bytes | bytearray) -> DecodedTrace | None:
    """The metadata and unchecked event array of a plainly shaped document (find_events)."""
    found = find_events(data)
    if found is None:
        return None
    metadata, start, end = found
    return DecodedTrace(metadata, memoryview(data)[start:end], checked=False)


# What a file that is not JSON looks like, by its first bytes. The bytes themselves are never
# quoted: a link may lead to a file outside the logdir (/etc/passwd), and a message reaches the API.
_SIGNATURES = ((b"\x1f\x8b", "it holds gzip data: name it .gz"), (b"PK\x03\x04", "it is a zip archive"),
               (b"\x80", "it is a Python pickle"), (b"\x7fELF", "it is a program"),
               (b"<", "it is HTML or XML (an error page saved as a trace?)"))


def _looks_like(data: bytes) -> str:
    head = bytes(data[:4096]).lstrip()
    for magic, what in _SIGNATURES:
        if head.startswith(magic):
            return what
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not just a character cut at the end of the sample
            return "it is binary data"
    return "it is text that does not start with { or ["


def _first_char(data: bytes) -> bytes | None:
    match = _FIRST_CHAR.search(data)
    return match.group() if match else None


_FIRST_CHAR = re.compile(rb"\S")


def _split(data: bytes) -> tuple[dict[str, Any], bytes | msgspec.Raw]:
    if _first_char(data) == b"[":
        _TOP_ANY_DECODER.decode(data)  # checks the syntax; events are decoded later
        return {}, data
    top = _TOP_DECODER.decode(data)
    if "traceEvents" not in top:
        raise TraceFormatError("no traceEvents array: this JSON is not a Chrome/PyTorch trace")
    array = top.pop("traceEvents")
    if _first_char(array) != b"[":
        raise TraceFormatError("traceEvents is not an array")
    return _decode_values(top), array


def _decode_values(raws: dict[str, msgspec.Raw]) -> dict[str, Any]:
    """Top-level metadata values; one that does not decode is left out."""
    out = {}
    for key, raw in raws.items():
        try:
            out[key] = _ANY_DECODER.decode(raw)
        except msgspec.DecodeError:
            continue
    return out


_EVENT_END = re.compile(rb"\}\s*(?=[,\]]|\Z)")


def _recover_prefix(data: bytes, error: Exception) -> tuple[dict[str, Any], list[msgspec.Raw], str]:
    """Close a document cut short (or broken) after its last complete event."""
    key = data.find(b'"traceEvents"')
    bare_array = _first_char(data) == b"["
    if key < 0 and not bare_array:
        raise TraceFormatError(f"unreadable JSON and no traceEvents array found ({error})")
    array_start = data.index(b"[") if bare_array else data.find(b"[", key)
    if array_start < 0:
        raise TraceFormatError(f"unreadable JSON: traceEvents holds no array ({error})")
    raw_events: list[msgspec.Raw] | None = None
    # Candidate cut points come from the tail: the last complete event ends near the cut.
    tail_start = max(array_start, len(data) - _REPAIR_WINDOW)
    ends = [m.end() for m in _EVENT_END.finditer(data, tail_start)]
    if not ends and tail_start > array_start:
        ends = [m.end() for m in _EVENT_END.finditer(data, array_start)]
    for end in reversed(ends[-_MAX_REPAIR_TRIES:]):
        try:
            raw_events = _RAW_LIST_DECODER.decode(data[array_start:end] + b"]")
            cut = end
            break
        except msgspec.DecodeError:
            continue
    if raw_events is None:
        raise TraceFormatError(f"unreadable JSON with no complete event to recover ({error})")
    metadata = {} if bare_array else _header_metadata(data[:key])
    lost = len(data) - cut
    note = (f"the trace is damaged or cut short ({error}); "
            f"kept the {len(raw_events)} complete events before byte {cut:,}, lost the last {lost:,} bytes")
    return metadata, raw_events, note


def _header_metadata(header: bytes) -> dict[str, Any]:
    """Metadata keys written before traceEvents (Kineto writes deviceProperties there)."""
    text = header.rstrip().rstrip(b",")
    try:
        return _decode_values(_TOP_DECODER.decode(text + b"}"))
    except msgspec.DecodeError:
        return {}
