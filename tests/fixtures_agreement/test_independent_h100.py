"""Overview numbers on PyTorch 2.x traces agree with the definitions applied directly to the raw events.

On 2.x traces the reference plugin is no oracle (it counts every step twice, reports 0 Runtime
and misses NCCL kernels), so this file recomputes the overview from the raw JSON with plain
Python (gzip + json, sort + merge; nothing from profboard) and compares profboard's numbers to
it: durations within max(1% of the step's total, 1 us), ratios within 0.01.

The definitions (DESIGN.md, server/analysis/steps.py and overview.py docstrings):
- Steps are the host `ProfilerStep#N` events (cat cpu_op / user_annotation, not the GPU-side
  gpu_user_annotation copies). A CUDA runtime/driver call lying inside a host step owns the
  kernels, memcpys and memsets with its correlation id; a step ends at the later of its host
  end and its owned device work's end, and starts no earlier than the previous step's end (the
  first one no earlier than the end of unowned device work finished before its own first
  device activity). Trailing steps that launched nothing are dropped, and so is the last one
  that launched under 80% of the device events of the one before. With no ProfilerStep the
  trace is one step "0" from the first host op to the end of the last.
- Each microsecond of a step goes to the first category covering it: Kernel (non-NCCL) >
  Memcpy > Memset > Communication (NCCL kernels, gloo ops) > Runtime (cuda_runtime,
  cuda_driver) > DataLoader > CPU Exec (host ops but ProfilerStep, DataLoader, gloo) > Other.
- GPU utilization: union of the device's kernels within [first step start, last step end] /
  that span. SM efficiency: time integral of min(sum of concurrent kernels' blocks per SM, 1)
  over the span / span. Achieved occupancy: kernels' occupancy weighted by their time in the span.
"""

from __future__ import annotations

import pytest

from shared_traces import TORCH2_RUNS, FixtureTrace, every_trace

CATEGORIES = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec", "other")
STEP_PREFIX = "ProfilerStep#"
HOST_STEP_CATS = {"cpu_op", "operator", "user_annotation"}
HOST_OP_CATS = {"cpu_op", "operator", "user_annotation", "python"}
HOST_EXTENT_CATS = {"cpu_op", "operator", "python"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime"}
DEVICE_CATS = {"kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset"}


# --- interval arithmetic: lists of (start, end), merged = sorted, disjoint ----------------------


def merge(intervals) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(s, e) for s, e in out]


def clip(merged, lo: float, hi: float) -> list[tuple[float, float]]:
    return [(max(s, lo), min(e, hi)) for s, e in merged if e > lo and s < hi]


def length(merged) -> float:
    return sum(e - s for s, e in merged)


