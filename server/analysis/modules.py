"""Module view: time per nn.Module instance, the main thread's operator tree, and backward
time per module. Needs a trace recorded with `with_stack=True` (PyTorch writes the
`nn.Module: Name_k` Python events with `with_modules=True`, which `with_stack` implies).

1. Module occurrences: each `nn.Module: Name_k` python_function event is one call of module
   instance `Name_k` (PyTorch numbers instances per class, so the name is the instance; the
   `Python module id` is that number). Occurrences nest by time on their thread.
2. Module tree: a node is a path of instance names from a top-level module (`ResNet_0 /
   Sequential_0 / Bottleneck_0`); an instance called from two places is two nodes, so a
   child's numbers never exceed its parent's. Siblings are in the order they first ran.
3. Per node, summed over its occurrences:
   - occurrences: how many calls; averages divide by it;
   - host total: the occurrences' durations; host self: that less the durations of the child
     modules' occurrences (the module's own code, its operators included). The reference
     plugin also took the operators out of host self; here self and total mean the same for
     host and device time, so the icicle's widths add up;
   - device self: the GPU time (kernels, memcpys, memsets) launched by the operators whose
     innermost module occurrence, at their start, is this node's (through the operator tree's
     runtime calls); device total: device self of the node and of every node under it;
   - self operators: operator calls made from the module's own code (an operator inside
     another operator of the same occurrence is not another call); operators: the same with
     the child modules' included.
4. Backward per module: the trace's fwdbwd flows tie a forward operator to the backward
   operator autograd ran for it. That backward operator's outermost
   `autograd::engine::evaluate_function:` range, together with the
   `evaluate_function: torch::autograd::AccumulateGrad` ranges that follow it on its thread
   (the gradient accumulation of the same parameters, as the reference grouped them), is the
   backward of the module whose occurrence held the forward operator (`Module.backward`).
   Backward host time: the durations of those ranges; device time: the GPU time they launched;
   a range counts once per module, and a module's backward includes its children's. Forward
   operators without a fwdbwd flow (PyTorch writes none for some) leave their backward
   unattributed: `backward` gives the share attributed.
5. Compiled code: inside a torch.compile region the model's submodules run as one compiled
   graph and record no module events. The module holding the region (e.g. the compiled model's
   `OptimizedModule_0` / `ResNet_0`) shows the region's time as its self time; its
   `compiled_regions` counts the regions it ran, and a warning says so.
6. Operator tree: the main thread (the one with the ProfilerStep ranges, else the one with
   most operators) as operators, annotations and module occurrences nested by time. Siblings
   with the same name merge into one node (calls = how many; times summed; their children
   merged the same way), so every step's identical calls collapse. Host self: duration less
   children's and own runtime calls'; device self/total as in the operator view. At most
   `MAX_CHILDREN` children per node (the longest host totals) and `MAX_TREE_NODES` nodes in
   all (shallowest first); the rest of a node's children become one `… N more` node whose
   numbers are their sums. Backward on the autograd thread is not in this tree (see 4).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..trace.schema import Kind
from ..trace.tables import TraceTables
from .compile import REGION_PREFIX
from .flows import CATEGORIES, Flows
from .kinds import of_kinds
from .names import name_mask
from .optree import OpTree, nest, subtree_sums, thread_key
from .records import clean_row

MODULE_PREFIX = "nn.Module: "
BACKWARD_ROOT_PREFIX = "autograd::engine::evaluate_function: "
ACCUMULATE_GRAD = BACKWARD_ROOT_PREFIX + "torch::autograd::AccumulateGrad"
STEP_PREFIX = "ProfilerStep#"
MAX_CHILDREN = 50
MAX_TREE_NODES = 3000


# -- shared helpers ----------------------------------------------------------------------------


def _nested(threads: np.ndarray, start: np.ndarray, end: np.ndarray, first: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
    """Order (by thread, start, longest first; `first` breaks ties) and parent positions in it."""
    keys = [-end, start, threads] if first is None else [~first, -end, start, threads]
    order = np.lexsort(keys)
    return order, nest(threads[order], start[order], end[order])


def _innermost(occ_thread: np.ndarray, occ_start: np.ndarray, occ_end: np.ndarray, occ_parent: np.ndarray,
               thread: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Per query (thread, time): the innermost occurrence open then on that thread, else -1.
    Occurrences are sorted by thread and start, with their nesting parents."""
    found = np.full(len(at), -1, dtype=np.int64)
    for t in np.unique(thread):
        lo, hi = np.searchsorted(occ_thread, [t, t + 1])
        if lo == hi:
            continue
        mine = np.flatnonzero(thread == t)
        candidate = lo + np.searchsorted(occ_start[lo:hi], at[mine], side="right") - 1
        candidate[candidate < lo] = -1
        while True:  # climb out of occurrences that closed before the query time
            closed = (candidate >= 0) & (occ_end[np.maximum(candidate, 0)] <= at[mine])
            if not closed.any():
                break
            candidate[closed] = occ_parent[candidate[closed]]
        found[mine] = candidate
    return found


