"""CUDA caching-allocator snapshots (`torch.cuda.memory._dump_snapshot`): reading and analysis.

A snapshot is a pickle of plain data: `segments` (what the allocator holds from CUDA at the
moment of the snapshot, each split into blocks) and, when `_record_memory_history` was on,
`device_traces` (per device, the allocator's recent actions with their stacks). `unpickle`
reads it without running anything it carries, and refuses one whose shared references expand
past a budget; the server does that, and runs the analyses, in a process of its own per
snapshot with processor time and memory limited to the file's size (`worker`, `cache`). The
analysis modules are pure functions of the loaded dict that return plain JSON-able data:

- `summary`: totals per device and overall (summary.py);
- `active_timeline`: live allocations over the history, stacked (timeline.py);
- `allocator_state`: segments and blocks at a point of the history (state.py);
- `top_sites`: allocation sites by bytes (sites.py).

`build_history(snap, device)` does the shared work once; each analysis takes it as an
optional `history` argument (`histories` for top_sites) so a caller can memoise it.
"""

from .errors import NotASnapshot, SnapshotError, SnapshotTooLarge, UnsafeSnapshot
from .history import DeviceHistory, build_history
from .sites import top_sites
from .state import allocator_state
from .summary import summary
from .timeline import active_timeline
from .unpickle import DEFAULT_MAX_BYTES, load_snapshot

__all__ = ["DEFAULT_MAX_BYTES", "DeviceHistory", "NotASnapshot", "SnapshotError", "SnapshotTooLarge",
           "UnsafeSnapshot", "active_timeline", "allocator_state", "build_history", "load_snapshot",
           "summary", "top_sites"]
