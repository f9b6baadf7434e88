"""The Distributed view's shaping (web/static/js/lib/distview.js), run in Chromium on small inline
inputs whose expected output can be checked by hand."""

from __future__ import annotations

import json

import pytest

from browser_pages import module_runner

pytestmark = pytest.mark.browser


@pytest.fixture
def dv(blank_page):
    """Evaluates `expression` with lib/distview.js imported as `dv`."""
    return module_runner(blank_page, {"dv": "lib/distview.js"})


def row(rank, times_last=0, median=0.0, mean=0.0, maximum=0.0, step=1000.0, worker=None, held=None):
    return {"rank": rank, "worker": worker or f"w{rank}", "collectives": 10, "times_last": times_last,
            "last_ratio": None, "median_delay_us": median, "mean_delay_us": mean, "max_delay_us": maximum,
            "mean_step_us": step, "held_per_step_us": held}


def stragglers(ranks, named, collectives=10, decided=10, occurrences=(), unaligned=None):
    return {"collectives": collectives, "decided": decided, "basis": {"gpu": collectives}, "ranks": ranks,
            "stragglers": [r for r in ranks if r["rank"] in named], "occurrences": list(occurrences),
            "unaligned": unaligned or {"calls": [], "count_mismatches": []}}


def js(value) -> str:
    return json.dumps(value)


@pytest.mark.parametrize("s, text, ranks", [
    (stragglers([row(0), row(1, 7, 9777.5, 8000, 16096, held=77_800)], {1}),
     "Rank 1 (w1) holds the others up 77.8 ms a step and arrives a median 9.78 ms (up to 16.1 ms) after the first "
     "rank, last at 7 of 10 collectives.", [1]),
    # median and max print alike: no "up to"; no held time (an older server): no cost said
    (stragglers([row(0), row(1, 10, 2500, 2500, 2500)], {1}),
     "Rank 1 (w1) arrives a median 2.50 ms after the first rank, last at 10 of 10 collectives.", [1]),
    # 2 of 10 collectives were ties: 8 decided
    (stragglers([row(0), row(1, 8, 500, 500, 500, held=4000)], {1}, decided=8),
     "Rank 1 (w1) holds the others up 4.00 ms a step and arrives a median 500 us after the first rank, last at 8 of 8 "
     "collectives (the other 2 collectives ended in a tie).", [1]),
    (stragglers([row(0), row(1, 5, 1500, 1, 1500, held=3000), row(2, 5, 2000, 1, 2000, held=1000)], {1, 2}),
     "Ranks 1 (w1) and 2 (w2) hold the others up 3.00 ms and 1.00 ms a step and arrive a median 1.50 ms and 2.00 ms "
     "after the first rank.", [1, 2]),
    (stragglers([row(0), row(1)], set(), collectives=4, decided=0),
     "Nobody stands out: every rank arrives together at all 4 collectives.", []),
    (stragglers([row(0)], set(), collectives=0, decided=0),
     "No collective was matched across ranks, so arrivals cannot be compared.", []),
], ids=["one", "no-up-to", "ties", "two", "nobody", "nothing-matched"])
def test_straggler_headline(dv, s, text, ranks):
    got = dv(f"dv.stragglerHeadline({js(s)})")
    assert got["text"] == text
    assert got["ranks"] == ranks
    assert got["tone"] == ("alert" if ranks else "calm")


def occurrence(step, index, spread, last, arrivals=None):
    return {"step": step, "name": "nccl:all_reduce", "index": index, "basis": "gpu", "spread_us": spread,
            "last_ranks": last, "arrivals": arrivals or []}


def test_worst_occurrences_widest_first_with_call_numbers(dv):
    occ = [occurrence("1", 0, 50.0, [1]), occurrence("1", 1, 900.0, [0, 1]), occurrence("2", 0, 50.0, []),
           occurrence("2", 1, 300.0, [1])]
    got = dv(f"dv.worstOccurrences({js(occ)}, 3)")
    # 900 > 300 > 50 (the first of the two 50s: stable)
    assert [(o["step"], o["call"], o["spread_us"], o["last_text"]) for o in got] == [
        ("1", 2, 900.0, "Rank 0, Rank 1"), ("2", 2, 300.0, "Rank 1"), ("1", 1, 50.0, "Rank 1")]
    assert dv(f"dv.worstOccurrences({js([occurrence('3', 0, 0.5, [])])})")[0]["last_text"] == "tie"


