"""The shared JS helpers (web/static/js/lib), run in Chromium as the pages use them."""

from __future__ import annotations

import json

import pytest

from browser_pages import module_runner

pytestmark = pytest.mark.browser


@pytest.fixture
def lib(blank_page):
    """Calls `expression` with the helper modules imported as `api`, `format`, `dom`, `table`, `url`, `pie`,
    `frames`, `viewport`, `lanes`, `gestures`, `counters`, `eventpanel`, `tracesearch`, `findings`, and the
    Recommendations view's shaping as `recs`."""
    return module_runner(blank_page, {
        **{name: f"lib/{name}.js" for name in ("api", "format", "dom", "table", "url", "pie", "frames", "viewport",
                                               "lanes", "gestures", "counters", "eventpanel", "tracesearch",
                                               "findings")},
        "recs": "recommendations.js"})


def test_pending_counts_requests_in_flight_and_put_off(lib):
    """<html data-pending>, which the tests' waits read: a deferred request counts from the time it
    is set until it is sent or cancelled, a request until its answer is in."""
    seen = lib("""(async () => {
        const pending = () => document.documentElement.dataset.pending;
        const seen = [pending()];
        const later = api.deferred();
        later.set(() => seen.push("never sent"), 10);
        seen.push(pending());
        later.cancel();
        seen.push(pending());
        await new Promise((sent) => later.set(() => { seen.push(pending()); sent(); }, 5));
        seen.push(pending());
        const answer = api.getJSON("/static/no-such-file.json").catch((err) => err.name);
        seen.push(pending());
        seen.push(await answer, pending());
        return seen;
    })()""")
    assert seen == ["0", "1", "0", "1", "0", "1", "ApiError", "0"]


@pytest.mark.parametrize("us, text", [
    (0, "0 us"), (0.25, "0.25 us"), (4.5, "4.5 us"), (123.4, "123 us"), (999, "999 us"),
    (1234, "1.23 ms"), (12345, "12.3 ms"), (55816.0, "55.8 ms"), (123456, "123 ms"),
    (1_234_567, "1.23 s"), (None, "n/a"),
], ids=lambda v: str(v))
def test_format_us(lib, us, text):
    assert lib(f"format.formatUs({'null' if us is None else us})") == text


@pytest.mark.parametrize("n, text", [
    (34084028416, "31.74 GiB"), (85017493504, "79.18 GiB"), (512, "512 B"), (1536, "1.50 KiB"), (None, "n/a"),
], ids=lambda v: str(v))
def test_format_bytes_is_1024_based_like_the_plugin(lib, n, text):
    assert lib(f"format.formatBytes({'null' if n is None else n})") == text


@pytest.mark.parametrize("name, short", [
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
     "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)", "cunn_SoftMaxForward"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >"
     "(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)", "vectorized_elementwise_kernel"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_tn_align4>"
     "(cutlass_80_tensorop_s1688gemm_128x128_32x3_tn_align4::Params)",
     "Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_tn_align4>"),
    ("nvjet_sm90_tst_64x64_64x13_2x1_v_bz_NNT", "nvjet_sm90_tst_64x64_64x13_2x1_v_bz_NNT"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
    ("(weird", "(weird"),
], ids=lambda v: v[:24])
def test_short_kernel_name(lib, name, short):
    assert lib(f"format.shortKernelName({name!r})") == short


def test_format_ratio_and_fields(lib):
    assert lib("format.formatRatio(0.55514)") == "55.51 %"
    assert lib("format.formatRatio(0.4, 0)") == "40 %"
    assert lib("format.formatRatio(null)") == "n/a"
    assert lib('format.formatField("sync_us", 2500)') == "2.50 ms"
    assert lib('format.fieldLabel("achieved_occupancy_ratio")') == "achieved occupancy"


STEP_EVIDENCE = {"kind": "step", "label": "step 5", "step": "5", "start_us": 1000.5, "end_us": 3000.0,
                 "dataloader_us": 1234.0}
SYNC_EVIDENCE = {"kind": "operator", "label": "aten::item at train.py(42): loss", "event_id": 77, "start_us": 2000.0,
                 "end_us": 2010.0, "op": "aten::item", "frame": "train.py(42): loss", "step": "5", "count": 1,
                 "blocked_us": 250.0, "pinned": False, "frames": ["train.py(42): loss", "train.py(9): main"],
                 "calls": ["cudaStreamSynchronize"]}


@pytest.mark.parametrize("evidence, text", [
    (STEP_EVIDENCE, "step 5: dataloader 1.23 ms"),  # the step is in the label, its range in the link
    ({"kind": "gpu", "label": "GPU 0", "device": 0, "utilization_ratio": 0.343}, "GPU 0: utilization 34.30 %"),
    ({"kind": "gpu", "label": "GPU 1", "device": 10}, "GPU 1: device 10"),  # "1" is not "10"
    # op and frame are spelled out by the label; step 5 is not (a step id only counts in step/device fields)
    (SYNC_EVIDENCE, "aten::item at train.py(42): loss: step 5, count 1, blocked 250 us, pinned: no"),
    ({"kind": "range", "start_us": 1, "end_us": 2, "peak_bytes": 3 * 2**30}, "range: peak 3.00 GiB"),
    ({"kind": "step", "label": "step 1"}, "step 1"),
], ids=["step", "gpu", "gpu-whole-word", "operator", "no-label", "label-only"])
def test_evidence_text_prefers_the_label_then_formats_fields(lib, evidence, text):
    assert lib(f"findings.evidenceText({json.dumps(evidence)})") == text