def overlap(a, b) -> float:
    """Length of the intersection of two merged lists."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


# --- the definitions, on the raw events ----------------------------------------------------------


def _complete_events(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e.get("ph") == "X"
            and isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0]


def _roles(events: list[dict]) -> dict[str, list[tuple[float, float]]]:
    """Merged intervals of each breakdown category (but "other"), from cat and name."""
    spans: dict[str, list] = {c: [] for c in CATEGORIES[:-1]}
    for e in events:
        cat, name = e.get("cat", "").lower(), e.get("name", "")
        interval = (e["ts"], e["ts"] + e["dur"])
        if cat == "kernel":
            is_comm = "nccl" in name.lower() or "rccl" in name.lower()
            spans["communication" if is_comm else "kernel"].append(interval)
        elif cat in ("gpu_memcpy", "memcpy"):
            spans["memcpy"].append(interval)
        elif cat in ("gpu_memset", "memset"):
            spans["memset"].append(interval)
        elif cat in LAUNCH_CATS:
            spans["runtime"].append(interval)
        elif cat in HOST_OP_CATS:
            if name.startswith("gloo:"):
                spans["communication"].append(interval)
            elif name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__"):
                spans["dataloader"].append(interval)
            elif not name.startswith(STEP_PREFIX):
                spans["cpu_exec"].append(interval)
    return {k: merge(v) for k, v in spans.items()}


def _steps(events: list[dict]) -> list[tuple[str, float, float]]:
    host = sorted((e["ts"], e["ts"] + e["dur"], e["name"][len(STEP_PREFIX):]) for e in events
                  if e.get("cat", "").lower() in HOST_STEP_CATS and e.get("name", "").startswith(STEP_PREFIX))
    if not host:
        extent = [e for e in events if e.get("cat", "").lower() in HOST_EXTENT_CATS]
        host = [(min(e["ts"] for e in extent), max(e["ts"] + e["dur"] for e in extent), "0")]

    # Which step launched each correlation id: the one whose host range holds the runtime call.
    owner_of: dict[int, int] = {}
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat", "").lower() in LAUNCH_CATS and corr is not None and corr != -1:
            start, end = e["ts"], e["ts"] + e["dur"]
            owner_of[corr] = next((i for i, (hs, he, _) in enumerate(host) if hs <= start and end <= he), -1)
    owned: list[list[tuple[float, float]]] = [[] for _ in host]
    unowned: list[tuple[float, float]] = []
    for e in events:
        if e.get("cat", "").lower() in DEVICE_CATS:
            owner = owner_of.get((e.get("args") or {}).get("correlation"), -1)
            (owned[owner] if owner >= 0 else unowned).append((e["ts"], e["ts"] + e["dur"]))
    if not any(owned):
        return [(name, start, end) for start, end, name in host]

    prev_end = host[0][0]
    if owned[0]:
        first_device = min(s for s, _ in owned[0])
        prev_end = max([prev_end] + [end for _, end in unowned if end < first_device])
    steps = []
    for (host_start, host_end, name), work in zip(host, owned):
        start = max(prev_end, host_start)
        end = max(host_end, start, *(end for _, end in work))
        steps.append((name, start, end))
        prev_end = end

    counts = [len(work) for work in owned]
    keep = len(steps)
    with_work = [i for i, n in enumerate(counts) if n]
    if len(steps) > 1 and with_work:
        last = with_work[-1]
        keep = last + 1
        if last > 0 and counts[last] < 0.8 * counts[last - 1]:
            keep = last
    return steps[:keep]


def _breakdown(roles, start: float, end: float) -> dict[str, float]:
    row = {"total_us": end - start}
    covered: list[tuple[float, float]] = []
    for category in CATEGORIES[:-1]:
        mine = clip(roles[category], start, end)
        row[f"{category}_us"] = length(mine) - overlap(mine, covered)
        covered = merge(covered + mine)
    row["other_us"] = (end - start) - length(covered)
    return row


def _gpus(events: list[dict], lo: float, hi: float) -> dict[int, dict[str, float | None]]:
    by_device: dict[int, list[dict]] = {}
    for e in events:
        if e.get("cat", "").lower() == "kernel":
            device = (e.get("args") or {}).get("device", e.get("pid"))
            by_device.setdefault(int(device), []).append(e)
    out = {}
    for device, kernels in by_device.items():
        spans = [(k["ts"], k["ts"] + k["dur"]) for k in kernels]
        busy = length(clip(merge(spans), lo, hi))

        # SM efficiency: sweep the summed blocks per SM of running kernels, capped at 1.
        edges = []
        for k in kernels:
            blocks = (k.get("args") or {}).get("blocks per SM")
            if isinstance(blocks, (int, float)) and blocks > 0 and k["dur"] > 0:
                edges += [(k["ts"], 0, blocks), (k["ts"] + k["dur"], 1, -blocks)]
        edges.sort()  # at equal times, starts before ends
        level, weighted = 0.0, 0.0
        for i in range(len(edges) - 1):
            level += edges[i][2]
            inside = min(edges[i + 1][0], hi) - max(edges[i][0], lo)
            if inside > 0:
                weighted += min(level, 1.0) * inside

        # Achieved occupancy, weighted by kernel time inside the span.
        num = den = 0.0
        for k in kernels:
            occupancy = (k.get("args") or {}).get("est. achieved occupancy %")
            inside = min(k["ts"] + k["dur"], hi) - max(k["ts"], lo)
            if isinstance(occupancy, (int, float)) and occupancy >= 0 and inside > 0:
                num += occupancy * inside
                den += inside
        out[device] = {
            "utilization_ratio": busy / (hi - lo),
            "sm_efficiency_ratio": weighted / (hi - lo) if edges else None,
            "achieved_occupancy_ratio": num / den / 100 if den else None,
        }
    return out


def _by_definition(trace: FixtureTrace) -> dict:
    events = _complete_events(trace.raw)
    steps = _steps(events)
    roles = _roles(events)
    rows = [{"step": name, **_breakdown(roles, start, end)} for name, start, end in steps]
    keys = [k for k in rows[0] if k != "step"]
    average = {k: sum(r[k] for r in rows) / len(rows) for k in keys}
    host_steps = sum(1 for e in events if e.get("cat", "").lower() in HOST_STEP_CATS
                     and e.get("name", "").startswith(STEP_PREFIX))
    return {"steps": rows, "average": average, "gpus": _gpus(events, steps[0][1], steps[-1][2]),
            "host_steps": host_steps}


def independent(trace: FixtureTrace) -> dict:
    """The overview by the definitions, from the raw events."""
    return trace.derived(_by_definition)


# --- the comparisons -----------------------------------------------------------------------------


def _close(got: float, want: float, total: float) -> bool:
    return abs(got - want) <= max(0.01 * total, 1.0)


@every_trace(*TORCH2_RUNS)
def test_steps(fixture_trace):
    got, want = fixture_trace.overview, independent(fixture_trace)
    names = [s["step"] for s in want["steps"]]
    assert [s["step"] for s in got["steps"]] == names
    # Every host ProfilerStep is a step, but trailing ones the profiler stopped in (trimmed, with a warning).
    trimmed = want["host_steps"] - len(names) if want["host_steps"] else 0
    assert trimmed >= 0
    assert (trimmed > 0) == any("left out trailing step" in w for w in got["warnings"]), got["warnings"]
    if want["host_steps"] == 0:
        assert names == ["0"] and any("no ProfilerStep" in w for w in got["warnings"])


@every_trace(*TORCH2_RUNS)
def test_step_breakdown(fixture_trace):
    got, want = fixture_trace.overview, independent(fixture_trace)
    assert len(got["steps"]) == len(want["steps"])
    problems = []
    for got_step, want_step in zip(got["steps"], want["steps"]):
        total = want_step["total_us"]
        for key, value in want_step.items():
            if key != "step" and not _close(got_step[key], value, total):
                problems.append(f"step {want_step['step']} {key}: profboard {got_step[key]:.3f}, independent {value:.3f}")
    assert not problems, "\n".join(problems)


@every_trace(*TORCH2_RUNS)
def test_average(fixture_trace):
    got, want = fixture_trace.overview["average"], independent(fixture_trace)["average"]
    problems = [f"{k}: profboard {got[k]:.3f}, independent {v:.3f}" for k, v in want.items()
                if not _close(got[k], v, want["total_us"])]
    assert not problems, "\n".join(problems)


@every_trace(*TORCH2_RUNS)
def test_gpu_metrics(fixture_trace):
    got = {g["device"]: g for g in fixture_trace.overview["gpus"]}
    want = independent(fixture_trace)["gpus"]
    assert set(got) == set(want)
    problems = []
    for device, metrics in want.items():
        for key, value in metrics.items():
            mine = got[device][key]
            if (value is None) != (mine is None) or (value is not None and abs(mine - value) > 0.01):
                problems.append(f"GPU {device} {key}: profboard {mine}, independent {value}")
    assert not problems, "\n".join(problems)


@every_trace("h200x4/ddp_resnet50")
def test_ddp_ranks_see_communication(fixture_trace):
    # NCCL kernels (ncclDevKernel_*) are communication, which the reference missed on 2.x traces.
    assert independent(fixture_trace)["average"]["communication_us"] > 0
    assert fixture_trace.overview["average"]["communication_us"] > 0
