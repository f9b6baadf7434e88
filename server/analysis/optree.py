"""Operator tree: host operators nested by time on their thread, with the GPU work they launched.

- Nodes are CPU operators, user annotations and `python` events, per process and thread.
  A node that starts inside another is its child (one that ends a few nanoseconds after
  its parent, as timestamp rounding makes happen, is still its child). Python tracer frames
  are not nodes: they are call-stack context.
- Runtime and driver calls (launches, copies, synchronisations) belong to the node whose
  external id they carry; kernels, memcpys and memsets belong to the runtime call with their
  correlation id. So backward operators on the autograd thread get their own kernels.
- An operator whose only child is an operator of the same name counts as one call, as
  PyTorch's own profiler tables count it.
- Host self time: a node's duration less its children's and its runtime calls'.
- Device self time: the GPU time of the kernels, memcpys and memsets its own runtime calls
  launched; device total time: the same over the node and everything under it.
- Tensor-core time: the part of those kernels that use tensor cores (told from kernel names).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from ..trace.schema import DEVICE_KINDS, LAUNCH_KINDS, Kind
from .kinds import of_kinds
from .lookup import positions
from .names import name_mask
from .tensor_cores import is_tc_eligible_op, uses_tensor_cores

TREE_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON)
# The trace's store keeps the tree build_op_tree returns: bump the "optree" item's version in
# server/items.py when it changes.


@dataclass(frozen=True)
class OpTree:
    """Nodes in preorder per thread. Per-node arrays are indexed by node position; `rows`
    gives each node's row in the events table. `merged` nodes were folded into their parent
    (same-named single child) and carry no numbers of their own."""

    rows: np.ndarray
    parent: np.ndarray
    merged: np.ndarray
    host_self_us: np.ndarray
    device_self_us: np.ndarray
    device_total_us: np.ndarray
    tc_self_us: np.ndarray
    tc_total_us: np.ndarray
    tc_eligible: np.ndarray
    launcher: np.ndarray  # per events row: node that launched it (device events, runtime calls), else -1

    def event_rows(self, nodes: np.ndarray) -> np.ndarray:
        """Events row of each node (-1 stays -1)."""
        out = np.full(len(nodes), -1, dtype=np.int64)
        live = nodes >= 0
        out[live] = self.rows[nodes[live]]
        return out

    def ancestors_or_self(self, nodes: np.ndarray, hit: np.ndarray) -> np.ndarray:
        """For each of `nodes`: whether it or one of its ancestors has `hit` set (-1 is never)."""
        found = np.zeros(len(nodes), dtype=bool)
        current = nodes.copy()
        while True:
            live = current >= 0
            if not live.any():
                return found
            found[live] |= hit[current[live]]
            current[live] = self.parent[current[live]]


@dataclass(frozen=True)
class Nesting:
    """Intervals nested by time (see `nesting`), per interval position."""

    parent: np.ndarray  # -1 at the top level
    depth: np.ndarray  # 0 at the top level
    end: np.ndarray  # clipped to the parent's (clipped) end


def nesting(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> Nesting:
    """Each interval's parent, depth and clipped end.

    Inputs are sorted by group, then start, then end descending (parents first). An interval
    starting at or after the end of the innermost open one closes it; one that starts inside
    but ends later is clipped to its parent, so nesting survives rounding and odd timestamps.
    """
    # In positions, interval i (clipped) spans [i, close[i]): close[i] = min(reach[i], close[parent]),
    # where reach[i] is the first position of its group starting at or after its end (at least
    # i + 1). Spans nest, so a node's children are the chain x + 1, reach[x + 1], ... while below
    # close[x] (a child's sibling starts where it ends; a clipped child ends the chain), and the
    # top level is the chain from a group's first position to its end. Each level of depth follows
    # its chains by pointer doubling: n log n in all, a loop over the depth, not over the intervals.
    n = len(start)
    index = np.int32 if n < np.iinfo(np.int32).max else np.int64  # half the memory of the jump tables
    new_group = np.ones(n, dtype=bool)
    np.not_equal(group[1:], group[:-1], out=new_group[1:])
    first = np.flatnonzero(new_group)
    last = np.append(first[1:], n)
    reach = np.empty(n + 1, dtype=index)  # position n: past the end, reached from the last ones
    reach[n] = n
    for a, b in zip(first.tolist(), last.tolist()):
        reach[a:b] = np.searchsorted(start[a:b], end[a:b], "left") + a
    np.maximum(reach[:n], np.arange(1, n + 1, dtype=index), out=reach[:n])

    jumps = [reach]  # jumps[k][i]: 2**k steps along the chain from i
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    clipped = end.copy()
    heads, bounds, owners = first.astype(index), last.astype(index), np.full(len(first), -1, dtype=index)
    level = 0
    while len(heads):  # one level of depth: the chains from `heads`, each below its bound
        found = [(heads, bounds, owners)]  # nodes with their chain's bound and owner
        live = found[0]  # of the first 2**k nodes of each chain, those 2**k steps or more from its end
        for k in itertools.count():
            if k == len(jumps):
                jumps.append(jumps[-1][jumps[-1]])
            later = jumps[k][live[0]]
            more = later < live[1]
            if not more.any():
                break
            found.append((later[more], live[1][more], live[2][more]))
            live = tuple(np.concatenate([kept[more], new]) for kept, new in zip(live, found[-1]))
        nodes, bound, owner = (np.concatenate(parts) for parts in zip(*found))
        if level:
            parent[nodes] = owner
            depth[nodes] = level
            clipped[nodes] = np.minimum(end[nodes], clipped[owner])
        close = np.minimum(reach[nodes], bound)
        inner = close > nodes + 1
        heads, bounds, owners = nodes[inner] + 1, close[inner], nodes[inner]
        level += 1
    return Nesting(parent, depth, clipped)


def nesting_order(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Positions sorting finite intervals as `nesting` takes them: by group, start, then end
    descending, ties in their given order (np.lexsort((-end, start, group))), in about a fifth of
    lexsort's time when they come sorted by start, as an events table's rows do."""
    order = np.argsort(start, kind="stable")  # one pass over sorted starts
    begins = start[order]
    tied = np.flatnonzero(begins[1:] == begins[:-1])
    if len(tied):  # longest first among equal starts
        at = np.union1d(tied, tied + 1)
        order[at] = order[at[np.lexsort((-end[order[at]], begins[at]))]]
    return order[np.argsort(group[order], kind="stable")]