def test_findings_sort_by_severity_stably(lib):
    order = lib("""findings.sortFindings([
        {id: "a", severity: "low"}, {id: "b", severity: "high"}, {id: "c", severity: "odd"},
        {id: "d", severity: "medium"}, {id: "e", severity: "high"}]).map((f) => f.id)""")
    assert order == ["b", "e", "d", "a", "c"]


def test_evidence_target_selects_the_culprit_in_a_window_around_it(lib):
    # A 10 us event gets a window of max(10 / 0.4, 20) = 25 us centred on it: 1992.5 .. 2017.5.
    assert lib(f"findings.evidenceTarget({json.dumps(SYNC_EVIDENCE)})") == {"start_us": 1992.5, "end_us": 2017.5,
                                                                          "select": 77}
    assert lib(f"findings.evidenceTarget({json.dumps(STEP_EVIDENCE)})") == {"start_us": 1000.5, "end_us": 3000}
    assert lib('findings.evidenceTarget({kind: "op", event_id: 5})') == {"select": 5}
    assert lib('findings.evidenceTarget({kind: "gpu", device: 0})') is None
    sel = '{run: "r", worker: "w", span: "1"}'
    assert lib(f"findings.traceLink({sel}, {json.dumps(SYNC_EVIDENCE)}, 'x').getAttribute('href')") == \
        "/trace?run=r&worker=w&span=1&end_us=2017.5&select=77&start_us=1992.5"
    assert lib(f"findings.operatorLink({sel}, {json.dumps(SYNC_EVIDENCE)}, 'x').getAttribute('href')") == \
        "/operators?run=r&worker=w&span=1&q=aten%3A%3Aitem"
    assert lib(f"findings.operatorLink({sel}, {json.dumps(STEP_EVIDENCE)}, 'x')") is None
    assert lib(f"findings.evidenceLists({json.dumps(SYNC_EVIDENCE)})") == [
        {"key": "frames", "label": "frames", "items": ["train.py(42): loss", "train.py(9): main"]},
        {"key": "calls", "label": "calls", "items": ["cudaStreamSynchronize"]},
    ]


def test_measure_rows_put_thresholds_beside_their_numbers(lib):
    rows = lib("""findings.measureRows({
        numbers: {share_ratio: 0.3337, dataloader_us: 59261.8, device: 0},
        thresholds: {share_ratio: 0.05, high_share_ratio: 0.25, high_below_ratio: 0.2}})""")
    assert rows == [
        {"key": "share_ratio", "label": "share", "value": "33.37 %",
         "thresholds": [{"label": "", "value": "5.00 %"}, {"label": "high", "value": "25.00 %"}]},
        {"key": "dataloader_us", "label": "dataloader", "value": "59.3 ms", "thresholds": []},
        {"key": "device", "label": "device", "value": "0", "thresholds": []},
        # about no number: a row of its own, without a value
        {"key": "high_below_ratio", "label": "high below", "value": None, "thresholds": [{"label": "", "value": "20.00 %"}]},
    ]
    assert lib("findings.measureRows({})") == []


@pytest.mark.parametrize("param, shown, back", [
    (None, ["high", "medium", "low"], None),
    ("", ["high", "medium", "low"], None),
    ("high,low", ["high", "low"], "high,low"),
    ("low,high", ["high", "low"], "high,low"),  # written in severity order
    ("none", [], "none"),
    ("junk", ["high", "medium", "low"], None),  # a hand-edited URL naming nothing we know shows all
], ids=["absent", "empty", "two", "reordered", "none", "junk"])
def test_severity_filter_parameter_round_trips(lib, param, shown, back):
    arg = json.dumps(param) if param is not None else "undefined"
    assert lib(f"[...recs.parseSeverityFilter({arg})]") == shown
    assert lib(f"recs.severityFilterParam(recs.parseSeverityFilter({arg}))") == back


def test_visible_findings_and_count_text(lib):
    shown = lib("""recs.visibleFindings([{id: "a", severity: "low"}, {id: "b", severity: "high"},
        {id: "c", severity: "medium"}, {id: "d", severity: "odd"}], new Set(["low", "high"])).map((f) => f.id)""")
    assert shown == ["b", "a", "d"]  # an unknown severity is never filtered out
    assert lib('recs.severityCounts([{severity: "low"}, {severity: "low"}, {severity: "high"}])') == \
        {"high": 1, "medium": 0, "low": 2}
    assert lib("recs.countText(1, 1)") == "1 finding"
    assert lib("recs.countText(2, 3)") == "2 of 3 findings shown"


def test_note_renders_paragraphs_bullets_numbers_and_code(lib):
    note = ("Intro line one\nline two.\n\n- a `x<y>` bullet\n  continued\n- second\nAfter the list.\n\n"
            "1. first\n2. second")
    html = lib(f"(() => {{ const d = document.createElement('div'); d.append(dom.renderNote({note!r})); return d.innerHTML; }})()")
    assert html == ("<p>Intro line one line two.</p>"
                    "<ul><li>a <code>x&lt;y&gt;</code> bullet continued</li><li>second</li></ul>"
                    "<p>After the list.</p>"
                    "<ol><li>first</li><li>second</li></ol>")


