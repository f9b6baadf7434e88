"""The shared JS helpers (web/static/js/lib), run in Chromium as the pages use them."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


@pytest.fixture
def lib(page, server):
    """Calls `expression` with the helper modules imported as `format`, `dom`, `table`, `url`."""
    page.goto(f"{server}/static/css/profboard.css")  # any same-origin HTML document can import the modules

    def run(expression: str):
        return page.evaluate(f"""async () => {{
            const format = await import("/static/js/lib/format.js");
            const dom = await import("/static/js/lib/dom.js");
            const table = await import("/static/js/lib/table.js");
            const url = await import("/static/js/lib/url.js");
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
