"""The torch.compile view's analysis and the graph_breaks rule on small synthetic traces (us)."""

from __future__ import annotations

from profboard.server.analysis.compile import (compile_breakdown, compile_phase, compiled_pieces,
                                               compiled_regions, has_compiled_code, kernel_mix)
from profboard.server.analysis.rules.compile import graph_breaks
from synth import TC_GEMM, Trace, parse, rule_context

BACKWARD_TID = 2000


def three_calls(t: Trace) -> None:
    """Step 1 (0..1000): a call breaking twice (three nested regions), a call breaking once, then a
    separately compiled loss (a top-level region of its own, not a break)."""
    t.step(1, 0, 1000)
    t.op("Torch-Compiled Region: 0/0", 10, 490)
    t.op("Torch-Compiled Region: 1/0", 200, 280)
    t.op("Torch-Compiled Region: 2/0", 300, 170)
    t.op("Torch-Compiled Region: 0/0", 600, 200)
    t.op("Torch-Compiled Region: 1/0", 700, 90)
    t.op("Torch-Compiled Region: 3/0", 850, 50)


def test_nested_regions_are_graph_breaks_of_one_call():
    t = Trace()
    three_calls(t)
    regions = compiled_regions(parse(t.build()))
    # breaks per call: 3 - 1 = 2, 2 - 1 = 1, 1 - 1 = 0 -> median 1, total 3
    assert regions["summary"] == {"calls": 3, "regions": 6, "graph_breaks": 3, "graph_breaks_per_call": 1,
                                  "max_graph_breaks_per_call": 2, "max_depth": 3}
    assert [(c["region"], c["regions"], c["graph_breaks"], c["depth"]) for c in regions["calls"]] == [
        ("0/0", 3, 2, 3), ("0/0", 2, 1, 2), ("3/0", 1, 0, 1)]
    [step] = regions["steps"]
    # inside compiled code: 10..500 + 600..800 + 850..900 = 490 + 200 + 50 = 740 of 1000
    assert (step["compiled_us"], step["outside_us"], step["compiled_ratio"]) == (740, 260, 0.74)
    assert (step["calls"], step["graph_breaks"], step["max_depth"]) == (3, 3, 3)


def test_break_location_is_the_users_frame():
    t = Trace()
    three_calls(t)
    t.python("train.py(5): <module>", 0, 1000, python_id=1)
    t.python("model.py(20): forward", 5, 500, python_id=2, parent_id=1)
    t.python("torch/_dynamo/eval_frame.py(600): _fn", 190, 300, python_id=3, parent_id=2)
    locations = compiled_regions(parse(t.build()))["locations"]
    first = next(loc for loc in locations if loc["region"] == "1/0" and loc["start_us"] == 200)
    assert first["frame"] == "model.py(20): forward" and first["parent_region"] == "0/0"
    assert first["frames"] == ["torch/_dynamo/eval_frame.py(600): _fn", "model.py(20): forward",
                               "train.py(5): <module>"]


def test_without_stacks_a_break_is_named_by_its_regions():
    t = Trace()
    three_calls(t)
    tables = parse(t.build())
    locations = compiled_regions(tables)["locations"]
    # 1/0 broke out of 0/0 twice (both calls), 2/0 out of 1/0 once
    assert [(loc["region"], loc["parent_region"], loc["count"], loc["frame"]) for loc in locations] == [
        ("1/0", "0/0", 2, None), ("2/0", "1/0", 1, None)]
    assert locations[0]["label"] == "graph break: region 1/0 inside region 0/0"
    assert tables.events["name"].iloc[locations[0]["event_id"]] == "Torch-Compiled Region: 1/0"


def test_graph_breaks_rule_reports_breaks_per_call():
    t = Trace()
    three_calls(t)
    [found] = graph_breaks(rule_context(t))
    assert found["id"] == "graph_breaks" and found["severity"] == "low"
    assert found["numbers"]["graph_breaks_per_call"] == 1 and found["numbers"]["graph_breaks"] == 3
    assert found["thresholds"]["graph_breaks_per_call"] == 1
    assert [e["kind"] for e in found["evidence"]] == ["graph_break", "graph_break"]
    assert all(e["event_id"] >= 0 and e["start_us"] <= e["end_us"] for e in found["evidence"])


def test_graph_breaks_rule_is_quiet_without_nesting():
    t = Trace()
    t.step(1, 0, 1000)
    t.op("Torch-Compiled Region: 0/0", 10, 400)
    t.op("Torch-Compiled Region: 1/0", 500, 400)  # a second compiled function, after the first
    assert graph_breaks(rule_context(t)) == []


def test_pieces_pair_through_fwdbwd_flows():
    t = Trace()
    t.step(1, 0, 1000)
    t.op("CompiledFunction", 10, 100)
    t.op("CompiledFunction", 300, 100)  # its backward is not in the trace
    t.op("autograd::engine::evaluate_function: CompiledFunctionBackward", 595, 110, tid=BACKWARD_TID)
    t.op("CompiledFunctionBackward", 600, 100, tid=BACKWARD_TID)
    t.fwdbwd(1, 10, 600, backward_tid=BACKWARD_TID)
    tables = parse(t.build())
    pieces = compiled_pieces(tables)
    assert (pieces["forward"], pieces["backward"], pieces["paired"]) == (2, 1, 1)
    [pair] = pieces["pairs"]
    assert tables.events["name"].iloc[pair["backward_event_id"]] == "CompiledFunctionBackward"
    [unpaired] = pieces["unpaired"]
    assert (unpaired["name"], unpaired["start_us"]) == ("CompiledFunction", 300)
    [step] = pieces["steps"]
    assert step == {"step": "1", "forward": 2, "backward": 1, "paired": 1, "unpaired_forward": 1,
                    "unpaired_backward": 0, "forward_us": 200, "backward_us": 100}