def test_table_inserts_text_only_and_sorts_naturally(lib):
    result = lib("""(() => {
        const wrap = table.buildTable({
            columns: [{ key: "name", label: "Name" }, { key: "t", label: "T", numeric: true }],
            rows: [{ name: "<img src=x onerror=alert(1)>", t: 1 }, { name: "step 10", t: 3 }, { name: "step 9", t: null }],
            sort: { key: "name", desc: false },
        });
        const names = [...wrap.querySelectorAll("tbody td:first-child")].map((td) => td.textContent);
        wrap.querySelectorAll("th button")[1].click();  // numeric: descending first, nulls last
        const byT = [...wrap.querySelectorAll("tbody td:first-child")].map((td) => td.textContent);
        return { names, byT, images: wrap.querySelectorAll("img").length };
    })()""")
    assert result["images"] == 0
    assert result["names"] == ["<img src=x onerror=alert(1)>", "step 9", "step 10"]
    assert result["byT"] == ["step 10", "<img src=x onerror=alert(1)>", "step 9"]


def test_table_sorts_from_anywhere_in_the_header_cell_once_per_click(lib):
    # A click on the cell's padding sorts as a click on its label does; a click on the label sorts once
    # (it reaches the cell by bubbling: twice would sort back).
    result = lib("""(() => {
        const sorts = [];
        const wrap = table.buildTable({
            columns: [{ key: "name", label: "Name" }, { key: "t", label: "T", numeric: true }],
            rows: [{ name: "a", t: 1 }, { name: "b", t: 3 }], onSort: (s) => sorts.push(table.sortToText(s)),
        });
        const first = () => wrap.querySelector("tbody td").textContent;
        wrap.querySelectorAll("th")[1].click();
        const byCell = first();
        wrap.querySelectorAll("th button")[1].click();
        return { byCell, byLabel: first(), sorts };
    })()""")
    assert result == {"byCell": "b", "byLabel": "a", "sorts": ["t:desc", "t:asc"]}


def test_query_puts_selection_first_and_drops_empty(lib):
    assert lib('url.toQuery({ sort: "total_us:desc", span: "2", run: "a b", worker: "w", x: "" })') == \
        "?run=a+b&worker=w&span=2&sort=total_us%3Adesc"


@pytest.mark.parametrize("total, wanted, expected", [
    (0, 1, {"page": 1, "pages": 1, "start": 0, "end": 0}),
    (120, 1, {"page": 1, "pages": 3, "start": 0, "end": 50}),
    (120, 3, {"page": 3, "pages": 3, "start": 100, "end": 120}),
    (120, 9, {"page": 3, "pages": 3, "start": 100, "end": 120}),   # past the end: the last page
    (120, "junk", {"page": 1, "pages": 3, "start": 0, "end": 50}),  # from a hand-edited URL
    (120, 0, {"page": 1, "pages": 3, "start": 0, "end": 50}),
    (50, 2, {"page": 1, "pages": 1, "start": 0, "end": 50}),
], ids=lambda v: str(v) if not isinstance(v, dict) else "")
def test_page_range_clamps(lib, total, wanted, expected):
    assert lib(f"table.pageRange({total}, {wanted!r})") == expected


def test_range_text_and_filter(lib):
    assert lib("table.rangeText({ start: 50, end: 100 }, 1234)") == "51–100 of 1,234"
    assert lib("table.rangeText({ start: 0, end: 0 }, 0)") == "No rows"
    rows = '[{ name: "aten::Conv2d" }, { name: "aten::mm" }, { name: "cudnn_conv" }]'
    assert lib(f'table.filterRows({rows}, "CONV").map((r) => r.name)') == ["aten::Conv2d", "cudnn_conv"]
    assert lib(f'table.filterRows({rows}, "  ").length') == 3
    assert lib(f'table.filterRows({rows}, "mm", (r) => r.name.slice(0, 4)).length') == 0


def test_table_paginates_and_sorting_returns_to_page_one(lib):
    result = lib("""(() => {
        const pages = [];
        const rows = Array.from({ length: 120 }, (_, i) => ({ name: `op${i}`, t: i }));
        const block = table.buildTable({
            columns: [{ key: "name", label: "Name" }, { key: "t", label: "T", numeric: true },
                      { key: "x", label: "", sortable: false, render: (row) => dom.el("b", { text: row.name }) }],
            rows, pageSize: 50, page: 3, onPage: (p) => pages.push(p),
        });
        const names = () => [...block.querySelectorAll("tbody tr td:first-child")].map((td) => td.textContent);
        const range = () => block.querySelector('[data-testid="pager-range"]').textContent;
        const button = (name) => block.querySelector(`[data-testid="pager-${name}"]`);
        const out = { start: [range(), names()[0], button("next").disabled, block.querySelectorAll("th button").length] };
        button("prev").click();
        out.prev = [range(), names()[0]];
        block.querySelector("th button").click();  // sort by name: back to page 1
        out.sorted = [range(), names()[0]];
        out.pages = pages;
        out.bold = block.querySelectorAll("tbody b").length;
        return out;
    })()""")
    assert result["start"] == ["101–120 of 120", "op100", True, 2]  # the actions column has no sort button
    assert result["prev"] == ["51–100 of 120", "op50"]
    assert result["sorted"] == ["1–50 of 120", "op0"]
    assert result["pages"] == [2, 1]
    assert result["bold"] == 50


def test_table_truncated_cells_keep_the_full_text_as_title(lib):
    long = "void cutlass::Kernel<" + "x" * 400 + ">"
    result = lib(f"""(() => {{
        const wrap = table.buildTable({{ columns: [{{ key: "name", label: "Name", truncate: true }}], rows: [{{ name: {long!r} }}] }});
        const span = wrap.querySelector("td span");
        return [span.textContent, span.title];
    }})()""")
    assert result == [long, long]


@pytest.mark.parametrize("text, top", [("", 10), (None, 10), ("5", 5), ("0", 1), ("999", 50), ("x", 10), ("7.6", 8)],
                         ids=lambda v: repr(v))