def test_late_window_shows_the_late_rank_before_its_call(dv):
    arrivals = [{"rank": 0, "arrival_us": 10.0, "start_us": 1000.0, "end_us": 2000.0, "delay_us": 0.0},
                {"rank": 1, "arrival_us": 900.0, "start_us": 1900.0, "end_us": 2000.5, "delay_us": 900.0}]
    # rank 1 entered 900 us late: [1900 - 900, 2000.5] on its clock, padded by 1000.5 / 20 = 50.025 each side
    assert dv(f"dv.lateWindow({js(occurrence('1', 0, 900.0, [1], arrivals))})") == \
        {"rank": 1, "start_us": 949.975, "end_us": 2050.525}
    assert dv(f"dv.lateWindow({js(occurrence('1', 0, 0.5, [], arrivals))})") is None
    assert dv(f"dv.lateWindow({js(occurrence('1', 0, 900.0, [1], [{'rank': 1, 'arrival_us': 1, 'delay_us': 9}]))})") is None


def test_unaligned_lines(dv):
    assert dv('dv.unalignedLines({"calls": [{"rank": 0, "unaligned": 0}], "count_mismatches": []})') == []
    lines = dv("dv.unalignedLines(" + js({
        "calls": [{"rank": 0, "unaligned": 8}, {"rank": 1, "unaligned": 0}],
        "count_mismatches": [
            {"step": "", "name": "nccl:_all_gather_base", "calls": [{"rank": 0, "calls": 7}, {"rank": 1, "calls": 0}]},
            {"step": "4", "name": "nccl:_reduce_scatter_base", "calls": [{"rank": 0, "calls": 6}, {"rank": 1, "calls": 5}]},
        ]}) + ")")
    assert lines == [
        "Calls no other rank made at the same place: Rank 0 8. They count in the ops table but not in transfer, "
        "waiting or arrivals.",
        "Outside steps, nccl:_all_gather_base: the ranks made different numbers of calls (rank 0 7 and rank 1 0); "
        "the first ones were matched.",
        "Step 4, nccl:_reduce_scatter_base: the ranks made different numbers of calls (rank 0 6 and rank 1 5); "
        "the first ones were matched.",
    ]


OVERLAP = [
    {"rank": 0, "worker": "a", "average": {"computation_us": 1500, "overlapping_us": 500, "communication_us": 0,
                                           "other_us": 0},
     "steps": [{"step": "2", "computation_us": 1000, "overlapping_us": 0, "communication_us": 0, "other_us": 0},
               {"step": "3", "computation_us": 2000, "overlapping_us": 1000, "communication_us": 0, "other_us": 0}]},
    {"rank": 1, "worker": "b", "average": {"computation_us": 500, "overlapping_us": 0, "communication_us": 250,
                                           "other_us": 250},
     "steps": [{"step": "3", "computation_us": 500, "overlapping_us": 0, "communication_us": 250, "other_us": 250},
               {"step": "4", "computation_us": 1, "overlapping_us": 0, "communication_us": 0, "other_us": 0}]},
]


def test_step_options_list_every_rank_s_steps_in_order(dv):
    assert dv(f"dv.stepOptions({js(OVERLAP)})") == [
        {"value": "", "label": "All steps (average)"}, {"value": "2", "label": "Step 2"},
        {"value": "3", "label": "Step 3"}, {"value": "4", "label": "Step 4"}]


