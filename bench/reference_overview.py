"""Print the reference plugin's overview numbers for one trace, unrounded, as JSON.

    python bench/reference_overview.py TRACE_PATH

A correctness aid: the plugin's HTTP responses round to whole microseconds, so this
reads its internal objects instead (RunProfileData after parse). It re-executes itself
in the reference venv (bench/.ref-venv, see reference_plugin.py). Standard library only.
Units follow profboard's conventions: microseconds, and 0..1 ratios (the plugin keeps
occupancy in percent; it is divided by 100 here).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_plugin  # noqa: E402  (shared venv handling)

# ProfileRole order in the plugin (event_parser.py), under profboard's key names.
COST_KEYS = ["kernel_us", "memcpy_us", "memset_us", "communication_us", "runtime_us",
             "dataloader_us", "cpu_exec_us", "other_us", "total_us"]


def _in_ref_venv() -> bool:
    return Path(sys.prefix).resolve() == reference_plugin.VENV_DIR.resolve()


def plugin_span(trace_path: str) -> str | None:
    """The span id the plugin shows: 1-based rank of the timestamp among the worker's files.

    It sorts timestamps as strings, not numbers (a known reference bug); we mirror it.
    """
    folder, name = os.path.split(os.path.abspath(trace_path))
    match = reference_plugin.TRACE_NAME.match(name)
    if not match or match.group(2) is None:
        return None
    worker, mine = match.groups()
    stamps = []
    for other in os.listdir(folder):
        m = reference_plugin.TRACE_NAME.match(other)
        if m and m.group(1) == worker and m.group(2) is not None:
            stamps.append(m.group(2))
    return str(sorted(stamps).index(mine) + 1)


def overview(trace_path: str) -> dict:
    """Parse with the reference and collect its overview inputs. Runs inside the ref venv."""
    import tempfile

    from torch_tb_profiler.profiler import data as ref_data

    # RunProfileData drops the step parser after use; keep a handle on it to read the
    # steps before and after the plugin moves them to the device side.
    seen: dict = {}

    class _KeepParser(ref_data.EventParser):
        def __init__(self) -> None:
            super().__init__()
            seen["parser"] = self

        def update_device_steps(self, runtime_node_list) -> None:
            seen["host_steps"] = list(zip(self.steps_names, self.steps, strict=True))
            super().update_device_steps(runtime_node_list)

    ref_data.EventParser = _KeepParser
    worker = reference_plugin.worker_name(trace_path)
    with tempfile.TemporaryDirectory(prefix="ref-overview-") as cache_dir:
        prof = ref_data.RunProfileData.parse(worker, 1, trace_path, cache_dir)
    parser = seen["parser"]

    steps = []
    for name, (start, end), costs in zip(prof.steps_names, parser.steps, prof.steps_costs, strict=True):
        steps.append({"step": name, "start_us": start, "end_us": end,
                      **dict(zip(COST_KEYS, costs.costs, strict=True))})

    gm = prof.gpu_metrics_parser
    props = prof.device_props or []
    gpus = []
    for dev in sorted(gm.gpu_ids):
        prop = props[dev] if dev < len(props) else {}
        occupancy = gm.avg_occupancy_per_device[dev]
        gpus.append({
            "device": dev,
            "name": prop.get("name"),
            "memory_bytes": prop.get("totalGlobalMem"),
            "compute_capability": (f"{prop['computeMajor']}.{prop['computeMinor']}"
                                   if "computeMajor" in prop and "computeMinor" in prop else None),
            "utilization_ratio": gm.gpu_utilization[dev],
            "sm_efficiency_ratio": gm.avg_approximated_sm_efficiency_per_device[dev],
            "achieved_occupancy_ratio": None if occupancy is None else occupancy / 100,
            "achieved_occupancy_percent_raw": occupancy,
            "tensor_core_ratio": prof.tc_ratio[dev],
        })

    return {
        "tool": reference_plugin.TOOL,
        "trace": trace_path,
        "worker": worker,
        "span": plugin_span(trace_path),
        # Which columns the plugin shows: GPU ones only with kernels/memcpy/runtime,
        # Communication only when present.
        "show_gpu": bool(prof.has_runtime or prof.has_kernel or prof.has_memcpy_or_memset),
        "has_communication": prof.has_communication,
        "steps": steps,
        "average": dict(zip(COST_KEYS, prof.avg_costs.costs, strict=True)),
        "host_steps": [{"step": n, "start_us": s, "end_us": e} for n, (s, e) in seen["host_steps"]],
        "gpus": gpus,
        "tc_used_ratio": prof.tc_used_ratio,
        "tc_eligible_ops_kernel_ratio": prof.tc_eligible_ops_kernel_ratio,
        "recommendations": prof.recommendations,
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    if not _in_ref_venv():
        python = reference_plugin.ensure_ref_venv()
        os.execv(python, [str(python), str(Path(__file__).resolve()), *argv])
    print(json.dumps(overview(os.path.abspath(argv[0])), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
