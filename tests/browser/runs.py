"""The runs of the browser tests' logdir, and how to build it.

Every test runs on data the repository ships: the demo logdir (examples/logdir), traces the
project recorded itself (tests/data), a PyTorch 1.x-style trace made with tests/synth.py, and
runs the session writes (a snapshot alone, a refused pickle, truncated JSON). When
`<repo>/../shared/fixtures` exists, some of its runs are added under names that clash with none
of these, for the tests that check the views on them too; those tests skip, saying why, when the
fixtures are absent (a fresh clone).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from synth import ELEMENTWISE, Trace, write_trace

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO.parent / "shared" / "fixtures"
DEMO = REPO / "examples" / "logdir"
DATA = REPO / "tests" / "data"


def _worker_of(folder: Path) -> str:
    """The worker of a run folder's first trace: the file name before its timestamp."""
    return sorted(folder.glob("*.pt.trace.json*"))[0].name.split(".")[0]


@dataclass(frozen=True)
class Run:
    name: str
    worker: str = ""

    def sel(self, span: str = "1") -> str:
        """The query string of this run's `worker` and `span`."""
        return f"run={self.name}&worker={self.worker}&span={span}"


# From the repository.
RESNET = Run("resnet50_fp32", _worker_of(DEMO / "resnet50_fp32"))  # H200: DataLoader, memory, stacks, modules, snapshot
GRAPH_BREAKS = Run("compile_graph_breaks", _worker_of(DEMO / "compile_graph_breaks"))
STRAGGLER = Run("ddp_straggler_rank1", _worker_of(DEMO / "ddp_straggler_rank1"))  # 2 ranks, rank 1 made slow
FIRST_CALL = Run("compile_first_call", _worker_of(DATA / "h200" / "compile_first_call"))  # no nn.Module events
FSDP = Run("fsdp", _worker_of(DATA / "h200x2" / "fsdp"))
# One worker, two spans: an eager MLP, then the same under CUDA graphs (both h200_worker0).
TWO_SPANS = Run("two_spans", _worker_of(DATA / "h200" / "launch_bound_eager"))
# tests/synth.py's PyTorch 1.x spelling on a V100: absolute call stacks, memory records without
# totals or addresses, no modules, and a DataLoader that takes a third or more of each step.
LEGACY = Run("pytorch_1x", "worker0")
SNAPSHOT_ONLY = Run("snapshot_only")  # the demo's allocator snapshot alone
REFUSED = Run("snapshot_refused")  # a pickle naming os.system: the server must refuse it
BROKEN = Run("broken_trace")  # truncated JSON

SNAPSHOT = next((DEMO / "resnet50_fp32").glob("*.pickle*")).name
_REPO_RUNS = {
    RESNET: [DEMO / "resnet50_fp32"],
    GRAPH_BREAKS: [DEMO / "compile_graph_breaks"],
    STRAGGLER: [DEMO / "ddp_straggler_rank1"],
    FIRST_CALL: [DATA / "h200" / "compile_first_call"],
    FSDP: [DATA / "h200x2" / "fsdp"],
    TWO_SPANS: [DATA / "h200" / "launch_bound_eager", DATA / "h200" / "reduce_overhead"],
}
# Runs that get the demo's snapshot beside their traces (or alone); two_spans has it for a link
# that carries a span other than the first.
_SNAPSHOT_IN = (SNAPSHOT_ONLY, TWO_SPANS)
# Protocol 0: GLOBAL os.system, MARK, the string 'true', TUPLE, REDUCE, STOP: a naive load runs `true`.
REFUSED_PICKLE = b"cos\nsystem\n(S'true'\ntR."
REFUSED_FILE = "refused_snapshot.pickle"

# From ../shared/fixtures, only where it exists: run -> folder under FIXTURES.
V100 = Run("resnet50_num_workers_0", "worker0")  # the reference plugin's own PyTorch 1.9 sample, 2 spans
DDP4 = Run("ddp_resnet50", "vm_907")  # 4 ranks on an H200x4, NCCL
_FIXTURE_RUNS = {V100: "kineto_samples/resnet50_num_workers_0", DDP4: "h200x4/ddp_resnet50"}