def test_kernel_mix_splits_triton_and_launch_apis():
    t = Trace()
    t.step(1, 0, 1000)
    t.launch(10, 5, 20, 4, name="triton_poi_fused_add_0", driver=True)
    t.launch(30, 5, 40, 6, name="triton_red_fused_sum_1", driver=True)
    t.launch(50, 5, 60, 20, name=TC_GEMM)
    t.launch(90, 5, 100, 10)
    mix = kernel_mix(parse(t.build()))
    # triton 4 + 6 = 10 us of 40 -> 0.25
    assert mix["triton"] == {"kernels": 2, "total_us": 10} and mix["other"] == {"kernels": 2, "total_us": 30}
    assert mix["triton_time_ratio"] == 0.25
    assert {f["family"]: f["kernels"] for f in mix["families"]} == {"triton": 2, "cublas": 1, "aten": 1}
    assert {(x["name"], x["api"], x["calls"]) for x in mix["launches"]} == {
        ("cuLaunchKernel", "driver", 2), ("cudaLaunchKernel", "runtime", 2)}


def compile_trace() -> Trace:
    t = Trace()
    t.annotation("entire_frame_compile", 0, 1000)
    t.op("_compile.compile_inner (dynamo_timed)", 10, 980)
    t.op("bytecode_tracing", 20, 100)
    t.op("bytecode_tracing (dynamo_timed)", 21, 98)
    t.op("aten::empty", 30, 10)
    t.op("backend_compile", 150, 700)
    t.op("OutputGraph.call_user_compiler (dynamo_timed)", 151, 698)
    t.op("create_aot_dispatcher_function (dynamo_timed)", 200, 600)
    t.op("aot_trace_joint_graph (dynamo_timed)", 210, 50)
    t.op("inductor_compile", 300, 400)
    t.op("GraphLowering.run (dynamo_timed)", 310, 100)
    t.op("GraphLowering.codegen (dynamo_timed)", 420, 100)
    t.op("PyCodeCache.load_by_key_path (dynamo_timed)", 530, 160)
    t.op("async_compile.precompile (dynamo_timed)", 540, 100)
    t.op("entire_backward_compile", 2000, 100, tid=BACKWARD_TID)
    t.op("compile_fx.<locals>.bw_compiler (dynamo_timed)", 2010, 80, tid=BACKWARD_TID)
    t.op("Torch-Compiled Region: 0/0", 2900, 200)
    t.op("CachingAutotuner.benchmark_all_configs", 3000, 50)
    t.op("CachingAutotuner.benchmark_all_configs (dynamo_timed)", 3001, 48)
    t.annotation("pass.my_own_range", 5000, 10)  # a phase-like name holding no dynamo_timed range
    return t


def test_compile_breakdown_exclusive_times_add_up():
    out = compile_breakdown(parse(compile_trace().build()))
    phases = {p["phase"]: (p["forward_us"], p["backward_us"], p["first_run_us"]) for p in out["phases"]}
    assert phases == {
        # entire_frame_compile 1000-980 + compile_inner 980-100-700 + bytecode_tracing 100 (aten op included)
        "dynamo": (300, 0, 0),
        # backend_compile 700-698 + call_user_compiler 698-600
        "backend": (100, 0, 0),
        # create_aot 600-50-400 + joint graph 50; backward: entire_backward_compile 100-80
        "aot_autograd": (200, 20, 0),
        # inductor_compile 400-100-100-160 + GraphLowering.run 100; backward: bw_compiler 80
        "inductor_lowering": (140, 80, 0),
        "inductor_codegen": (100, 0, 0),
        "triton_compile": (160, 0, 0),  # load_by_key_path 60 + precompile 100
        "autotuning": (0, 0, 50),
    }
    assert (out["forward_us"], out["backward_us"], out["first_run_us"], out["total_us"]) == (1000, 100, 50, 1150)
    assert [(r["name"], r["pass"]) for r in out["roots"]] == [
        ("entire_frame_compile", "forward"), ("entire_backward_compile", "backward"),
        ("CachingAutotuner.benchmark_all_configs", "first_run")]
    top = {r["name"]: (r["phase"], r["calls"], r["self_us"]) for r in out["top"]}
    # the plain range and its "(dynamo_timed)" twin are one call: 2 + 88 us
    assert top["bytecode_tracing"] == ("dynamo", 1, 90)
    assert top["CachingAutotuner.benchmark_all_configs"] == ("autotuning", 1, 50)


def test_compile_breakdown_is_empty_without_compile_ranges():
    t = Trace()
    t.op("aten::mm", 0, 10)
    t.annotation("pass.my_own_range", 20, 10)
    out = compile_breakdown(parse(t.build()))
    assert out["total_us"] == 0 and out["roots"] == [] and len(out["phases"]) == 7


def test_phase_names():
    assert compile_phase("fx_codegen_and_compile (dynamo_timed)") == "inductor_lowering"
    assert compile_phase("Scheduler.codegen") == "inductor_codegen"
    assert compile_phase("PythonWrapperCodegen.generate (dynamo_timed)") == "inductor_codegen"
    assert compile_phase("triton_poi_fused_add_0") is None  # Inductor's launcher op, not a compile phase
    assert compile_phase("aten::mm") is None


def test_has_compiled_code():
    t = Trace()
    t.op("aten::mm", 0, 10)
    assert not has_compiled_code(parse(t.build()))
    t.op("CompiledFunction", 20, 10)
    assert has_compiled_code(parse(t.build()))
    assert has_compiled_code(parse(compile_trace().build()))
