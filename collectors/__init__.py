"""Profiling helpers for training loops, and runnable workloads that write profboard logdirs
(`profboard collect`). Needs PyTorch: `pip install 'profboard[collect]'`.

    from profboard.collectors import make_profiler, marked, ThroughputMeter

    prof = make_profiler("runs", "baseline")
    meter = ThroughputMeter(prof=prof)
    with prof:
        meter.start()
        for batch in loader:
            with marked("forward"):
                loss = model(batch).sum()
            loss.backward()
            opt.step()
            prof.step()
            meter.step(samples=len(batch))
    print(meter.report())
"""

from .memory import snapshot_memory
from .profiling import export_trace, make_profiler, marked, print_top_tables
from .throughput import ThroughputMeter

__all__ = ["ThroughputMeter", "export_trace", "make_profiler", "marked", "print_top_tables", "snapshot_memory"]
