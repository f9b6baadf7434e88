"""Distributed view (server/analysis/distributed.py, stragglers.py) on tiny synthetic ranks.

Each expected number is worked out by hand in a comment. Ranks are built by synth's `ddp_rank`:
two steps of 2000 us, each with a compute kernel and three all-reduces whose kernels end
together on every rank (the collective completes when the last rank arrives).
"""

from __future__ import annotations

import pytest

from profboard.server.analysis.distributed import (collective_calls, combine, distributed, overlap, settle_ranks,
                                                   summarize_worker, worker_identity)
from profboard.server.analysis.steps import detect_steps
from synth import CALLS_AT, NCCL_ALLREDUCE, STEP_US, TRANSFER_US, Trace, ddp_rank, parse

def run(traces: dict[str, Trace]) -> dict:
    return distributed({name: parse(t.build()) for name, t in traces.items()})


def by_rank(rows: list[dict]) -> dict[int, dict]:
    return {r["rank"]: r for r in rows}


# --- identity --------------------------------------------------------------------------------

def test_identity_from_distributed_info():
    t = Trace()
    t.distributed(2, 8, backend="nccl")
    assert worker_identity("whatever", parse(t.build())) == {
        "worker": "whatever", "rank": 2, "world_size": 8, "backend": "nccl", "assumed": []}


def test_identity_falls_back_to_worker_name_and_kernels():
    t = Trace()
    t.nccl(10, 5)
    ident = worker_identity("worker3", parse(t.build()))
    assert (ident["rank"], ident["world_size"], ident["backend"]) == (3, None, "nccl")
    assert ident["assumed"] == ["rank from the worker name", "backend nccl from its kernels"]


@pytest.mark.parametrize(("group", "expected"), [
    ({"pg_name": "0", "pg_desc": "default_pg", "pg_size": 2, "ranks": [0, 1]},
     {"name": "0", "description": "default_pg", "size": 2, "ranks": [0, 1]}),
    ({"pg_name": 7, "pg_desc": ["x"], "pg_size": "2", "ranks": "all"},
     {"name": "7", "description": None, "size": None, "ranks": None}),
    ({"pg_name": "1", "pg_size": True, "ranks": [0, "1", None]},
     {"name": "1", "description": None, "size": None, "ranks": None}),
], ids=["as-pytorch-writes", "wrong-types", "bool-size-mixed-ranks"])
def test_process_groups_keep_only_values_of_the_types_pytorch_writes(group, expected):
    """distributedInfo is the trace's own JSON: a value of another type is null, so the typed
    /api/distributed answer never fails on it."""
    t = ddp_rank(0, world=2)
    t.metadata["distributedInfo"]["pg_config"] = [group]
    t2 = ddp_rank(1, world=2)
    t2.devices[0]["name"] = 42  # deviceProperties too: a name that is not text is unknown
    out = run({"worker0": t, "worker1": t2})
    assert out["groups"] == [expected]
    gpus = [g for node in out["topology"] for p in node["processes"] for g in p["gpus"]]
    assert {g["device"]: g["name"] for g in gpus} == {0: "NVIDIA H100 80GB HBM3", 1: None}


def test_settle_ranks_replaces_pids_and_duplicates_in_name_order():
    # host_pid names give pids (907, 908): out of range for 3 workers; "b" duplicates rank 0.
    idents = [
        {"worker": "vm_908", "rank": 908, "world_size": None, "backend": None, "assumed": ["rank from the worker name"]},
        {"worker": "a", "rank": 0, "world_size": 3, "backend": None, "assumed": []},
        {"worker": "b", "rank": 0, "world_size": 3, "backend": None, "assumed": []},
    ]
    settled, warnings = settle_ranks(idents)
    assert [i["rank"] for i in settled] == [2, 0, 1]    # free ranks 1, 2 go to b, vm_908 (name order)
    assert settled[0]["world_size"] == 3 and "world size = number of workers" in settled[0]["assumed"]
    assert len(warnings) == 2
    assert [(i["rank"], i["world_size"], len(i["assumed"])) for i in idents] == [(908, None, 1), (0, 3, 0), (0, 3, 0)]