def test_parse_top(lib, text, top):
    assert lib(f"pie.parseTop({'null' if text is None else repr(text)})") == top


def test_top_slices_keep_shares_of_the_whole(lib):
    result = lib("""pie.topSlices([
        { key: "a", name: "a", value: 10 }, { key: "b", name: "b", value: 50 }, { key: "z", name: "z", value: 0 },
        { key: "c", name: "c", value: 25 }, { key: "d", name: "d", value: 15 },
    ], 2, "operators")""")
    # 10 + 50 + 25 + 15 = 100: the top 2 (b, c), then Other = a + d = 25; zero-time rows are left out.
    assert result["total"] == 100
    assert [(s["name"], s["value"], s["share_ratio"]) for s in result["slices"]] == [
        ("b", 50, 0.5), ("c", 25, 0.25), ("Other (2 operators)", 25, 0.25)]
    one = lib('pie.topSlices([{ key: "a", name: "a", value: 3 }, { key: "b", name: "b", value: 1 }], 1, "kernels")')
    assert one["slices"][-1]["name"] == "Other (1 kernel)"
    assert lib('pie.topSlices([{ key: "a", name: "a", value: 3 }], 10).slices.length') == 1


def test_pie_labels_are_short_distinct_and_escaped(lib):
    assert lib('pie.shortLabel("abcdefghij", 6)') == "abcde…"
    assert lib('pie.shortLabel("autograd::engine::evaluate_function: ConvolutionBackward0", 36, "middle")') == \
        "autograd::engi… ConvolutionBackward0"
    labels = lib('pie.uniqueLabels(["void cutlass::Kernel<A>", "void cutlass::Kernel<B>", "short"], 12)')
    assert labels == ["void cutlas…", "void cutlas… #2", "short"]
    assert lib('pie.plotlyText("f<float, 2>(x&y)")') == "f&lt;float, 2&gt;(x&amp;y)"
    assert lib('pie.hoverLines("abcdef", 2, 2)') == "ab<br>c…"
    trace = lib('pie.pieTrace([{ key: "k", name: "a<b>", label: "a<b>", value: 2, share_ratio: 1, details: [] }])')
    assert trace["labels"] == ["a&lt;b&gt;"] and "<b>2.0 us</b> (100.00 %)" in trace["customdata"][0]


def test_frames_text_links_and_copy(lib):
    def call(fn: str, frame: dict):
            return lib(f"frames.{fn}({json.dumps(frame)})")
    rel = {"file": "torch/nn/modules/conv.py", "line": 534, "function": "_conv_forward"}
    absolute = {"file": "/home/me/my run/train.py", "line": 42, "function": "forward"}
    windows = {"file": "C:\\work\\main.py", "line": 7, "function": "<module>"}
    builtin = {"file": None, "line": None, "function": "<built-in method conv2d>"}
    assert call("frameText", rel) == "torch/nn/modules/conv.py(534): _conv_forward"
    assert call("frameText", builtin) == "<built-in method conv2d>"
    assert call("frameCopyText", absolute) == "/home/me/my run/train.py:42"
    assert call("frameCopyText", builtin) is None
    assert call("editorHref", rel) is None
    assert call("editorHref", absolute) == "vscode://file/home/me/my%20run/train.py:42"
    assert call("editorHref", windows) == "vscode://file/C:/work/main.py:7"
    # Found by the server under a --source-root; moved to this computer's folder by the page's mapping.
    found = {**rel, "path": "/srv/venv/site-packages/torch/nn/modules/conv.py"}
    assert call("serverPath", found) == found["path"] and call("serverPath", rel) is None
    assert call("editorHref", found) == "vscode://file/srv/venv/site-packages/torch/nn/modules/conv.py:534"
    mapping = '{ from: "/srv/venv", to: "/home/me/venv" }'
    assert lib(f"frames.editorHref({json.dumps(found)}, {mapping})") == \
        "vscode://file/home/me/venv/site-packages/torch/nn/modules/conv.py:534"
    assert lib(f"frames.mapPath('/other/x.py', {mapping})") == "/other/x.py"
    assert lib("frames.mapPath('/srv/venv/x.py', null)") == "/srv/venv/x.py"
    assert [call("isLibraryFrame", f) for f in (rel, absolute, builtin)] == [True, False, True]
    assert call("isLibraryFrame", {"file": "/x/lib/python3.11/site-packages/torchvision/a.py", "line": 1, "function": "f"})



# ---------------------------------------------------------------- trace timeline


BOUNDS = "{ start_us: 0, end_us: 1000 }"


def approx_window(win, start, end, eps=1e-6):
    return abs(win["start_us"] - start) < eps and abs(win["end_us"] - end) < eps


@pytest.mark.parametrize("win, expected", [
    ("{ start_us: 100, end_us: 200 }", (100, 200)),       # inside: unchanged
    ("{ start_us: -50, end_us: 50 }", (0, 100)),           # slides right, keeps its span
    ("{ start_us: 950, end_us: 1100 }", (850, 1000)),      # slides left
    ("{ start_us: -10, end_us: 2000 }", (0, 1000)),        # wider than the trace: the trace
    ("{ start_us: 500, end_us: 500.002 }", (499.976, 500.026)),  # narrower than 0.05 us: widened around its centre 500.001
    ("{ start_us: 300, end_us: 200 }", (0, 1000)),         # reversed: the whole trace
    ("{ start_us: NaN, end_us: 5 }", (0, 1000)),
], ids=["inside", "left-edge", "right-edge", "too-wide", "too-narrow", "reversed", "nan"])
def test_viewport_clamp_window(lib, win, expected):
    assert approx_window(lib(f"viewport.clampWindow({win}, {BOUNDS})"), *expected)


