"""torch.compile view: compiled regions, graph breaks, compiled autograd pieces, the kernel
mix and where a first call's compile time went.

1. Compiled regions: each `Torch-Compiled Region: F/G` event (PyTorch >= 2.2; F is the
   Dynamo frame id, G the recompile index) covers one run of a compiled frame's code. At a
   graph break Dynamo runs the unsupported code eagerly and continues in a resume function,
   a new frame (F > the first) whose region opens *inside* the region that broke; a function
   that broke while being inlined gets its own region there too. So regions nest, per thread.
   A compiled call is a top-level region with every region nested in it; its graph breaks
   are its regions less one (one piece is the graph itself), its depth the deepest nesting
   (1 = no nesting). Two top-level regions one after another (a compiled model, then a
   compiled loss) are two calls, not a break.
2. Where a break is: for each nested region, the innermost user Python frame open on its
   thread when it started (from `python_function` events or the `Call stack` argument of
   traces recorded with stacks), else just the region and the region it broke out of.
3. Time in compiled code per step: the union of the regions' ranges inside the step; the rest
   of the step is outside compiled code (eager code, the optimizer, data loading, ...).
4. Compiled autograd pieces: `CompiledFunction` (a compiled graph's forward, when inputs need
   grad) and `CompiledFunctionBackward` events; each graph break splits both. A forward and
   a backward piece pair up through the trace's fwdbwd flow; pieces with no partner are listed
   (a forward whose backward fell outside the trace, or ran under no_grad, ...).
5. Kernel mix: Triton kernels are those named `triton_*` (Inductor's `triton_poi_`, `_red_`,
   `_per_`, `_tem_`); the others are aten, cuBLAS, cuDNN, NCCL, ... kernels, by name family.
   Launch calls are counted by API: driver `cuLaunchKernel*` (how Triton launches) versus
   runtime `cudaLaunchKernel*` (aten and libraries), and `cudaGraphLaunch` (CUDA graphs).
6. First-call compile break-down: torch.compile records its phases as `record_function`
   ranges (`dynamo_timed`; each key once plain, e.g. `backend_compile`, with the function it
   times nested in it as `... (dynamo_timed)`). The outermost ranges that are or hold a
   `(dynamo_timed)` one are the roots: a frame's compile (`entire_frame_compile`, inside
   `dynamo` on recent PyTorch, which adds guard set-up and gc around it), the backward graph's
   compile (`entire_backward_compile`, at the first backward) and, outside both, Triton's
   autotuning when the compiled code first runs (`CachingAutotuner.benchmark_all_configs`).
   Every host event inside a root is nested on its thread; its exclusive time (its length
   less its children's) goes to the phase of the innermost range above it that names one:
   - Dynamo tracing: `entire_frame_compile`, `_compile.compile_inner`, `compile_attempt_N`,
     `bytecode_tracing`, `build_guards`, ... (bytecode analysis, guards, the graph output);
   - Backend (other): `backend_compile` / `OutputGraph.call_user_compiler` not inside a
     phase below (the backend's own set-up);
   - AOT autograd: `create_aot_dispatcher_function`, `aot_collect_metadata`,
     `aot_trace_joint_graph`, `min_cut_rematerialization_partition`, `entire_backward_compile`;
   - Inductor passes and lowering: `inductor_compile`, `compile_fx_inner`,
     `fx_codegen_and_compile`, the pre-/joint-/post-grad graph passes, `GraphLowering.run`;
   - Inductor codegen: `GraphLowering.codegen`/`compile_to_module`, `Scheduler.*`, wrapper
     code generation;
   - Triton compilation: `PyCodeCache.load_by_key_path`, `async_compile.*` (compiling the
     generated kernels), `TritonBundler.*`;
   - Triton autotuning: `CachingAutotuner.benchmark_all_configs` and other autotuning.
   Exclusive times never double count, and per root they add up to the root's length.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ..trace.schema import HOST_OP_KINDS, LAUNCH_KINDS, Kind
from ..trace.tables import TraceTables
from . import ranges
from .callstacks import op_stacks, user_frame
from .flows import build_flows
from .kinds import of_kinds
from .compile_ops import aten_in_graphs
from .launch import is_graph_launch, launch_overhead
from .names import name_mask, names_at
from .optree import OpTree, nest, thread_key
from .records import clean, clean_row
from .steps import Steps, detect_steps, step_of

REGION_PREFIX = "Torch-Compiled Region"
FORWARD_PIECE = "CompiledFunction"
BACKWARD_PIECE = "CompiledFunctionBackward"
TIMED_SUFFIX = " (dynamo_timed)"
_REGION = re.compile(r"^Torch-Compiled Region: \[?(\d+)/(\d+)")
MAX_LOCATIONS = 50
MAX_UNPAIRED = 50
MAX_TOP_RANGES = 15

# (phase, label, name pattern) in matching order; names are matched without " (dynamo_timed)".
PHASES: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("autotuning", "Triton autotuning", re.compile(r"autotun|benchmark_all_configs|select_algorithm", re.I)),
    ("triton_compile", "Triton compilation", re.compile(r"^(PyCodeCache\.|async_compile\.|TritonBundler\.)")),
    ("inductor_codegen", "Inductor codegen",
     re.compile(r"^(GraphLowering\.(codegen|compile_to_)|Scheduler\.|\w*Codegen\.|code_gen)")),
    ("inductor_lowering", "Inductor passes and lowering",
     re.compile(r"^(inductor_|compile_fx|fx_codegen_and_compile|GraphLowering\.|_recursive_\w+_passes|pass\.|"
                r"additional_fake_tensor_prop)")),
    ("aot_autograd", "AOT autograd",
     re.compile(r"^(create_aot_dispatcher_function|aot_|min_cut_rematerialization_partition|"
                r"entire_backward_compile|backward\._backward_impl)")),
    ("backend", "Backend (other)", re.compile(r"^(backend_compile|OutputGraph\.call_user_compiler)")),
    ("dynamo", "Dynamo tracing",
     re.compile(r"^(entire_frame_compile|_compile\.|compile_attempt_|bytecode_tracing|build_guards|gc$|"
                r"insert_deferred_runtime_asserts|OutputGraph\.|dynamo)")),
)
PASSES = ("forward", "backward", "first_run")
_BACKWARD_ROOTS = ("entire_backward_compile", "backward._backward_impl")


def _plain(name: str) -> str:
    return name[:-len(TIMED_SUFFIX)] if name.endswith(TIMED_SUFFIX) else name


def compile_phase(name: str) -> str | None:
    """The break-down phase a compile range's name belongs to (None: not a phase name)."""
    plain = _plain(name)
    for phase, _, pattern in PHASES:
        if pattern.search(plain):
            return phase
    return None