def test_combining_leaves_the_workers_summaries_as_they_were():
    # The API keeps each worker's summary: combining workers 1+2, then 1+2+3, must give the
    # first two the world size 3 the second time (it gave them 2: settle_ranks wrote into them).
    summaries = {f"worker{r}": summarize_worker(f"worker{r}", parse(ddp_rank(r, info=False).build())) for r in range(3)}
    pair = combine([summaries["worker0"], summaries["worker1"]])
    assert [r["world_size"] for r in pair["ranks"]] == [2, 2]
    three = combine(list(summaries.values()))
    assert [r["world_size"] for r in three["ranks"]] == [3, 3, 3]
    assert all(s.identity["world_size"] is None for s in summaries.values())


def test_run_without_distributed_info_uses_names():
    out = run({"worker1": ddp_rank(1, info=False), "worker0": ddp_rank(0, info=False)})
    assert [(r["rank"], r["worker"], r["world_size"]) for r in out["ranks"]] == [(0, "worker0", 2), (1, "worker1", 2)]


# --- overlap ---------------------------------------------------------------------------------

def test_overlap_splits_each_step_as_the_reference():
    t = Trace()
    t.step(1, 0, 100)
    t.launch(1, 1, 10, 40)            # compute kernel 10..50
    t.nccl(40, 30)                    # communication 40..70
    t.step(2, 100, 100)
    t.launch(101, 1, 120, 10, name=NCCL_ALLREDUCE)   # communication only: 120..130
    tables = parse(t.build())
    out = overlap(tables.events, detect_steps(tables.events))
    # step 1: computation 40 - overlap 10 = 30; overlapping 40..50 = 10; communication 30 - 10 = 20;
    # other 100 - (10..70 = 60) = 40. Step 2: communication 10, other 90.
    assert out["steps"] == [
        {"step": "1", "start_us": 0.0, "end_us": 100.0, "total_us": 100.0, "computation_us": 30.0, "overlapping_us": 10.0,
         "communication_us": 20.0, "other_us": 40.0},
        {"step": "2", "start_us": 100.0, "end_us": 200.0, "total_us": 100.0, "computation_us": 0.0, "overlapping_us": 0.0,
         "communication_us": 10.0, "other_us": 90.0},
    ]
    assert out["average"] == {"total_us": 100.0, "computation_us": 15.0, "overlapping_us": 5.0,
                              "communication_us": 15.0, "other_us": 65.0}


def test_overlap_without_kernels_uses_host_ops_and_gloo():
    t = Trace()
    t.step(1, 0, 100)
    t.op("aten::add", 10, 30)                 # computation 10..40
    t.op("gloo:all_reduce", 30, 30)           # host collective 30..60
    tables = parse(t.build())
    (row,) = overlap(tables.events, detect_steps(tables.events))["steps"]
    # computation 30 - 10 = 20, overlapping 30..40 = 10, communication 30 - 10 = 20, other 100 - 50 = 50
    assert (row["computation_us"], row["overlapping_us"], row["communication_us"], row["other_us"]) == (
        20.0, 10.0, 20.0, 50.0)


# --- collective calls ------------------------------------------------------------------------

def calls_of(t: Trace):
    tables = parse(t.build())
    return collective_calls(tables.events, detect_steps(tables.events))