def test_viewport_zoom_keeps_the_time_under_the_pointer(lib):
    # Pointer at a quarter of [0, 100]: t = 25 stays at a quarter of the new span 50 -> [12.5, 62.5].
    assert approx_window(lib(f"viewport.zoomAt({{ start_us: 0, end_us: 100 }}, 0.5, 0.25, {BOUNDS})"), 12.5, 62.5)
    # Zooming out at the left edge slides instead of leaving the trace: span 200 from 0.
    assert approx_window(lib(f"viewport.zoomAt({{ start_us: 0, end_us: 100 }}, 2, 0.5, {BOUNDS})"), 0, 200)
    # Never wider than the trace, never narrower than 0.05 us.
    assert approx_window(lib(f"viewport.zoomAt({{ start_us: 100, end_us: 900 }}, 10, 0.5, {BOUNDS})"), 0, 1000)
    win = lib(f"viewport.zoomAt({{ start_us: 500, end_us: 500.1 }}, 0.001, 0.5, {BOUNDS})")
    assert abs((win["end_us"] - win["start_us"]) - 0.05) < 1e-9


def test_viewport_pan_stops_at_the_edges(lib):
    assert approx_window(lib(f"viewport.panBy({{ start_us: 100, end_us: 200 }}, 50, {BOUNDS})"), 150, 250)
    assert approx_window(lib(f"viewport.panBy({{ start_us: 100, end_us: 200 }}, -500, {BOUNDS})"), 0, 100)
    assert approx_window(lib(f"viewport.panBy({{ start_us: 800, end_us: 900 }}, 500, {BOUNDS})"), 900, 1000)


def test_viewport_window_around_an_event_keeps_context(lib):
    # A 100 us event takes 40 % of the window: span 250, centred on 150.
    assert approx_window(lib(f"viewport.windowAround(100, 100, {BOUNDS})"), 25, 275)
    # A 2 us kernel: at least 20 us, centred on 101.
    assert approx_window(lib(f"viewport.windowAround(100, 2, {BOUNDS})"), 91, 111)
    # Exactly the event (double-click on a merged block), clamped at the trace's end.
    assert approx_window(lib(f"viewport.windowAround(990, 20, {BOUNDS}, {{ share: 1, minSpan: 0 }})"), 980, 1000)


def test_viewport_pixels_and_times(lib):
    assert lib("viewport.xOf(150, { start_us: 100, end_us: 200 }, 1000)") == 500
    assert lib("viewport.timeOf(250, { start_us: 100, end_us: 200 }, 1000)") == 125
    # A 0.01 us event is drawn one pixel wide; boxes past the edges are cut (2 px margin); outside: null.
    assert lib("viewport.boxPixels(150, 0.01, { start_us: 100, end_us: 200 }, 1000)") == [500, 501]
    assert lib("viewport.boxPixels(50, 100, { start_us: 100, end_us: 200 }, 1000)") == [-2, 500]
    assert lib("viewport.boxPixels(10, 20, { start_us: 100, end_us: 200 }, 1000)") is None


@pytest.mark.parametrize("span, width, step", [
    (113_000, 1000, 20_000),  # 10,170 us per 90 px -> 20 ms
    (1000, 1000, 100),        # 90 -> 100
    (1000, 900, 100),         # exactly 100
    (132, 1100, 20),          # 10.8 -> 20
    (0.5, 1000, 0.05),        # 0.045 -> 0.05
], ids=lambda v: str(v))
def test_viewport_nice_tick_steps(lib, span, width, step):
    assert abs(lib(f"viewport.niceStep({span}, {width})") - step) < 1e-12


def test_viewport_ruler_ticks_count_from_the_trace_start(lib):
    ruler = lib("viewport.rulerTicks({ start_us: 1005, end_us: 1105 }, 1000, 1000)")
    assert ruler["step"] == 10
    assert [t["offset"] for t in ruler["ticks"]] == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert ruler["ticks"][0]["x"] == 50


@pytest.mark.parametrize("offset, step, top, text", [
    (1200, 200, 113_000, "1.2 ms"),
    (0, 20_000, 113_000, "0 ms"),
    (120_346, 1, 120_400, "120.346 ms"),  # deep in a long trace: short labels, to the microsecond
    (300_000, 100_000, 1_200_000, "0.3 s"),
    (12.5, 0.5, 100, "12.5 us"),
    (50, 10, 100, "50 us"),
    (4_500_000.25, 0.05, 4_500_001, "4.50000025 s"),
], ids=lambda v: str(v))
def test_format_tick(lib, offset, step, top, text):
    assert lib(f"format.formatTick({offset}, {step}, {top})") == text


def test_format_offset(lib):
    assert lib("format.formatOffset(850.25)") == "850.250 us"
    assert lib("format.formatOffset(12345.678)") == "12.346 ms"
    assert lib("format.formatOffset(1234567)") == "1.234567 s"
    assert lib("format.formatOffset(null)") == "n/a"
    assert lib("format.formatOffset(0)") == "0 us"