def _is_region(name: str) -> bool:
    return name.startswith(REGION_PREFIX)


def _is_compiled_marker(name: str) -> bool:
    return _is_region(name) or name in (FORWARD_PIECE, BACKWARD_PIECE) or name.endswith(TIMED_SUFFIX)


def has_compiled_code(tables: TraceTables) -> bool:
    """Whether the trace shows torch.compile at work: a compiled region, a CompiledFunction
    piece or a dynamo_timed compile range (the view registry's check)."""
    return bool(any(_is_compiled_marker(str(c)) for c in tables.events["name"].cat.categories))


# -- shared helpers ---------------------------------------------------------------------------


def _host_rows(events: pd.DataFrame, predicate) -> np.ndarray:
    """Rows of host operators/annotations whose name satisfies `predicate`."""
    host = of_kinds(events["kind"].to_numpy(), HOST_OP_KINDS)
    return np.flatnonzero(host & name_mask(events["name"], predicate))


def _nested(events: pd.DataFrame, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`rows` reordered parents-first per thread, and each one's parent position (-1: top)."""
    ts = events["ts"].to_numpy()[rows]
    end = ts + events["dur"].to_numpy()[rows]
    threads = thread_key(events)[rows]
    order = np.lexsort((-end, ts, threads))
    rows = rows[order]
    return rows, nest(threads[order], ts[order], end[order])


def _span(events: pd.DataFrame, row: int) -> dict[str, float]:
    start = float(events["ts"].iat[row])
    return {"start_us": start, "end_us": start + float(events["dur"].iat[row])}


# -- regions and graph breaks -----------------------------------------------------------------


def _region_label(name: str) -> str:
    match = _REGION.match(name)
    return f"{match.group(1)}/{match.group(2)}" if match else name


def _region_tree(events: pd.DataFrame) -> pd.DataFrame:
    """One row per region: events row, parent position, depth (0 top), its call's position."""
    rows, parent = _nested(events, _host_rows(events, _is_region))
    depth = np.zeros(len(rows), dtype=np.int64)
    call = np.arange(len(rows))
    for i, up in enumerate(parent.tolist()):  # parents come first
        if up >= 0:
            depth[i], call[i] = depth[up] + 1, call[up]
    return pd.DataFrame({"row": rows, "parent": parent, "depth": depth, "call": call})


def _break_locations(events: pd.DataFrame, tree: pd.DataFrame) -> list[dict[str, Any]]:
    """Distinct places where a call broke (see note 2), most frequent first."""
    nested = tree[tree["parent"] >= 0]
    if nested.empty:
        return []
    rows = nested["row"].to_numpy()
    stacks = op_stacks(events, rows)
    parent_rows = tree["row"].to_numpy()[nested["parent"].to_numpy()]
    table = pd.DataFrame({
        "row": rows,
        "region": [_region_label(str(n)) for n in names_at(events["name"], rows)],
        "parent_region": [_region_label(str(n)) for n in names_at(events["name"], parent_rows)],
        "frame": [user_frame(stacks.frames[s]) if s >= 0 else None for s in stacks.of_row[rows]],
    })
    out = []
    for (region, parent, frame), group in table.groupby(["region", "parent_region", "frame"], dropna=False,
                                                        sort=False):
        first = int(group["row"].iloc[0])
        frame = None if pd.isna(frame) else frame
        where = frame or f"region {region} inside region {parent}"
        out.append({"region": region, "parent_region": parent, "frame": frame,
                    "frames": list(stacks.frames[stacks.of_row[first]]) if stacks.of_row[first] >= 0 else [],
                    "count": len(group), "event_id": first, "label": f"graph break: {where}",
                    **_span(events, first)})
    out.sort(key=lambda item: -item["count"])
    return out[:MAX_LOCATIONS]


def compiled_regions(tables: TraceTables, steps: Steps | None = None) -> dict[str, Any]:
    """Compiled calls and graph breaks (note 1), their locations (note 2) and per step the
    calls, regions, breaks, depth and time inside compiled code (note 3), in us."""
    events = tables.events
    steps = steps or detect_steps(events)
    tree = _region_tree(events)
    ts = events["ts"].to_numpy()
    end = ts + events["dur"].to_numpy()
    rows = tree["row"].to_numpy()
    calls = tree.groupby("call").agg(regions=("row", "size"), depth=("depth", "max"))
    top = rows[calls.index.to_numpy()]
    call_table = pd.DataFrame({
        "row": top, "regions": calls["regions"].to_numpy(), "depth": calls["depth"].to_numpy() + 1,
        "step": step_of(steps, ts[top]),
    })
    call_table["graph_breaks"] = call_table["regions"] - 1
    inside = ranges.union(ts[rows], end[rows])
    return {
        "steps": [_region_step(steps, i, call_table, inside) for i in range(len(steps.names))],
        "calls": [_call_row(events, steps, r) for r in call_table.itertuples()],
        "summary": _region_summary(call_table),
        "locations": _break_locations(events, tree),
    }


def _region_step(steps: Steps, i: int, calls: pd.DataFrame, inside: ranges.RangeSet) -> dict[str, Any]:
    mine = calls[calls["step"] == i]
    lo, hi = float(steps.starts[i]), float(steps.ends[i])
    compiled = ranges.clip_total(inside, lo, hi)
    total = hi - lo
    return clean_row({
        "step": steps.names[i], "start_us": lo, "end_us": hi, "total_us": total,
        "calls": len(mine), "regions": int(mine["regions"].sum()), "graph_breaks": int(mine["graph_breaks"].sum()),
        "max_depth": int(mine["depth"].max()) if len(mine) else 0,
        "compiled_us": compiled, "outside_us": total - compiled,
        "compiled_ratio": compiled / total if total > 0 else None,
    })


def _call_row(events: pd.DataFrame, steps: Steps, call: Any) -> dict[str, Any]:
    row = int(call.row)
    return clean_row({"event_id": row, "region": _region_label(str(events["name"].iat[row])),
                      "step": steps.names[call.step] if call.step >= 0 else None, **_span(events, row),
                      "regions": int(call.regions), "graph_breaks": int(call.graph_breaks), "depth": int(call.depth)})


def _region_summary(calls: pd.DataFrame) -> dict[str, Any]:
    breaks = calls["graph_breaks"].to_numpy()
    return {
        "calls": len(calls), "regions": int(calls["regions"].sum()), "graph_breaks": int(breaks.sum()),
        # The typical call: what "N graph breaks per forward" means.
        "graph_breaks_per_call": int(np.median(breaks)) if len(breaks) else 0,
        "max_graph_breaks_per_call": int(breaks.max()) if len(breaks) else 0,
        "max_depth": int(calls["depth"].max()) if len(calls) else 0,
    }


# -- CompiledFunction pieces ------------------------------------------------------------------


def compiled_pieces(tables: TraceTables, steps: Steps | None = None) -> dict[str, Any]:
    """CompiledFunction (forward) and CompiledFunctionBackward pieces per step, paired through
    fwdbwd flows (note 4)."""
    events = tables.events
    steps = steps or detect_steps(events)
    forward = _host_rows(events, lambda n: n == FORWARD_PIECE)
    backward = _host_rows(events, lambda n: n == BACKWARD_PIECE)
    flows = build_flows(tables, np.ones(len(events), dtype=bool), launch=False)
    pairs = pd.DataFrame({"src": flows.src, "dst": flows.dst})
    pairs = pairs[pairs["src"].isin(forward) & pairs["dst"].isin(backward)].drop_duplicates("src")
    paired_forward = np.isin(forward, pairs["src"].to_numpy())
    paired_backward = np.isin(backward, pairs["dst"].to_numpy())
    ts = events["ts"].to_numpy()
    f_step, b_step = step_of(steps, ts[forward]), step_of(steps, ts[backward])
    per_step = [clean_row({
        "step": name, "forward": int((f_step == i).sum()), "backward": int((b_step == i).sum()),
        "paired": int((paired_forward & (f_step == i)).sum()),
        "unpaired_forward": int((~paired_forward & (f_step == i)).sum()),
        "unpaired_backward": int((~paired_backward & (b_step == i)).sum()),
        "forward_us": float(events["dur"].to_numpy()[forward[f_step == i]].sum()),
        "backward_us": float(events["dur"].to_numpy()[backward[b_step == i]].sum()),
    }) for i, name in enumerate(steps.names)]
    unpaired = np.sort(np.concatenate([forward[~paired_forward], backward[~paired_backward]]))
    return {
        "steps": per_step,
        "forward": len(forward), "backward": len(backward), "paired": len(pairs),
        "pairs": [{"forward_event_id": int(s), "backward_event_id": int(d)} for s, d in pairs.itertuples(index=False)],
        "unpaired": [{"event_id": int(r), "name": str(events["name"].iat[r]), **_span(events, int(r))}
                     for r in unpaired[:MAX_UNPAIRED]],
    }


# -- kernel mix ---------------------------------------------------------------------------------

_FAMILIES = (
    ("triton", re.compile(r"^triton_")),
    ("communication", re.compile(r"nccl|rccl", re.I)),
    ("cudnn", re.compile(r"cudnn|^(sm\d+_)?xmma_(fprop|dgrad|wgrad)|implicit_convolve|conv", re.I)),
    ("cublas", re.compile(r"gemm|nvjet|cutlass|cublas|^sm\d+_xmma|gemv|dot_kernel", re.I)),
    ("flash_attention", re.compile(r"flash|fmha|attention", re.I)),
    ("aten", re.compile(r"at::native|at_cuda_detail|^void at::|elementwise|reduce_kernel", re.I)),
)
_LAUNCH = re.compile(r"Launch")


def kernel_family(name: str) -> str:
    """`triton` for Inductor's kernels, else the library a kernel name points to (or `other`)."""
    for family, pattern in _FAMILIES:
        if pattern.search(name):
            return family
    return "other"


def launch_api(name: str) -> str:
    """How a launch call launches: `driver` (cuLaunchKernel*), `graph` (cudaGraphLaunch) or `runtime`."""
    if is_graph_launch(name):
        return "graph"
    return "driver" if name.startswith("cu") and not name.startswith("cuda") else "runtime"


def kernel_mix(tables: TraceTables) -> dict[str, Any]:
    """Kernel time and count by family (note 5), Triton versus the rest, and launch calls by API."""
    events = tables.events
    kind = events["kind"].to_numpy()
    kernels = events[kind == Kind.KERNEL]
    families = _by_name(kernels["name"], kernel_family)
    dur = kernels["dur"].to_numpy()
    table = pd.DataFrame({"family": families, "dur": dur}).groupby("family")["dur"].agg(["size", "sum"])
    total = float(dur.sum())
    rows = [clean_row({"family": f, "kernels": int(r["size"]), "total_us": float(r["sum"]),
                       "time_ratio": float(r["sum"]) / total if total > 0 else None})
            for f, r in table.sort_values("sum", ascending=False).iterrows()]
    triton = families == "triton"
    launches = events[of_kinds(kind, LAUNCH_KINDS) & name_mask(events["name"], lambda n: bool(_LAUNCH.search(n)))]
    calls = launches.groupby(launches["name"].astype(str))["dur"].agg(["size", "sum"])
    return {
        "triton": clean_row({"kernels": int(triton.sum()), "total_us": float(dur[triton].sum())}),
        "other": clean_row({"kernels": int((~triton).sum()), "total_us": float(dur[~triton].sum())}),
        "triton_time_ratio": clean("triton_time_ratio", float(dur[triton].sum()) / total if total > 0 else None),
        "families": rows,
        "launches": [clean_row({"name": n, "api": launch_api(n), "calls": int(r["size"]), "total_us": float(r["sum"])})
                     for n, r in calls.sort_values("size", ascending=False).iterrows()],
    }


def _by_name(names: pd.Series, label) -> np.ndarray:
    """Per row: `label(name)`, evaluated once per distinct name."""
    labels = np.array([label(str(c)) for c in names.cat.categories] + [""], dtype=object)
    codes = names.cat.codes.to_numpy()
    return labels[np.where(codes >= 0, codes, len(labels) - 1)]


# -- first-call compile break-down --------------------------------------------------------------


def _is_compile_range(name: str) -> bool:
    return name.endswith(TIMED_SUFFIX) or compile_phase(name) is not None


def _root_pass(name: str) -> str:
    plain = _plain(name)
    if plain in _BACKWARD_ROOTS:
        return "backward"
    return "first_run" if compile_phase(plain) == "autotuning" else "forward"


def compile_breakdown(tables: TraceTables) -> dict[str, Any]:
    """Where compile time went (note 6): per phase and pass (forward frame compile, backward
    compile, first-run autotuning) the exclusive time in us, the roots, and the costliest ranges."""
    events = tables.events
    roots = _compile_roots(events)
    empty = {"total_us": 0.0, **{f"{p}_us": 0.0 for p in PASSES}, "roots": [], "top": [],
             "phases": [{"phase": p, "label": label, "total_us": 0.0, **{f"{q}_us": 0.0 for q in PASSES}}
                        for p, label, _ in PHASES[::-1]]}
    if not len(roots):
        return empty
    rows, parent = _nested(events, _inside(events, roots))
    names = names_at(events["name"], rows).astype(str)
    self_us, root_of = _exclusive(events, rows, parent)
    phase = _inherited_phase(names, parent)
    passes = np.array([_root_pass(str(n)) for n in names[root_of]], dtype=object)
    plain = np.array([_plain(n) for n in names], dtype=object)
    # A key's plain range and its "(dynamo_timed)" twin inside it are one call.
    twin = (parent >= 0) & (plain == plain[np.maximum(parent, 0)])
    frame = pd.DataFrame({"name": plain, "phase": phase, "pass": passes, "self": self_us, "call": ~twin})
    by = frame.groupby(["phase", "pass"])["self"].sum()
    phases = []
    for p, label, _ in PHASES[::-1]:  # pipeline order: Dynamo first, autotuning last
        row = {f"{q}_us": float(by.get((p, q), 0.0)) for q in PASSES}
        phases.append(clean_row({"phase": p, "label": label, "total_us": sum(row.values()), **row}))
    root_rows = np.sort(rows[parent < 0])  # events rows are in time order
    root_table = [clean_row({"name": str(events["name"].iat[r]), "pass": _root_pass(str(events["name"].iat[r])),
                             "event_id": int(r), **_span(events, int(r)), "dur_us": float(events["dur"].iat[r])})
                  for r in root_rows]
    named = frame[[compile_phase(n) is not None for n in frame["name"]]]
    top = named.groupby("name").agg(phase=("phase", "first"), calls=("call", "sum"), self_us=("self", "sum"))
    return {
        "total_us": clean("total_us", float(self_us.sum())),
        **{f"{q}_us": clean("_us", float(frame.loc[frame["pass"] == q, "self"].sum())) for q in PASSES},
        "phases": phases,
        "roots": root_table,
        "top": [clean_row({"name": n, "phase": r["phase"], "calls": int(r["calls"]), "self_us": float(r["self_us"])})
                for n, r in top.sort_values("self_us", ascending=False).head(MAX_TOP_RANGES).iterrows()],
    }


def _compile_roots(events: pd.DataFrame) -> np.ndarray:
    """The outermost compile ranges that are, or hold, a `(dynamo_timed)` range: a phase name
    alone (a user's `record_function("pass.x")`) makes no root."""
    candidates, parent = _nested(events, _host_rows(events, _is_compile_range))
    timed = np.char.endswith(names_at(events["name"], candidates).astype(str), TIMED_SUFFIX)
    for i in range(len(candidates) - 1, -1, -1):  # children come after their parents
        if timed[i] and parent[i] >= 0:
            timed[parent[i]] = True
    return candidates[(parent < 0) & timed]


def _inside(events: pd.DataFrame, roots: np.ndarray) -> np.ndarray:
    """Host events (the roots included) inside a root, on the root's thread."""
    ts = events["ts"].to_numpy()
    end = ts + events["dur"].to_numpy()
    threads = thread_key(events)
    host = np.flatnonzero(of_kinds(events["kind"].to_numpy(), HOST_OP_KINDS))
    keep = np.zeros(len(host), dtype=bool)
    for thread in np.unique(threads[roots]):
        mine = roots[threads[roots] == thread]
        covered = ranges.union(ts[mine], end[mine])
        on = threads[host] == thread
        # A root's start is inside it; ends are exclusive, so test the start.
        keep |= on & ranges.covers(covered, ts[host])
    return host[keep]


def _exclusive(events: pd.DataFrame, rows: np.ndarray, parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per nested row: its length less its children's (ends clipped to the parent's, so the
    times of a root's subtree add up to its length), and the position of its root."""
    start = events["ts"].to_numpy()[rows]
    end = start + events["dur"].to_numpy()[rows]
    root_of = np.arange(len(rows))
    for i, up in enumerate(parent.tolist()):  # parents come first
        if up >= 0:
            end[i] = min(end[i], end[up])
            root_of[i] = root_of[up]
    length = np.clip(end - start, 0.0, None)
    has = parent >= 0
    children = np.bincount(parent[has], weights=length[has], minlength=len(rows))
    return length - children, root_of


def _inherited_phase(names: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Per nested row: its own phase, else the innermost enclosing range's (the root's default:
    Dynamo tracing)."""
    own = {n: compile_phase(n) for n in set(names.tolist())}
    phase = np.empty(len(names), dtype=object)
    for i, (name, up) in enumerate(zip(names.tolist(), parent.tolist())):
        phase[i] = own[name] or (phase[up] if up >= 0 else "dynamo")
    return phase


def compiled_view(tables: TraceTables, steps: Steps, tree: OpTree) -> dict[str, Any]:
    """The torch.compile view's data: regions, pieces, kernel mix, compile break-down, launch overhead
    per step (launch.py) and the aten operators compiled graphs ran (compile_ops.py)."""
    return {
        "regions": compiled_regions(tables, steps),
        "pieces": compiled_pieces(tables, steps),
        "kernels": kernel_mix(tables),
        "compile": compile_breakdown(tables),
        "launch": launch_overhead(tables, steps),
        "aten": aten_in_graphs(tables, tree),
        "warnings": list(steps.warnings),
    }