def test_calls_pair_record_param_comms_with_nccl_op_and_kernel():
    t = Trace()
    t.step(1, 0, 500)
    t.collective(10, 40, 20, 100, nelems=1000)                             # float: 4000 bytes
    t.collective(60, 30, 70, 8, op="nccl:broadcast", nelems=53, dtype="long int",
                 kernel="ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)")  # 53 * 8 = 424
    t.collective(100, 5, None, op=None)          # a `wait` record: no nccl op, no kernel: no call
    calls, warnings = calls_of(t)
    assert calls[["name", "bytes", "busy_us", "kernels", "step_name", "index"]].values.tolist() == [
        ["nccl:all_reduce", 4000.0, 100.0, 1, "1", 0],
        ["nccl:broadcast", 424.0, 8.0, 1, "1", 0],
    ]
    # kernels start 10 us after entering: arrivals from the step start (0)
    assert calls["cpu_arrival_us"].tolist() == [10.0, 60.0]
    assert calls["gpu_arrival_us"].tolist() == [20.0, 70.0]
    assert warnings == []


def test_calls_legacy_nccl_op_and_kernel_only_record():
    t = Trace()
    t.step(1, 0, 500)
    t.collective(10, 40, 20, 30, wrapped=False, nelems=10, dtype="c10::BFloat16")     # 1.x: 20 bytes
    t.collective(100, 40, 110, 25, op=None)        # no nccl:* op: named from the kernel, size unknown
    t.nccl(300, 7)                                 # a kernel tied to no call
    calls, warnings = calls_of(t)
    assert calls["name"].tolist() == ["nccl:all_reduce", "nccl:all_reduce"]
    assert calls["bytes"].tolist()[0] == 20.0 and calls["bytes"].isna().tolist() == [False, True]
    assert calls["busy_us"].tolist() == [30.0, 25.0]
    # 1.x records no process group; 2.x's record_param_comms does: each is the first of its group
    assert calls["group"].tolist() == ["", "0"] and calls["index"].tolist() == [0, 0]
    assert any("1 communication kernel(s) are tied to no collective call" in w for w in warnings)
    assert any("1 collective call(s) have no known size" in w for w in warnings)


def test_calls_align_within_their_process_group():
    # Both ranks all-reduce once in group "dp" (kernel 30 us) and once in group "tp" (60 us),
    # in opposite orders. Within a group the k-th calls match, so the kernel times agree and
    # nobody is late; matched by name alone, 30 would meet 60 and a rank would look 30 us late.
    ranks = {}
    for rank, order in ((0, ("dp", "tp")), (1, ("tp", "dp"))):
        t = Trace(pid=100 + rank)
        t.distributed(rank, 2)
        t.step(1, 0, 1000)
        for k, group in enumerate(order):
            busy = 30 if group == "dp" else 60
            t.collective(100 + 300 * k, 20, 110 + 300 * k, busy, device=rank, group=group)
        ranks[f"worker{rank}"] = parse(t.build())
    s = distributed(ranks)["stragglers"]
    assert s["collectives"] == 2 and s["decided"] == 0 and s["unaligned"]["count_mismatches"] == []
    assert sorted(o["group"] for o in s["occurrences"]) == ["dp", "tp"]


def test_gloo_call_is_its_host_range():
    t = Trace()
    t.step(1, 0, 500)
    t.op("gloo:all_reduce", 10, 40, input_dims=[[4]])
    calls, _ = calls_of(t)
    assert calls[["name", "busy_us", "gpu_ts", "gpu_end"]].values.tolist() == [["gloo:all_reduce", 40.0, 10.0, 50.0]]


def test_gloo_calls_belong_to_the_step_they_end_in():
    # gloo runs collectives on a worker thread when its queue reaches them. Rank 0's all-reduce
    # starts at 900, in step 1, and waits for rank 1's, which starts at 1050 in step 2; both end
    # at 1100. Placed by their ends they are the same call, and rank 1 came 150 us late.
    ranks = {}
    for rank, start in ((0, 900), (1, 1050)):
        t = Trace(pid=100 + rank)
        t.distributed(rank, 2)
        t.step(1, 0, 1000)
        t.step(2, 1000, 1000)
        t.op("gloo:all_reduce", start, 1100 - start, input_dims=[[4]], tid=7)
        ranks[f"worker{rank}"] = parse(t.build())
    s = distributed(ranks)["stragglers"]
    assert s["collectives"] == 1 and s["unaligned"]["count_mismatches"] == []
    (occurrence,) = s["occurrences"]
    assert occurrence["step"] == "2" and occurrence["basis"] == "cpu" and occurrence["last_ranks"] == [1]
    assert [a["delay_us"] for a in occurrence["arrivals"]] == [0.0, 150.0]