def test_viewport_request_window_pads_and_reuse(lib):
    # Half a span each side at the view's resolution (0.1 us per px).
    assert lib(f"viewport.requestWindow({{ start_us: 100, end_us: 200 }}, 1000, {BOUNDS})") == \
        {"start_us": 50, "end_us": 250, "width_px": 2000}
    # Clamped at the trace's start: fewer pixels.
    assert lib(f"viewport.requestWindow({{ start_us: 10, end_us: 110 }}, 1000, {BOUNDS})") == \
        {"start_us": 0, "end_us": 160, "width_px": 1600}
    have = "{ start_us: 50, end_us: 250, width_px: 2000 }"
    assert lib(f"viewport.covers({have}, {{ start_us: 120, end_us: 220 }}, 1000, {BOUNDS})") is True   # a pan within
    assert lib(f"viewport.covers({have}, {{ start_us: 200, end_us: 300 }}, 1000, {BOUNDS})") is False  # past its end
    assert lib(f"viewport.covers({have}, {{ start_us: 110, end_us: 190 }}, 1000, {BOUNDS})") is False  # zoomed in 1.25x
    assert lib(f"viewport.covers({have}, {{ start_us: 50, end_us: 250 }}, 1000, {BOUNDS})") is True   # zoomed out: finer data
    assert lib(f"viewport.covers(null, {{ start_us: 50, end_us: 250 }}, 1000, {BOUNDS})") is False


def test_viewport_url_parameters(lib):
    assert approx_window(lib(f'viewport.parseWindow("100", "200.5", {BOUNDS})'), 100, 200.5)
    assert lib(f'viewport.parseWindow("x", "200", {BOUNDS})') is None
    assert lib(f'viewport.parseWindow("300", "200", {BOUNDS})') is None
    assert lib(f"viewport.parseWindow(undefined, undefined, {BOUNDS})") is None
    assert lib(f'viewport.parseWindow("2000", "2100", {BOUNDS})') is None  # another trace's window
    assert approx_window(lib(f'viewport.parseWindow("900", "1100", {BOUNDS})'), 800, 1000)  # overlapping: clamped
    assert lib("viewport.timeParam(4492130541265.25)") == "4492130541265.25"
    assert [lib(f"viewport.timeParam({v})") for v in (1000, 0.0004, 10.5004)] == ["1000", "0", "10.5"]


LANES = """[
  { id: 0, process: "python3 (pid 1)", name: "thread 1", kind: "cpu", rows: 3, events: 10 },
  { id: 4, process: "python3 (pid 1)", name: "thread 2", kind: "cpu", rows: 0, events: 0 },
  { id: 7, process: "GPU 0", name: "stream 7", kind: "gpu", rows: 2, events: 5 },
]"""


def test_timeline_lane_layout(lib):
    layout = lib(f"""(() => {{
        const l = lanes.laneLayout({LANES});
        return {{ items: l.items.map((i) => [i.type, i.type === "lane" ? i.lane.id : i.label, i.y, i.h]), height: l.height,
                 at: [5, 22, 25, 26, 67, 68, 70, 95, 140].map((y) => {{ const a = lanes.laneAt(l, y); return a ? [a.item.lane.id, a.row] : null; }}) }};
    }})()""")
    # Header 22; lane 0: 3 rows * 14 + 2 * 3 = 48; lane 4 (no rows) is one row: 20; header 22; lane 7: 34.
    assert layout["items"] == [["process", "python3 (pid 1)", 0, 22], ["lane", 0, 22, 48], ["lane", 4, 70, 20],
                               ["process", "GPU 0", 90, 22], ["lane", 7, 112, 34]]
    assert layout["height"] == 146
    # y 5: a header; 22-24: lane 0's top padding; rows at 25, 39, 53; 67-69: its bottom padding; 70: lane 4's
    # padding; 95: the GPU header; lane 7's rows at 115 and 129.
    assert layout["at"] == [None, None, [0, 0], [0, 0], None, None, None, None, [7, 1]]


WINDOW = """{
  start_us: 0, end_us: 100, width_px: 1000, names: ["aten::mm", "void gemm<float>(int)", "tiny"],
  lanes: [
    { id: 0, boxes: { id: [10, 11, 12], start_us: [10, 20, 20.5], dur_us: [50, 5, 1], row: [0, 1, 2], name: [0, 0, 0], kind: [1, 1, 1] },
      merged: { start_us: [70], end_us: [80], row: [0], count: [40], busy_us: [6] } },
    { id: 7, boxes: { id: [20], start_us: [30], dur_us: [10], row: [1], name: [1], kind: [7] },
      merged: { start_us: [], end_us: [], row: [], count: [], busy_us: [] } },
  ],
}"""
KINDS = '["other", "cpu_op", "user_annotation", "gpu_user_annotation", "python_function", "runtime", "driver", "kernel"]'


def test_timeline_hit_test_finds_boxes_and_merged_blocks(lib):
    hits = lib(f"""(() => {{
        const layout = lanes.laneLayout({LANES});
        const data = lanes.prepareWindow({WINDOW}, {KINDS});
        const win = {{ start_us: 0, end_us: 100 }};
        // lane 0 content y: 22 + 3 = 25 is row 0's top; rows are 14 px.
        const at = (x, y) => lanes.hitTest(data, layout, win, 1000, x, y);
        return {{
            box: at(300, 30),                 // t = 30 in row 0: event 10 [10, 60]
            row1: at(220, 44),                // t = 22 in row 1: event 11 [20, 25]
            slop: at(251, 44),                // 1 px past event 11's end: still it
            far: at(300, 44),                 // nothing at t = 30 in row 1
            merged: at(750, 30),              // t = 75 in row 0: the merged block
            gpu: at(350, 112 + 3 + 14 + 5),   // lane 7, row 1, t = 35: the kernel
            header: at(300, 10),
            present: [...data.present].sort(), counts: [data.boxCount, data.mergedCount],
            place: lanes.placeOf(data, 11), unknown: lanes.placeOf(data, 99),
        }};
    }})()""")
    assert hits["box"] == {"kind": "box", "lane": 0, "index": 0, "id": 10}
    assert hits["row1"]["id"] == 11
    assert hits["slop"]["id"] == 11
    assert hits["far"] is None
    assert hits["merged"] == {"kind": "merged", "lane": 0, "index": 0}
    assert hits["gpu"]["id"] == 20
    assert hits["header"] is None
    assert hits["present"] == ["cpu_op", "kernel"]
    assert hits["counts"] == [4, 1]
    assert hits["place"] == {"id": 11, "lane": 0, "row": 1, "start_us": 20, "dur_us": 5}
    assert hits["unknown"] is None