def _depths(parent: np.ndarray) -> np.ndarray:
    depth = np.zeros(len(parent), dtype=np.int64)
    up = parent.copy()
    while (live := up >= 0).any():
        depth[live] += 1
        up[live] = parent[up[live]]
    return depth


def _merge_paths(parent: np.ndarray, label: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge items with the same label under the same merged parent (a path of labels).
    Returns (node of each item, parent node of each node, first item of each node); nodes are
    numbered level by level, in order of first appearance."""
    depth = _depths(parent)
    node = np.full(len(parent), -1, dtype=np.int64)
    node_parent: list[np.ndarray] = []
    node_first: list[np.ndarray] = []
    width = int(label.max()) + 2 if len(label) else 1
    count = 0
    for level in range(int(depth.max()) + 1 if len(depth) else 0):
        items = np.flatnonzero(depth == level)
        up = node[parent[items]] if level else np.full(len(items), -1, dtype=np.int64)
        codes, uniques = pd.factorize((up + 1) * width + label[items] + 1)
        node[items] = count + codes
        first = np.full(len(uniques), len(parent), dtype=np.int64)
        np.minimum.at(first, codes, items)
        node_first.append(first)
        node_parent.append(up[np.searchsorted(items, first)])
        count += len(uniques)
    empty = np.empty(0, dtype=np.int64)
    return (node, np.concatenate(node_parent) if node_parent else empty,
            np.concatenate(node_first) if node_first else empty)


def _preorder(parent: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Nodes in depth-first order, siblings by ascending `rank`."""
    children: dict[int, list[int]] = {}
    for i in np.lexsort((rank,)).tolist():
        children.setdefault(int(parent[i]), []).append(i)
    out: list[int] = []
    stack = list(reversed(children.get(-1, [])))
    while stack:
        i = stack.pop()
        out.append(i)
        stack.extend(reversed(children.get(i, [])))
    return np.array(out, dtype=np.int64)


def _label_codes(names: pd.Series) -> np.ndarray:
    return names.cat.codes.to_numpy().astype(np.int64)


# -- module occurrences and tree --------------------------------------------------------------


def _occurrences(events: pd.DataFrame) -> dict[str, np.ndarray]:
    """Module occurrences sorted by thread and start, with their nesting parents."""
    kind = events["kind"].to_numpy()
    ts = events["ts"].to_numpy()
    end = ts + events["dur"].to_numpy()
    rows = np.flatnonzero((kind == Kind.PYTHON_FUNCTION) & np.isfinite(end)
                          & name_mask(events["name"], lambda n: n.startswith(MODULE_PREFIX)))
    threads = thread_key(events)[rows]
    order, parent = _nested(threads, ts[rows], end[rows])
    rows = rows[order]
    return {"rows": rows, "thread": threads[order], "start": ts[rows], "end": end[rows], "parent": parent}


def _occurrence_of(events: pd.DataFrame, occ: dict[str, np.ndarray], rows: np.ndarray) -> np.ndarray:
    """The innermost module occurrence open on each event row's thread when it started."""
    return _innermost(occ["thread"], occ["start"], occ["end"], occ["parent"],
                      thread_key(events)[rows], events["ts"].to_numpy()[rows])


def _backward_roots(events: pd.DataFrame, tree: OpTree) -> tuple[np.ndarray, np.ndarray]:
    """Per tree node: the outermost evaluate_function range at or above it (-1: none); and per
    node the group head (the backward range an AccumulateGrad range follows, else itself)."""
    names = events["name"].iloc[tree.rows]
    hit = name_mask(names, lambda n: n.startswith(BACKWARD_ROOT_PREFIX)) & ~tree.merged
    outermost = np.full(len(tree.rows), -1, dtype=np.int64)
    current = np.arange(len(tree.rows))
    while (live := np.flatnonzero(current >= 0)).size:
        nodes = current[live]
        outermost[live] = np.where(hit[nodes], nodes, outermost[live])
        current[live] = tree.parent[nodes]
    roots = np.flatnonzero(hit & (outermost == np.arange(len(tree.rows))))
    accumulate = name_mask(names, lambda n: n == ACCUMULATE_GRAD)[roots]
    threads = thread_key(events)[tree.rows[roots]]
    # Tree nodes are in thread then time order: an AccumulateGrad range takes the last other
    # range before it on its thread.
    head = pd.Series(np.where(accumulate, np.nan, roots)).groupby(threads).ffill().to_numpy()
    head_of = np.full(len(tree.rows), -1, dtype=np.int64)
    head_of[roots] = np.where(np.isnan(head), roots, head).astype(np.int64)
    return outermost, head_of


def _module_backward(tables: TraceTables, tree: OpTree, flows: Flows, occ_node: np.ndarray,
                     occ: dict[str, np.ndarray], node_parent: np.ndarray) -> dict[str, Any]:
    """Backward host/device time per module node (self and with children) and the totals."""
    events = tables.events
    n = len(node_parent)
    pick = flows.cat == CATEGORIES.index("fwdbwd")
    src, dst = flows.src[pick], flows.dst[pick]
    position = np.full(len(events), -1, dtype=np.int64)
    position[tree.rows] = np.arange(len(tree.rows))
    outermost, head_of = _backward_roots(events, tree)
    bwd = position[dst]
    bwd = np.where(bwd >= 0, outermost[np.maximum(bwd, 0)], -1)
    fwd_occ = _occurrence_of(events, occ, src)
    linked = (bwd >= 0) & (fwd_occ >= 0)
    pairs = pd.DataFrame({"node": occ_node[fwd_occ[linked]], "head": head_of[bwd[linked]]}).drop_duplicates()
    roots = np.flatnonzero(head_of >= 0)
    members = pd.DataFrame({"head": head_of[roots], "root": roots})
    own = pairs.merge(members, on="head")[["node", "root"]]
    dur = events["dur"].to_numpy()[tree.rows]
    out = {"self": own, "total": _with_ancestors(own, node_parent)}
    sums = {}
    for key, frame in out.items():
        node, root = frame["node"].to_numpy(np.int64), frame["root"].to_numpy(np.int64)
        sums[f"host_{key}"] = np.bincount(node, weights=dur[root], minlength=n)
        sums[f"device_{key}"] = np.bincount(node, weights=tree.device_total_us[root], minlength=n)
    attributed = np.unique(own["root"].to_numpy(np.int64))
    sums["summary"] = {
        "ranges": int(len(roots)), "ranges_attributed": int(len(attributed)),
        "host_us": float(dur[roots].sum()), "host_attributed_us": float(dur[attributed].sum()),
        "device_us": float(tree.device_total_us[roots].sum()),
        "device_attributed_us": float(tree.device_total_us[attributed].sum()),
        "fwdbwd_flows": int(len(src)),
    }
    return sums


def _with_ancestors(pairs: pd.DataFrame, node_parent: np.ndarray) -> pd.DataFrame:
    """(node, root) pairs extended to every ancestor of the node, each pair once."""
    parts = [pairs]
    current = pairs
    while len(current := current.assign(node=node_parent[current["node"].to_numpy(np.int64)])
                  .query("node >= 0")):
        parts.append(current)
    return pd.concat(parts).drop_duplicates()


def module_view(tables: TraceTables, tree: OpTree, flows: Flows) -> dict[str, Any]:
    """The module tree as a flat list (`modules`, preorder, ids and parent ids; times in us),
    Plotly icicle columns (`icicle`, self times with branchvalues "remainder"), backward
    attribution totals (`backward`) and `warnings`. Definitions in the module docstring."""
    events = tables.events
    occ = _occurrences(events)
    warnings: list[str] = []
    if not len(occ["rows"]):
        return {"modules": [], "icicle": _icicle([]), "backward": None,
                "warnings": ["no nn.Module events: record the trace with with_stack=True (or with_modules=True)"]}
    labels = _label_codes(events["name"].iloc[occ["rows"]])
    # Nesting is per thread: a top-level occurrence on another thread starts its own root.
    occ_node, node_parent, node_first = _merge_paths(occ["parent"], labels)
    n = len(node_parent)
    dur = events["dur"].to_numpy()[occ["rows"]]  # as recorded: end - start loses nanoseconds
    child_dur = np.bincount(occ["parent"][occ["parent"] >= 0], weights=dur[occ["parent"] >= 0], minlength=len(dur))

    counted = ~tree.merged
    tree_occ = np.full(len(tree.rows), -1, dtype=np.int64)
    tree_occ[counted] = _occurrence_of(events, occ, tree.rows[counted])
    inside = tree_occ >= 0
    device_self = np.bincount(occ_node[tree_occ[inside]], weights=tree.device_self_us[inside], minlength=n)
    is_op = events["kind"].to_numpy()[tree.rows] == Kind.CPU_OP
    up = np.maximum(tree.parent, 0)
    nested_call = (tree.parent >= 0) & is_op[up] & (tree_occ[up] == tree_occ)
    calls = inside & is_op & counted & ~nested_call
    self_ops = np.bincount(occ_node[tree_occ[calls]], minlength=n)

    names = events["name"].iloc[tree.rows]
    region = inside & name_mask(names, lambda s: s.startswith(REGION_PREFIX))
    regions = np.bincount(occ_node[tree_occ[region]], minlength=n)
    backward = _module_backward(tables, tree, flows, occ_node, occ, node_parent)

    columns = {
        "occurrences": np.bincount(occ_node, minlength=n),
        "self_operators": self_ops,
        "operators": subtree_sums(node_parent, self_ops),
        "host_total_us": np.bincount(occ_node, weights=dur, minlength=n),
        "host_self_us": np.bincount(occ_node, weights=np.clip(dur - child_dur, 0.0, None), minlength=n),
        "device_total_us": subtree_sums(node_parent, device_self),
        "device_self_us": device_self,
        "backward_host_total_us": backward["host_total"],
        "backward_host_self_us": backward["host_self"],
        "backward_device_total_us": backward["device_total"],
        "backward_device_self_us": backward["device_self"],
        "compiled_regions": regions,
    }
    names_of = events["name"].iloc[occ["rows"][node_first]].astype(str).str.slice(len(MODULE_PREFIX)).to_numpy()
    modules = []
    for i in _preorder(node_parent, occ["start"][node_first]).tolist():
        row = {"id": i, "parent_id": int(node_parent[i]) if node_parent[i] >= 0 else None, "name": names_of[i]}
        row.update({k: v[i] for k, v in columns.items()})
        row["avg_host_total_us"] = row["host_total_us"] / row["occurrences"]
        row["avg_device_total_us"] = row["device_total_us"] / row["occurrences"]
        modules.append(clean_row(row))
    if regions.any():
        holders = ", ".join(sorted({m["name"] for m in modules if m["compiled_regions"]}))
        warnings.append(f"{int(regions.sum())} torch.compile region call(s) ran inside {holders}: submodules inside "
                        "compiled code record no module events, so that time is the holder's self time")
    if backward["summary"]["fwdbwd_flows"] == 0:
        warnings.append("no fwdbwd flows in the trace: backward time cannot be attributed to modules")
    return {"modules": modules, "icicle": _icicle(modules), "backward": clean_row(backward["summary"]),
            "warnings": warnings}


def _icicle(modules: list[dict[str, Any]]) -> dict[str, Any]:
    """Columns for a Plotly icicle: values are self times, so branchvalues is "remainder"."""
    return {
        "branchvalues": "remainder",
        "ids": [str(m["id"]) for m in modules],
        "labels": [m["name"] for m in modules],
        "parents": ["" if m["parent_id"] is None else str(m["parent_id"]) for m in modules],
        "host_us": [m["host_self_us"] for m in modules],
        "device_us": [m["device_self_us"] for m in modules],
        "backward_device_us": [m["backward_device_self_us"] for m in modules],
    }


# -- operator tree of the main thread ---------------------------------------------------------


def main_thread(events: pd.DataFrame, tree: OpTree) -> int | None:
    """Thread key of the thread with ProfilerStep ranges, else of the one with most module
    calls (the autograd thread may run more operators), else with most operators."""
    threads = thread_key(events)[tree.rows]
    names = events["name"].iloc[tree.rows]
    steps = np.flatnonzero(name_mask(names, lambda n: n.startswith(STEP_PREFIX)))
    if len(steps):
        return int(threads[steps[0]])
    modules = _occurrences(events)["thread"]
    ops = threads[(events["kind"].to_numpy()[tree.rows] == Kind.CPU_OP) & ~tree.merged]
    for found in (modules, ops):
        if len(found):
            values, counts = np.unique(found, return_counts=True)
            return int(values[counts.argmax()])
    return None


def _tree_items(events: pd.DataFrame, tree: OpTree, thread: int) -> dict[str, np.ndarray]:
    """The thread's unfolded tree nodes and module occurrences, nested by time (a module
    before an operator that starts and ends with it: the module calls the operator)."""
    keys = thread_key(events)
    nodes = np.flatnonzero((keys[tree.rows] == thread) & ~tree.merged)
    occ = _occurrences(events)
    occ_rows = occ["rows"][occ["thread"] == thread]
    rows = np.concatenate([tree.rows[nodes], occ_rows])
    ts = events["ts"].to_numpy()[rows]
    dur = events["dur"].to_numpy()[rows]
    is_module = np.arange(len(rows)) >= len(nodes)
    order, parent = _nested(np.zeros(len(rows), dtype=np.int64), ts, ts + dur, first=is_module)
    device_self = np.concatenate([tree.device_self_us[nodes], np.zeros(len(occ_rows))])
    # Own runtime calls' time: launches (and syncs, copies) whose launcher is the node.
    kind = events["kind"].to_numpy()
    calls = np.flatnonzero(of_kinds(kind, (Kind.RUNTIME, Kind.DRIVER)) & (tree.launcher >= 0))
    runtime = np.bincount(tree.launcher[calls], weights=np.nan_to_num(events["dur"].to_numpy()[calls]),
                          minlength=len(tree.rows))
    runtime_self = np.concatenate([runtime[nodes], np.zeros(len(occ_rows))])
    return {"rows": rows[order], "parent": parent, "dur": dur[order], "device_self": device_self[order],
            "runtime": runtime_self[order]}


def _kept(parent: np.ndarray, host_total: np.ndarray) -> np.ndarray:
    """Which merged nodes to show: the `MAX_CHILDREN` longest children of a shown node, at most
    `MAX_TREE_NODES` in all, shallowest first (nodes are numbered level by level)."""
    n = len(parent)
    keep = np.zeros(n, dtype=bool)
    sibling_rank = pd.Series(-host_total).groupby(parent).rank(method="first").to_numpy()
    rank = np.full(n, np.inf)
    depth = _depths(parent)
    for level in range(int(depth.max()) + 1 if n else 0):
        at = np.flatnonzero(depth == level)
        up = parent[at]
        ok = sibling_rank[at] <= MAX_CHILDREN
        if level:
            ok &= keep[up]
        # Breadth-first position: by the parent's position, then by host total.
        order = np.lexsort((-host_total[at], rank[up] if level else np.zeros(len(at))))
        at, ok = at[order], ok[order]
        budget = MAX_TREE_NODES - int(keep.sum())
        chosen = at[ok][:max(budget, 0)]
        keep[chosen] = True
        rank[chosen] = np.arange(len(chosen)) + (rank[keep].max() + 1 if level else 0)
    return keep


def operator_tree(tables: TraceTables, tree: OpTree) -> dict[str, Any]:
    """The main thread's operators, annotations and modules as a tree whose same-named siblings
    are merged (`nodes`: preorder, with ids, parent ids, children ids, calls, host and device
    total/self in us), `thread` (pid, tid), `truncated` and `warnings`. See the docstring."""
    events = tables.events
    thread = main_thread(events, tree)
    if thread is None:
        return {"thread": None, "nodes": [], "truncated": False, "warnings": ["no operators in this trace"]}
    items = _tree_items(events, tree, thread)
    parent = items["parent"]
    child_dur = np.bincount(parent[parent >= 0], weights=items["dur"][parent >= 0], minlength=len(parent))
    host_self = np.clip(items["dur"] - child_dur - items["runtime"], 0.0, None)
    item_node, node_parent, node_first = _merge_paths(parent, _label_codes(events["name"].iloc[items["rows"]]))
    n = len(node_parent)
    device_self = np.bincount(item_node, weights=items["device_self"], minlength=n)
    columns = {
        "calls": np.bincount(item_node, minlength=n),
        "host_total_us": np.bincount(item_node, weights=items["dur"], minlength=n),
        "host_self_us": np.bincount(item_node, weights=host_self, minlength=n),
        "device_total_us": subtree_sums(node_parent, device_self),
        "device_self_us": device_self,
    }
    keep = _kept(node_parent, columns["host_total_us"])
    names = events["name"].iloc[items["rows"][node_first]].astype(str).to_numpy()
    first_start = events["ts"].to_numpy()[items["rows"][node_first]]
    nodes = _shown_nodes(node_parent, keep, first_start, names, columns)
    first = items["rows"][0]
    return {"thread": {"pid": str(events["pid"].iat[first]), "tid": str(events["tid"].iat[first])},
            "nodes": nodes, "truncated": bool(not keep.all()), "warnings": []}


def _shown_nodes(parent: np.ndarray, keep: np.ndarray, start: np.ndarray, names: np.ndarray,
                 columns: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Kept nodes in preorder (siblings in order of first call) with one `… N more` node under
    each kept node whose children were not all kept."""
    dropped = ~keep & (parent >= 0)
    dropped &= keep[np.maximum(parent, 0)]
    more_count = np.bincount(parent[dropped], minlength=len(parent))
    more = {k: np.bincount(parent[dropped], weights=v[dropped], minlength=len(parent)) for k, v in columns.items()}
    out: dict[int, dict[str, Any]] = {}
    order = [i for i in _preorder(np.where(keep, parent, -2), start).tolist() if keep[i]]
    next_id = len(parent)
    for i in order:
        row = {"id": i, "parent_id": int(parent[i]) if parent[i] >= 0 else None, "name": names[i],
               **{k: v[i] for k, v in columns.items()}, "children": []}
        out[i] = clean_row(row)
        if row["parent_id"] is not None:
            out[row["parent_id"]]["children"].append(i)
    for i in np.flatnonzero(more_count).tolist():
        label = f"… {int(more_count[i])} more"
        row = {"id": next_id, "parent_id": i, "name": label, **{k: v[i] for k, v in more.items()}, "children": []}
        out[next_id] = clean_row(row)
        out[i]["children"].append(next_id)
        next_id += 1
    return list(out.values())