def test_gloo_call_ending_with_its_step_is_inside_it():
    # As in the reference's gloo unit tests: an all-reduce that ends exactly where step 1 ends
    # (and step 2 starts) belongs to step 1, not to step 2 nor outside every step.
    t = Trace()
    t.step(1, 0, 1000)
    t.step(2, 1000, 1000)
    t.op("gloo:all_reduce", 900, 100, input_dims=[[4]], tid=7)
    t.op("gloo:all_reduce", 1900, 100, input_dims=[[4]], tid=7)     # ends with the last step
    calls, warnings = calls_of(t)
    assert calls["step_name"].tolist() == ["1", "2"] and not any("outside every step" in w for w in warnings)


# --- transfer and waiting, comm ops ----------------------------------------------------------

def test_transfer_is_the_shortest_rank_and_the_rest_is_waiting():
    out = run({f"worker{r}": ddp_rank(r, late={1: 200}, world=2) for r in range(2)})
    # Rank 1 enters every all-reduce 200 us late: its kernels take TRANSFER_US = 50, rank 0's
    # 200 + 50 = 250. Per step three calls: transfer 150, waiting 3 x 200 = 600 on rank 0, 0 on rank 1.
    wait = by_rank(out["wait"])
    assert wait[0]["steps"][0] == {"step": "1", "communication_us": 750.0, "transfer_us": 150.0,
                                   "wait_us": 600.0, "unattributed_us": 0.0}
    assert wait[1]["average"] == {"communication_us": 150.0, "transfer_us": 150.0, "wait_us": 0.0,
                                  "unattributed_us": 0.0}
    (row,) = by_rank(out["comm_ops"])[0]["rows"]
    # 6 calls of 4000, 8000, 12000 bytes (twice); latency 6 x 250; transfer 6 x 50
    assert row == {"name": "nccl:all_reduce", "calls": 6, "total_bytes": 48000, "avg_bytes": 8000,
                   "total_latency_us": 1500.0, "avg_latency_us": 250.0, "total_transfer_us": 300.0,
                   "avg_transfer_us": 50.0, "transfer_calls": 6}


def test_unlinked_kernel_is_unattributed_communication():
    traces = {f"worker{r}": ddp_rank(r, world=2) for r in range(2)}
    traces["worker0"].nccl(800, 30)        # in step 1, tied to no call
    wait = by_rank(run(traces)["wait"])[0]["steps"][0]
    # three calls of 50 us, all transfer; the stray kernel's 30 us are unattributed
    assert (wait["communication_us"], wait["transfer_us"], wait["wait_us"], wait["unattributed_us"]) == (
        180.0, 150.0, 0.0, 30.0)


# --- stragglers ------------------------------------------------------------------------------

def test_slow_rank_is_named_with_its_delay():
    out = run({f"worker{r}": ddp_rank(r, late={2: 300}) for r in range(4)})
    s = out["stragglers"]
    # 2 steps x 3 all-reduces, rank 2 entering each 300 us after the others (GPU clock too)
    assert (s["collectives"], s["decided"], s["basis"]) == (6, 6, {"gpu": 6})
    (named,) = s["stragglers"]
    assert (named["rank"], named["times_last"], named["last_ratio"]) == (2, 6, 1.0)
    assert (named["median_delay_us"], named["mean_delay_us"], named["max_delay_us"]) == (300.0, 300.0, 300.0)
    others = [r for r in s["ranks"] if r["rank"] != 2]
    assert all(r["times_last"] == 0 and r["median_delay_us"] == 0.0 for r in others)
    assert all(r["mean_step_us"] == STEP_US for r in s["ranks"])
    first = s["occurrences"][0]
    assert (first["step"], first["index"], first["last_ranks"], first["spread_us"]) == ("1", 0, [2], 300.0)
    assert [a["arrival_us"] for a in first["arrivals"]] == [110.0, 110.0, 410.0, 110.0]