def test_stacked_rank_chart_values_units_and_missing_steps(dv):
    # averages: rank 0 totals 2000 us, so the axis is in ms (divisor 1000)
    chart = dv(f"dv.stackedRankChart({js(OVERLAP)}, dv.OVERLAP_PARTS, dv.AVERAGE, 'Step')")
    assert (chart["unit"], chart["divisor"]) == ("ms", 1000)
    assert [t["name"] for t in chart["traces"]] == ["Computation", "Overlapping", "Communication", "Other"]
    assert chart["traces"][0]["x"] == ["Rank 0", "Rank 1"]
    assert chart["traces"][0]["y"] == [1.5, 0.5]
    assert chart["layout"]["barmode"] == "stack"
    assert chart["layout"]["yaxis"]["title"]["text"] == "Step (ms)"
    # step 2 exists on rank 0 only: rank 1's bars are null, not 0; max 1000 us stays in ms
    step2 = dv(f"dv.stackedRankChart({js(OVERLAP)}, dv.OVERLAP_PARTS, '2', 'Step')")
    assert step2["traces"][0]["y"] == [1.0, None]
    assert "no such step" in step2["traces"][0]["customdata"][1]
    # step 4: 1 us at most, so microseconds
    step4 = dv(f"dv.stackedRankChart({js(OVERLAP)}, dv.OVERLAP_PARTS, '4', 'Step')")
    assert (step4["unit"], step4["traces"][0]["y"]) == ("us", [None, 1])


def test_delay_chart_marks_stragglers_on_two_axes(dv):
    s = stragglers([row(0, step=90_000), row(1, 9, 3554.3, 1, 77_000, step=91_000)], {1})
    chart = dv(f"dv.delayChart({js(s)})")
    delay, step = chart["traces"]
    assert (chart["delayAxis"]["unit"], chart["stepAxis"]["unit"]) == ("ms", "ms")
    assert delay["y"] == [0, 3.5543] and step["y"] == [90, 91]
    # One fill, the legend's; the straggler's bar outlined in red.
    assert delay["marker"]["color"] == dv("dv.DELAY_COLOR")
    assert delay["marker"]["line"] == {"color": dv("dv.STRAGGLER_COLOR"), "width": [0, 2.5]}
    assert (delay["yaxis"], step["yaxis"]) == ("y", "y2")
    assert chart["layout"]["yaxis2"]["overlaying"] == "y" and chart["layout"]["yaxis2"]["side"] == "right"


def test_comparison_chart_uses_the_overview_categories(dv):
    comparison = [
        {"rank": 0, "worker": "a", "steps": 2, "average": {"total_us": 3000, "kernel_us": 2000, "memcpy_us": 0,
                                                          "communication_us": 1000, "other_us": 0}},
        {"rank": 1, "worker": "b", "steps": 2, "average": {"total_us": 2500, "kernel_us": 2500, "memcpy_us": 0,
                                                          "communication_us": 0, "other_us": 0}},
    ]
    chart = dv(f"dv.comparisonChart({js(comparison)})")
    # categories nobody spent time in are left out; colours are the Overview's
    assert [t["name"] for t in chart["traces"]] == ["Kernel", "Communication"]
    assert [t["y"] for t in chart["traces"]] == [[2.0, 2.5], [1.0, 0]]
    colors = dv('import("/static/js/overview.js").then((m) => [m.CATEGORY_COLORS.kernel_us, m.CATEGORY_COLORS.communication_us])')
    assert [t["marker"]["color"] for t in chart["traces"]] == colors


def test_topology_text_meta_and_assumptions(dv):
    gpu = {"device": 1, "name": "NVIDIA H200", "memory_bytes": 150109880320, "compute_capability": "9.0"}
    assert dv(f"dv.gpuText({js(gpu)})") == "GPU 1 · NVIDIA H200 · 139.80 GiB · CC 9.0"
    assert dv('dv.gpuText({"device": 0, "name": null, "memory_bytes": null, "compute_capability": null})') == "GPU 0"
    ranks = [{"worker": "w0", "rank": 0, "world_size": 2, "backend": "nccl", "assumed": []},
             {"worker": "host", "rank": 1, "world_size": 2, "backend": "nccl", "assumed": ["rank from the worker name"]}]
    topology = [{"node": "n", "processes": [
        {"rank": 0, "worker": "w0", "process": "1", "gpus": [gpu], "assumed": []},
        {"rank": 1, "worker": "host", "process": "2", "gpus": [], "assumed": ["node from the worker name"]}]}]
    assert dv(f"dv.topologyMeta({js(ranks)}, {js(topology)})") == "2 ranks · 1 node · 1 GPU · world size 2 · nccl"
    assert dv(f"dv.assumedLines({js(ranks)}, {js(topology)})") == [
        "Rank 1 (host): rank from the worker name", "Rank 1 (host): node from the worker name"]
    # 32 workers named rank<N>, no host in their traces: one line for the lot, not 32
    many = [{"rank": r, "worker": f"rank{r}", "process": str(r), "gpus": [], "assumed": ["node from the worker name"]}
            for r in range(32)]
    assert dv(f"dv.assumedLines([], {js([{'node': 'n', 'processes': many}])})") == ["Ranks 0–31: node from the worker name"]