def each(*runs: Run) -> list:
    """Parameters of a test for each of `runs`, named after them; one on a fixture run skips, saying
    why, when ../shared/fixtures lacks it."""
    return [pytest.param(run, id=run.name, marks=_needs(_FIXTURE_RUNS[run]) if run in _FIXTURE_RUNS else ())
            for run in runs]


def _needs(rel: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not (FIXTURES / rel).is_dir(),
                              reason=f"checks the view on the shared fixture {rel}, not found under {FIXTURES}")


def present_fixture_runs() -> list[Run]:
    return [run for run, rel in _FIXTURE_RUNS.items() if (FIXTURES / rel).is_dir()]


def build_logdir(root: Path) -> list[str]:
    """Fills `root` with the runs above (fixture runs only where present); returns the run names."""
    for run, folders in _REPO_RUNS.items():
        for folder in folders:
            _copy_traces(root / run.name, folder)
    for run in (RESNET, *_SNAPSHOT_IN):
        _copy(root / run.name / SNAPSHOT, DEMO / RESNET.name / SNAPSHOT)
    (root / REFUSED.name).mkdir()
    (root / REFUSED.name / REFUSED_FILE).write_bytes(REFUSED_PICKLE)
    write_trace(root, LEGACY.name, LEGACY.worker, 1623143089861, legacy_trace().build())
    # A job killed mid-write: the JSON stops inside the first event.
    write_trace(root, BROKEN.name, "worker0", 1700000000000, b'{"traceEvents": [{"ph": "X", "name": "a', gz=False)
    for run in present_fixture_runs():
        _copy_traces(root / run.name, FIXTURES / _FIXTURE_RUNS[run])
    return sorted(p.name for p in root.iterdir())


# Copies, not links: the left panel notes every link that leaves the logdir, which would crowd
# every page the tests look at (the files are about 10 MB in all).
def _copy_traces(run_dir: Path, folder: Path) -> None:
    for trace in folder.glob("*.pt.trace.json*"):
        _copy(run_dir / trace.name, trace)


def _copy(path: Path, source: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, path)


_STEPS_US = (10_000, 12_000, 9_000, 11_000)  # unequal: sorting by step time shows
# Innermost first, as PyTorch 1.x wrote `Call stack`; the script itself was recorded as run: relative.
_STACK = ("/opt/conda/lib/python3.8/site-packages/torch/nn/modules/conv.py(443): forward;"
          "/opt/conda/lib/python3.8/site-packages/torch/nn/modules/module.py(1051): _call_impl;"
          "/home/me/resnet/model.py(88): forward;train.py(31): <module>")
# name, start in the step and length (us), the kernel it launches (None: host only), bytes it allocates
_OPS = [
    ("aten::conv2d", 4300, 900, "volta_sgemm_128x64_nn", 4 << 20),
    ("aten::batch_norm", 5300, 400, "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int=512>", 1 << 20),
    ("aten::relu_", 5800, 200, ELEMENTWISE, 0),
    ("aten::add_", 6100, 200, ELEMENTWISE, 0),
    ("aten::mm", 6400, 700, "volta_sgemm_64x32_sliced1x4_tn", 2 << 20),
    ("aten::zero_", 7200, 100, None, 0),
]


def legacy_trace() -> Trace:
    """Four steps of a PyTorch 1.x trace on a V100: the DataLoader (the first 4 ms of each), a
    host-to-device copy, then operators with call stacks, each running its kernel as long as itself."""
    t = Trace(legacy=True)
    t.device(name="Tesla V100-DGXS-32GB", memory_bytes=34084028416, major=7, minor=0, num_sms=80)
    base = 1_000_000
    for n, step_us in enumerate(_STEPS_US, start=1):
        t.step(n, base, step_us)
        t.dataloader(base + 50, 4000)
        t.op("aten::to", base + 4100, 150)
        t.copy(base + 4110, 30, base + 4150, 100)
        for i, (name, start, dur, kernel, nbytes) in enumerate(_OPS):
            ext = 1000 * n + i
            t.complete(t.cat("op"), name, base + start, dur, **{"External id": ext, "Call stack": _STACK})
            if kernel:
                t.launch(base + start + 20, 10, base + start + 40, dur, name=kernel, external_id=ext)
            if nbytes:
                t.memory_record(base + start + 5, nbytes)
                t.memory_record(base + start + dur - 5, -nbytes)
        base += step_us
    return t