def test_timeline_collapsed_lane_is_one_row_and_hits_the_deepest_call(lib):
    result = lib(f"""(() => {{
        const layout = lanes.laneLayout({LANES}, {{ collapsed: new Set([0]) }});
        const data = lanes.prepareWindow({WINDOW}, {KINDS});
        const win = {{ start_us: 0, end_us: 100 }};
        const lane0 = layout.lanes.get(0);
        return {{
            h: lane0.h, height: layout.height, top2: lanes.rowTop(layout, lane0, 2),
            // t = 20.8: events 10 (row 0), 11 (row 1) and 12 (row 2) all hold it; the deepest wins.
            deep: lanes.hitTest(data, layout, win, 1000, 208, 30),
            below: lanes.laneAt(layout, 25 + 14),
            order: data.lanes.get(0).byRow,
        }};
    }})()""")
    # Lane 0 folded: 14 + 2 * 3 = 20 px instead of 48.
    assert result["h"] == 20 and result["height"] == 146 - 28
    assert result["top2"] == 25
    assert result["deep"]["id"] == 12
    assert result["below"] is None
    assert result["order"] == [0, 1, 2]
    assert lib('[...lanes.parseCollapsed("3, 4,,x,1.5")]') == [3, 4]


def test_timeline_colours_labels_and_steps(lib):
    result = lib("""(() => {
        const a = lanes.eventColor("void gemm<float>(int)", "kernel");
        const hue = (c) => Number(/hsl\\((\\d+)/.exec(c.fill)[1]);
        return {
            stable: JSON.stringify(a) === JSON.stringify(lanes.eventColor("void gemm<float>(int)", "kernel")),
            kernelHues: ["a", "b", "c", "d", "e"].map((n) => hue(lanes.eventColor(n, "kernel"))),
            opHues: ["a", "b", "c", "d", "e"].map((n) => hue(lanes.eventColor(n, "cpu_op"))),
            unknown: lanes.eventColor("x", "no_such_kind").fill === lanes.eventColor("x", "other").fill,
            label: lanes.boxLabel("void at::native::vectorized_elementwise_kernel<4, F>(int, F)", "kernel"),
            opLabel: lanes.boxLabel("aten::mm", "cpu_op"),
            steps: ["2", "ProfilerStep#12", "warmup"].map(lanes.stepLabel),
        };
    })()""")
    assert result["stable"] and result["unknown"]
    assert all(195 <= h <= 240 for h in result["kernelHues"])
    assert all(95 <= h <= 165 for h in result["opHues"])
    assert len(set(result["kernelHues"])) > 1
    assert result["label"] == "vectorized_elementwise_kernel"
    assert result["opLabel"] == "aten::mm"
    assert result["steps"] == ["Step 2", "Step 12", "warmup"]


def test_timeline_merged_blocks_shade_by_busy_share(lib):
    assert [lib(f"lanes.mergedBucket({busy}, 100)") for busy in (0, 10, 25, 60, 99, 100, 150)] == [0, 0, 1, 2, 3, 3, 3]
    assert lib("lanes.mergedBucket(5, 0)") == 0


@pytest.mark.parametrize("text, px, fitted", [
    ("abcdefghij", 60, "abcdefghij"),   # 10 chars * 6 px
    ("abcdefghij", 40, "abcde…"),       # "abcde…" is 36 px, "abcdef…" 42
    ("abc", 10, None),                  # not even "ab…" (18 px)
    ("", 100, None),
], ids=lambda v: str(v))
def test_timeline_fit_label(lib, text, px, fitted):
    assert lib(f"lanes.fitLabel({text!r}, {px}, (s) => 6 * s.length)") == fitted


def test_counter_range_lookup_and_text(lib):
    result = lib("""(() => {
        const ratio = { id: "u", name: "GPU 0 utilization", unit: "ratio", t_us: [0, 10, 20], value: [0.2, null, 0.5] };
        const bytes = { id: "m", name: "GPU 0 memory allocated", unit: "bytes", t_us: [0, 10], value: [1024, 4096] };
        const signed = { id: "c", name: "counter", unit: "value", t_us: [0, 10], value: [-3, 7] };
        const empty = { id: "e", name: "empty", unit: "value", t_us: [], value: [] };
        return {
            ranges: [ratio, bytes, signed, empty].map(counters.seriesRange),
            at: [-1, 0, 15, 25].map((t) => counters.valueAt(ratio, t)),
            none: counters.valueAt(empty, 5),
            max: [ratio, bytes, signed, empty].map(counters.seriesMax),
            text: [counters.formatCounter(0.4321, "ratio"), counters.formatCounter(3 * 1024 ** 3, "bytes"),
                   counters.formatCounter(12345.6, "value"), counters.formatCounter(0.1234, "value"), counters.formatCounter(null, "value")],
        };
    })()""")
    assert result["ranges"] == [[0, 1], [0, 4096], [-3, 7], [0, 1]]
    assert result["at"] == [None, {"t_us": 0, "value": 0.2}, {"t_us": 10, "value": None}, {"t_us": 20, "value": 0.5}]
    assert result["none"] is None
    assert result["max"] == [0.5, 4096, 7, None]
    assert result["text"] == ["43.2 %", "3.00 GiB", "12,346", "0.123", "n/a"]