def test_no_straggler_when_ranks_arrive_together():
    s = run({f"worker{r}": ddp_rank(r) for r in range(4)})["stragglers"]
    assert s["collectives"] == 6 and s["decided"] == 0 and s["stragglers"] == []


def test_differing_op_counts_align_the_rest_and_report():
    # Rank 3 skips the last all-reduce of step 1; rank 1 is late by 120 everywhere.
    traces = {f"worker{r}": ddp_rank(r, late={1: 120}, skip={(1, 2)} if r == 3 else set()) for r in range(4)}
    out = run(traces)
    s = out["stragglers"]
    assert s["collectives"] == 6                        # the skipped call is still aligned on 3 ranks
    (named,) = s["stragglers"]
    assert (named["rank"], named["times_last"], named["median_delay_us"]) == (1, 6, 120.0)
    assert by_rank(s["ranks"])[3]["collectives"] == 5
    assert s["unaligned"]["count_mismatches"] == [
        {"step": "1", "group": "0", "name": "nccl:all_reduce",
         "calls": [{"rank": 0, "calls": 3}, {"rank": 1, "calls": 3}, {"rank": 2, "calls": 3}, {"rank": 3, "calls": 2}]}]
    assert by_rank(out["comm_ops"])[3]["rows"][0]["calls"] == 5


def test_call_on_one_rank_only_is_unaligned():
    traces = {f"worker{r}": ddp_rank(r, world=2) for r in range(2)}
    traces["worker1"].collective(1500, 20, 1505, 10, op="nccl:all_gather", kernel=NCCL_ALLREDUCE.replace("AllReduce", "AllGather"))
    out = run(traces)
    assert out["stragglers"]["unaligned"]["calls"] == [{"rank": 0, "unaligned": 0}, {"rank": 1, "unaligned": 1}]
    gather = [r for r in by_rank(out["comm_ops"])[1]["rows"] if r["name"] == "nccl:all_gather"]
    assert gather[0]["calls"] == 1 and gather[0]["total_transfer_us"] is None


# --- topology and comparison -----------------------------------------------------------------

def test_topology_and_step_comparison():
    out = run({"host_a_11": ddp_rank(0, world=2), "host_b_12": ddp_rank(1, world=2)})
    assert [(n["node"], [(p["rank"], p["process"], [g["device"] for g in p["gpus"]]) for p in n["processes"]])
            for n in out["topology"]] == [("host_a", [(0, "11", [0])]), ("host_b", [(1, "12", [1])])]
    gpu = out["topology"][0]["processes"][0]["gpus"][0]
    assert (gpu["name"], gpu["compute_capability"]) == ("NVIDIA H100 80GB HBM3", "9.0")
    comp = by_rank(out["comparison"])[0]
    # per step: compute kernel 60 us, three 50 us all-reduces
    assert comp["steps"] == 2
    assert (comp["average"]["total_us"], comp["average"]["kernel_us"], comp["average"]["communication_us"]) == (
        2000.0, 60.0, 150.0)