def test_rank_spans(dv):
    assert dv("[dv.rankSpans([]), dv.rankSpans([3]), dv.rankSpans([0, 1]), dv.rankSpans([8, 7, 5, 3, 2, 1, 0, 0])]") == \
        ["", "3", "0, 1", "0–3, 5, 7, 8"]


def test_join_words(dv):
    assert dv('[dv.joinWords([]), dv.joinWords(["a"]), dv.joinWords(["a", "b"]), dv.joinWords(["a", "b", "c"])]') == \
        ["", "a", "a and b", "a, b and c"]


GROUPS = [{"name": "0", "description": "default_pg", "size": 4, "ranks": [0, 1, 2, 3]},
          {"name": "1", "description": None, "size": 2, "ranks": [0, 1]}]


def test_process_groups_are_named_only_when_several_are_in_play(dv):
    assert dv(f"dv.groupLines({js(GROUPS)})") == ["0 (default_pg): 4 ranks (0–3)", "1: 2 ranks (0, 1)"]
    assert dv(f'[dv.groupLabel("0", {js(GROUPS)}), dv.groupLabel("", {js(GROUPS)}), dv.groupLabel("7")]') == \
        ["0 (default_pg)", "unnamed group", "7"]
    one = [{"group": "0"}, {"group": "0"}]
    assert dv(f"dv.manyGroups({js(one)}, {js(GROUPS[:1])})") is False
    assert dv(f"dv.manyGroups({js(one)}, {js(GROUPS)})") is True
    assert dv(f'dv.manyGroups({js([{"group": "0"}, {"group": ""}])})') is True
    mismatch = {"calls": [], "count_mismatches": [
        {"step": "4", "group": "1", "name": "nccl:all_gather", "calls": [{"rank": 0, "calls": 2}, {"rank": 1, "calls": 1}]}]}
    assert dv(f"dv.unalignedLines({js(mismatch)}, {js(GROUPS)})") == [
        "Step 4, group 1, nccl:all_gather: the ranks made different numbers of calls (rank 0 2 and rank 1 1); "
        "the first ones were matched."]
    assert dv(f"dv.unalignedLines({js(mismatch)}, {js(GROUPS[1:])})")[0].startswith("Step 4, nccl:all_gather:")


@pytest.mark.parametrize("gbps, text", [(147.478, "147.5 GB/s"), (3.14159, "3.14 GB/s"), (None, "n/a")])
def test_bandwidth_text(dv, gbps, text):
    assert dv(f"dv.formatBandwidth({js(gbps)})") == text


def test_delay_map_chart_rows_columns_and_units(dv):
    delay_map = {"rows": [[0, 0], [1, 3]], "max_rows": 256, "max_columns": 64,
                 "columns": [{"group": "0", "match": 4, "name": "nccl:all_reduce", "spread_us": 2500.0},
                             {"group": "0", "match": 9, "name": "nccl:all_gather", "spread_us": 10.0}],
                 "delay_us": [[0.0, None], [2500.0, 10.0]]}
    chart = dv(f"dv.delayMapChart({js(delay_map)})")
    (trace,) = chart["traces"]
    assert trace["type"] == "heatmap"
    assert trace["y"] == ["Rank 0", "Ranks 1–3"] and trace["x"] == ["#4", "#9"]
    # The largest delay is 2.5 ms: values in ms, a missing one stays a gap.
    assert chart["axis"]["unit"] == "ms" and chart["axis"]["divisor"] == 1000
    assert trace["z"] == [[0.0, None], [2.5, 0.01]]
    assert trace["customdata"][1][0] == "Ranks 1–3<br>nccl:all_reduce #4 (group 0)<br>delay 2.50 ms"
    assert chart["layout"]["yaxis"]["autorange"] == "reversed"
