"""The shared JS helpers (web/static/js/lib), run in Chromium as the pages use them."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


@pytest.fixture
def lib(page, server):
    """Calls `expression` with the helper modules imported as `format`, `dom`, `table`, `url`, `pie`, `frames`."""
    page.goto(f"{server}/static/css/profboard.css")  # any same-origin HTML document can import the modules

    def run(expression: str):
        return page.evaluate(f"""async () => {{
            const format = await import("/static/js/lib/format.js");
            const dom = await import("/static/js/lib/dom.js");
            const table = await import("/static/js/lib/table.js");
            const url = await import("/static/js/lib/url.js");
            const pie = await import("/static/js/lib/pie.js");
            const frames = await import("/static/js/lib/frames.js");
            return ({expression});
        }}""")
    return run


@pytest.mark.parametrize("us, text", [
    (0, "0 us"), (0.25, "0.25 us"), (4.5, "4.5 us"), (123.4, "123 us"), (999, "999 us"),
    (1234, "1.23 ms"), (12345, "12.3 ms"), (55816.0, "55.8 ms"), (123456, "123 ms"),
    (1_234_567, "1.23 s"), (None, "n/a"),
], ids=lambda v: str(v))
def test_format_us(lib, us, text):
    assert lib(f"format.formatUs({'null' if us is None else us})") == text


@pytest.mark.parametrize("n, text", [
    (34084028416, "31.74 GB"), (85017493504, "79.18 GB"), (512, "512 B"), (1536, "1.50 KB"), (None, "n/a"),
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
        import json
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
    assert [call("isLibraryFrame", f) for f in (rel, absolute, builtin)] == [True, False, True]
    assert call("isLibraryFrame", {"file": "/x/lib/python3.11/site-packages/torchvision/a.py", "line": 1, "function": "f"})