@pytest.mark.parametrize("key", ["host_name", "hostname"])
def test_topology_node_is_the_host_the_trace_names(key):
    # Workers named rank<N> (profboard's collectors) on one host: one node, each rank's process
    # from its trace's pid (synth: 100 + rank). Without the key every worker is its own node.
    ranks = {f"rank{r}": ddp_rank(r, world=3) for r in range(3)}
    ranks["rank0"].metadata[key] = ranks["rank1"].metadata[key] = "gpu-box"
    out = run(ranks)
    assert [(n["node"], [(p["rank"], p["process"], p["assumed"]) for p in n["processes"]]) for n in out["topology"]] == [
        ("gpu-box", [(0, "100", []), (1, "101", [])]),
        ("rank2", [(2, "102", ["node from the worker name (the trace names no host)"])])]


def test_empty_and_single_worker_do_not_raise():
    t = Trace()
    t.step(1, 0, 100)
    out = run({"worker0": t})
    assert out["comm_ops"] == [{"rank": 0, "worker": "worker0", "rows": []}]
    assert out["stragglers"]["stragglers"] == [] and out["stragglers"]["collectives"] == 0


@pytest.mark.parametrize("dtype,size", [("float", 4), ("c10::Half", 2), ("long int", 8), ("unsigned char", 1)])
def test_sizes_by_element_type(dtype, size):
    t = Trace()
    t.step(1, 0, 100)
    t.collective(10, 20, 15, 5, nelems=6, dtype=dtype)
    calls, _ = calls_of(t)
    assert calls["bytes"].tolist() == [6.0 * size]


def test_delay_needs_no_shared_step_start():
    # Rank 1's first step starts 400 us earlier, yet it enters each all-reduce together with
    # rank 0: equal kernel times, so nobody is late (arrivals from the step start differ by 400).
    traces = {"worker0": ddp_rank(0, world=2), "worker1": Trace(pid=101)}
    t = traces["worker1"]
    t.distributed(1, 2)
    for n, base in ((1, 0), (2, STEP_US)):
        t.step(n, base - 400, STEP_US + 400) if n == 1 else t.step(n, base, STEP_US)
        t.launch(base + 20, 5, base + 30, 60, device=1)
        for k, at in enumerate(CALLS_AT):
            t.collective(base + at, 40, base + at + 10, TRANSFER_US, nelems=1000 * (k + 1), device=1)
    s = run(traces)["stragglers"]
    assert s["collectives"] == 6 and s["decided"] == 0 and s["stragglers"] == []
    first = s["occurrences"][0]["arrivals"]
    assert [a["arrival_us"] for a in first] == [110.0, 510.0]


def test_rooted_collectives_are_not_read_for_arrival():
    # A broadcast root leaves early (5 us) while the other rank waits 300 us: no straggler.
    traces = {}
    for rank, dur in ((0, 5), (1, 300)):
        t = traces[f"worker{rank}"] = Trace(pid=100 + rank)
        t.distributed(rank, 2)
        t.step(1, 0, 1000)
        t.collective(100, 40, 110, dur, op="nccl:broadcast", device=rank,
                     kernel="ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
    out = run(traces)
    assert out["stragglers"]["collectives"] == 0 and out["stragglers"]["stragglers"] == []
    # the reference's transfer/wait split still applies: 5 us transfer each, rank 1 waited 295
    assert [w["average"]["wait_us"] for w in out["wait"]] == [0.0, 295.0]


def test_gloo_collectives_use_host_time():
    # gloo all-reduce: rank 1 enters 80 us late, both return at 200 -> host times 100 and 20.
    traces = {}
    for rank, start in ((0, 100), (1, 180)):
        t = traces[f"worker{rank}"] = Trace(pid=100 + rank)
        t.distributed(rank, 2, backend="gloo")
        t.step(1, 0, 1000)
        t.op("gloo:all_reduce", start, 200 - start, input_dims=[[4]])
    s = run(traces)["stragglers"]
    assert s["basis"] == {"cpu": 1}
    assert [(r["rank"], r["times_last"], r["median_delay_us"]) for r in s["ranks"]] == [(0, 0, 0.0), (1, 1, 80.0)]