def nest(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Parent position of each interval, -1 at the top level (see `nesting`)."""
    return nesting(group, start, end).parent


def thread_key(events: pd.DataFrame) -> np.ndarray:
    """One integer per (process, thread) of each event row."""
    pid = events["pid"].cat.codes.to_numpy().astype(np.int64)
    tid = events["tid"].cat.codes.to_numpy().astype(np.int64)
    return pid * (len(events["tid"].cat.categories) + 1) + tid


def subtree_sums(parent: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each node's value plus the values of every node under it, in the values' dtype (integer
    sums stay exact below 2**53, e.g. 8 PiB)."""
    exact = np.issubdtype(values.dtype, np.integer)
    total = values.astype(np.int64 if exact else np.float64, copy=True)
    nodes = np.flatnonzero(values != 0)
    weights = total[nodes]
    up = parent[nodes]
    while len(up):
        live = up >= 0
        up, weights = up[live], weights[live]
        sums = np.bincount(up, weights=weights, minlength=len(total))
        total += np.rint(sums).astype(np.int64) if exact else sums
        up = parent[up]
    return total


def climb(start: np.ndarray, up: np.ndarray,
          stop: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """From each start node (-1: none), the first node at or above it, following `up`, for which
    `stop(positions, nodes)` holds (positions index `start`); -1 when none does."""
    found = np.full(len(start), -1, dtype=np.int64)
    current = start.copy()
    while True:
        live = np.flatnonzero(current >= 0)
        if not len(live):
            return found
        nodes = current[live]
        ok = stop(live, nodes)
        found[live[ok]] = nodes[ok]
        current[live[ok]] = -1
        current[live[~ok]] = up[nodes[~ok]]


def build_op_tree(events: pd.DataFrame) -> OpTree:
    """The operator tree of every thread of one trace, with per-node times."""
    kind = events["kind"].to_numpy()
    ts = events["ts"].to_numpy()
    dur = events["dur"].to_numpy()
    timed = np.isfinite(ts) & np.isfinite(dur)
    threads = thread_key(events)

    candidates = np.flatnonzero(of_kinds(kind, TREE_KINDS) & timed)
    order = nesting_order(threads[candidates], ts[candidates], ts[candidates] + dur[candidates])
    rows = candidates[order]
    n = len(rows)
    parent = nest(threads[rows], ts[rows], ts[rows] + dur[rows])

    # Fold an operator into its parent when it is the parent's only child and has its name.
    name_codes = events["name"].cat.codes.to_numpy()[rows]
    is_op = kind[rows] == Kind.CPU_OP
    has_parent = parent >= 0
    up = np.maximum(parent, 0)
    children = np.bincount(parent[has_parent], minlength=n)
    merged = has_parent & is_op & is_op[up] & (children[up] == 1) & (name_codes == name_codes[up])
    owner = np.where(merged, parent, np.arange(n))
    while True:  # chains of folds end at the outermost operator
        hop = owner[owner]
        if np.array_equal(hop, owner):
            break
        owner = hop
    effective_parent = np.where(has_parent, owner[up], -1)
    effective_parent[merged] = -1

    # Runtime calls -> nodes by (process, external id); device events -> runtime calls by correlation.
    pid_codes = events["pid"].cat.codes.to_numpy().astype(np.int64)
    external = events["external_id"].to_numpy()
    pids = len(events["pid"].cat.categories) + 1
    node_keys = external[rows] * pids + pid_codes[rows]
    launches = np.flatnonzero(of_kinds(kind, LAUNCH_KINDS) & (external > 0))
    launch_node = positions(np.where(external[rows] > 0, node_keys, -1), external[launches] * pids + pid_codes[launches])
    launch_node = np.where(launch_node >= 0, owner[np.maximum(launch_node, 0)], -1)

    correlation = events["correlation"].to_numpy()
    device_rows = np.flatnonzero(of_kinds(kind, DEVICE_KINDS) & timed)
    with_runtime = launches[correlation[launches] >= 0]
    runtime_of = positions(correlation[with_runtime], correlation[device_rows])
    runtime_of = np.where(correlation[device_rows] >= 0, runtime_of, -1)
    launcher = np.full(len(events), -1, dtype=np.int64)
    launcher[launches] = launch_node
    device_node = np.full(len(device_rows), -1, dtype=np.int64)
    hit = runtime_of >= 0
    device_node[hit] = launcher[with_runtime[runtime_of[hit]]]
    launcher[device_rows] = device_node

    # Host self time: duration less children and own runtime calls.
    node_dur = dur[rows]
    counted = ~merged
    child_time = np.bincount(effective_parent[counted & (effective_parent >= 0)],
                             weights=node_dur[counted & (effective_parent >= 0)], minlength=n)
    attached = launch_node >= 0
    runtime_time = np.bincount(launch_node[attached], weights=np.nan_to_num(dur[launches[attached]]), minlength=n)
    host_self = np.where(counted, np.clip(node_dur - child_time - runtime_time, 0.0, None), 0.0)

    # Device time, and the part on tensor cores.
    device_dur = dur[device_rows]
    launched = device_node >= 0
    tensor = np.zeros(len(device_rows), dtype=bool)
    is_kernel = kind[device_rows] == Kind.KERNEL
    tensor[is_kernel] = uses_tensor_cores(events["name"].iloc[device_rows[is_kernel]])
    device_self = np.bincount(device_node[launched], weights=device_dur[launched], minlength=n).astype(np.float64)
    tc_self = np.bincount(device_node[launched & tensor], weights=device_dur[launched & tensor],
                          minlength=n).astype(np.float64)

    base_eligible = (is_op & name_mask(events["name"].iloc[rows], is_tc_eligible_op)) | (tc_self > 0)
    eligible = subtree_sums(effective_parent, base_eligible.astype(np.float64)) > 0

    return OpTree(
        rows=rows,
        parent=effective_parent,
        merged=merged,
        host_self_us=host_self,
        device_self_us=device_self,
        device_total_us=subtree_sums(effective_parent, device_self),
        tc_self_us=tc_self,
        tc_total_us=subtree_sums(effective_parent, tc_self),
        tc_eligible=eligible & counted,
        launcher=launcher,
    )


def tree_warnings(events: pd.DataFrame, tree: OpTree) -> list[str]:
    """What the tree could not place: kernels that no operator's runtime call launched."""
    kernels = np.flatnonzero(events["kind"].to_numpy() == Kind.KERNEL)
    if not len(kernels):
        return []
    loose = tree.launcher[kernels] < 0
    if not loose.any():
        return []
    dur = np.nan_to_num(events["dur"].to_numpy()[kernels])
    share = dur[loose].sum() / dur.sum() if dur.sum() > 0 else 0.0
    return [f"{int(loose.sum())} of {len(kernels)} kernels ({share:.1%} of kernel time) have no launching "
            "operator (no runtime call with their correlation id belongs to one); they count in the Kernel "
            "view but in no operator's device time."]