def test_trace_view_text(lib):
    result = lib("""(() => {
        const data = lanes.prepareWindow(""" + WINDOW + ", " + KINDS + """);
        return {
            counts: [tracesearch.searchCountText(-1, 12, 12), tracesearch.searchCountText(2, 12, 12), tracesearch.searchCountText(0, 0, 0),
                     tracesearch.searchCountText(4, 2500, 1000)],
            fields: [eventpanel.fieldText("[132, 1, 1]"), eventpanel.fieldText(168), eventpanel.fieldText([[32, 3]]), eventpanel.fieldText(null),
                     eventpanel.fieldText({ a: "<b>" })],
            relation: eventpanel.relationLabel("launched by"),
            kinds: [lanes.kindLabel("kernel"), lanes.kindLabel("cpu_op"), lanes.kindLabel("new_kind")],
            linkRow: lanes.placeLink({ relation: "launches", id: 11, name: "x", start_us: 20, dur_us: 5, lane: 0 }, data),
            linkOwnRow: lanes.placeLink({ relation: "parent", id: 99, name: "x", start_us: 1, dur_us: 5, lane: 0, row: 4 }, data),
            linkNowhere: lanes.placeLink({ relation: "parent", id: 98, name: "x", start_us: 1, dur_us: 5, lane: 7 }, null),
            tipBox: lanes.tooltipText(data, { kind: "box", lane: 7, index: 0, id: 20 }, 0),
            tipMerged: lanes.tooltipText(data, { kind: "merged", lane: 0, index: 0 }, 0),
        };
    })()""")
    assert [c["text"] for c in result["counts"]] == ["– of 12", "3 of 12", "No matches", "5 of 2,500"]
    assert [bool(c["title"]) for c in result["counts"]] == [False, False, False, True]
    assert result["fields"] == ["[132, 1, 1]", "168", "[[32,3]]", "n/a", '{"a":"<b>"}']
    assert result["relation"] == "Launched by"
    assert result["kinds"] == ["Kernel", "CPU op", "new_kind"]
    assert result["linkRow"]["row"] == 1 and result["linkOwnRow"]["row"] == 4 and result["linkNowhere"]["row"] == 0
    assert result["tipBox"] == {"title": "void gemm<float>(int)", "lines": ["Kernel · 10 us", "At 30.000 us"]}
    assert result["tipMerged"]["title"] == "40 events, merged"
    assert result["tipMerged"]["lines"][0] == "Busy 6.0 us of 10 us (60 %)"


def test_gestures_wheel_and_keys(lib):
    view = "{ start_us: 100, end_us: 200 }"
    size = "{ width: 1000, height: 500 }"
    result = lib(f"""(() => {{
        const wheel = (w, anchor = 0.5) => gestures.wheelWindow({view}, w, anchor, {size}, {BOUNDS});
        return {{
            zoomIn: wheel({{ deltaX: 0, deltaY: -100, deltaMode: 0, shiftKey: false, ctrlKey: false }}, 0.25),
            zoomOut: wheel({{ deltaX: 0, deltaY: 100, deltaMode: 0, shiftKey: false, ctrlKey: false }}),
            pinch: wheel({{ deltaX: 0, deltaY: -10, deltaMode: 0, shiftKey: false, ctrlKey: true }}),
            shiftPan: wheel({{ deltaX: 0, deltaY: 100, deltaMode: 0, shiftKey: true, ctrlKey: false }}),
            sideways: wheel({{ deltaX: -50, deltaY: 5, deltaMode: 0, shiftKey: false, ctrlKey: false }}),
            lines: wheel({{ deltaX: 0, deltaY: 3, deltaMode: 1, shiftKey: true, ctrlKey: false }}),
            keys: ["w", "S", "a", "d", "0", "x"].map((k) => gestures.keyWindow(k, {view}, 0.5, {BOUNDS})),
            typing: [["INPUT", "search"], ["INPUT", "checkbox"], ["TEXTAREA", ""], ["SELECT", ""], ["DIV", ""]].map(([tag, type]) => {{
                const node = document.createElement(tag);
                if (type) node.type = type;
                return gestures.isTyping(node);
            }}),
        }};
    }})()""")
    # Wheel up 100 px zooms in by exp(-0.15) around a quarter of the plot (t = 125 stays put).
    span = 100 * 2.718281828459045 ** -0.15
    assert approx_window(result["zoomIn"], 125 - 0.25 * span, 125 + 0.75 * span, 1e-9)
    assert result["zoomOut"]["end_us"] - result["zoomOut"]["start_us"] > 100
    pinch = 100 * 2.718281828459045 ** -0.1  # ctrl (a pinch): 0.01 per px, so -10 px is exp(-0.1)
    assert approx_window(result["pinch"], 150 - pinch / 2, 150 + pinch / 2, 1e-9)
    assert approx_window(result["shiftPan"], 110, 210)   # 100 px at 0.1 us per px
    assert approx_window(result["sideways"], 95, 195)    # deltaX wins when larger
    assert approx_window(result["lines"], 104.8, 204.8)  # 3 lines of 16 px
    w, s_, a, d, zero, other = result["keys"]
    assert approx_window(w, 110, 190) and approx_window(s_, 87.5, 212.5)
    assert approx_window(a, 85, 185) and approx_window(d, 115, 215)
    assert approx_window(zero, 0, 1000) and other is None
    assert result["typing"] == [True, False, True, True, False]
