/**
 * The Memory view (profiler traces): per device, allocated and reserved memory over time as a step
 * plot with peaks, steps and capacity; a time range selected by dragging across it; the
 * allocations and frees in that range; and per-operator memory statistics over it. Reads
 * `/api/memory/devices`, `/api/memory/curve`, `/api/memory/events`, `/api/memory/stats`, and the
 * trace start from `/api/trace/lanes` so that times read as in the Trace view.
 *
 * Three layers: fetch (`fetch*`), shape (pure functions here, in `lib/memcurve.js` and
 * `lib/memtables.js`, exported for tests) and draw (`mount` and the `draw*` helpers). View state
 * lives in the URL: `device`, `start_us`, `end_us` (absolute trace microseconds), `capacity=1`, and
 * per table `events_q`, `events_sort`, `events_page`, `stats_q`, `stats_sort`, `stats_page`.
 * @module memory
 */

import { getJSON, isAbort } from "./lib/api.js";
import { byTestId, el, showWarnings } from "./lib/dom.js";
import { formatBytes, formatCount, formatOffset, formatUs } from "./lib/format.js";
import {
  allocatedChange, byteTicks, capacityMarks, clampRange, curveTraces, memoryExtent, parseRange,
  rangeFromRelayout, rangeLabel, rangeQuery, stepMarks, stepOfRange, toMs, yTop,
} from "./lib/memcurve.js";
import { eventColumns, eventsCountText, statColumns } from "./lib/memtables.js";
import { draw, layout, purgeAll } from "./lib/plot.js";
import { PAGE_SIZE, buildTable, filterRows, parseSort, sortToText } from "./lib/table.js";
import { navigate, updateQuery } from "./lib/url.js";

/**
 * @typedef {import("./lib/memcurve.js").Range} Range
 * @typedef {import("./lib/memcurve.js").Curve} Curve
 * @typedef {import("./lib/memcurve.js").StepRange} StepRange
 * @typedef {{device: string, label: string, records: number, has_totals: boolean, has_addresses: boolean}} Device
 * @typedef {{devices: Device[], default: string|null, start_us: number|null, end_us: number|null,
 *            steps: StepRange[], warnings: string[]}} Devices
 * @typedef {import("./lib/memtables.js").EventRow} EventRow
 * @typedef {import("./lib/memtables.js").StatRow} StatRow
 * @typedef {{device: string|null, total: number, rows: EventRow[], reason: string|null, warnings: string[]}} Events
 * @typedef {{device: string|null, rows: StatRow[], warnings: string[]}} Stats
 * @typedef {{run?: string, worker?: string, span?: string}} Selection
 */

const SEARCH_DELAY_MS = 150;
const MAX_CURVE_PX = 10000;

const STATS_SORT = Object.freeze({ key: "self_size_increase_bytes", desc: true });

// ---------------------------------------------------------------- fetch

/** @param {Selection} sel @param {AbortSignal} [signal] @returns {Promise<Devices>} */
export function fetchDevices({ run, worker, span }, signal) {
  return getJSON("/api/memory/devices", { run, worker, span }, signal);
}

/**
 * The trace start as the Trace view counts it (null when the trace has no timeline).
 * @param {Selection} sel @param {AbortSignal} [signal] @returns {Promise<number|null>}
 */
export async function fetchOrigin({ run, worker, span }, signal) {
  try {
    const lanes = await getJSON("/api/trace/lanes", { run, worker, span }, signal);
    return typeof lanes.start_us === "number" ? lanes.start_us : null;
  } catch (err) {
    if (isAbort(err)) throw err;
    return null;
  }
}

/**
 * @param {"curve"|"events"|"stats"} what
 * @param {Selection} sel
 * @param {string} device
 * @param {Range|null} range
 * @param {Record<string, number>} [extra]
 * @param {AbortSignal} [signal]
 */
function fetchPart(what, { run, worker, span }, device, range, extra, signal) {
  return getJSON(`/api/memory/${what}`, {
    run, worker, span, device, ...(range ? { start_us: range.start_us, end_us: range.end_us } : {}), ...extra,
  }, signal);
}

// ---------------------------------------------------------------- shape

/**
 * The device to show: the URL's when the trace has it, else the API's default.
 * @param {Devices} devices
 * @param {string|undefined} wanted
 * @returns {{device: string|null, warning: string|null}}
 */
export function pickDevice(devices, wanted) {
  const names = devices.devices.map((d) => d.device);
  const fallback = devices.default && names.includes(devices.default) ? devices.default : names[0] || null;
  if (!wanted || names.includes(wanted)) return { device: wanted || fallback, warning: null };
  return {
    device: fallback,
    warning: `This trace has no memory records for device ${wanted}; showing ${fallback || "nothing"} instead.`,
  };
}

// ---------------------------------------------------------------- draw

/**
 * A searchable, sortable, paginated table whose state lives in the URL under `prefix_q`,
 * `prefix_sort`, `prefix_page`.
 */
class SearchTable {
  /**
   * @param {object} o
   * @param {HTMLElement} o.node
   * @param {HTMLElement} o.count
   * @param {HTMLInputElement} o.search
   * @param {string} o.prefix
   * @param {import("./lib/table.js").Column[]} o.columns
   * @param {import("./lib/table.js").Sort|null} o.defaultSort
   * @param {Record<string, string|undefined>} o.params
   * @param {(row: any) => string} o.textOf
   * @param {string} o.caption
   * @param {string} o.testid
   * @param {AbortSignal} [o.signal]
   */
  constructor({ node, count, search, prefix, columns, defaultSort, params, textOf, caption, testid, signal }) {
    Object.assign(this, { node, count, search, prefix, columns, textOf, caption, testid });
    this.query = params[`${prefix}_q`] || "";
    this.sort = parseSort(params[`${prefix}_sort`], columns) || defaultSort;
    this.page = Number(params[`${prefix}_page`]) || 1;
    /** @type {any[]} */ this.rows = [];
    /** @type {(shown: number) => string} */ this.countText = () => "";
    /** @type {string} */ this.noRows = "";
    search.value = this.query;
    let timer = 0;
    search.addEventListener("input", () => {
      window.clearTimeout(timer);
      timer = window.setTimeout(() => {
        this.query = search.value;
        this.page = 1;
        updateQuery({ [`${prefix}_q`]: this.query || null, [`${prefix}_page`]: null });
        this.draw();
      }, SEARCH_DELAY_MS);
    }, { signal });
    if (signal) signal.addEventListener("abort", () => window.clearTimeout(timer));
  }

  /**
   * New rows (a new range or device); the search and sort stay, the page goes back to the first
   * unless `keepPage`.
   * @param {any[]} rows
   * @param {{countText: (shown: number) => string, noRows: string, keepPage?: boolean}} o
   */
  setRows(rows, { countText, noRows, keepPage = false }) {
    this.rows = rows;
    this.countText = countText;
    this.noRows = noRows;
    if (!keepPage && this.page !== 1) {
      this.page = 1;
      updateQuery({ [`${this.prefix}_page`]: null });
    }
    this.draw();
  }

  /** Shows a reason (e.g. a legacy trace) instead of the table. @param {string} text */
  showReason(text) {
    this.rows = [];
    this.count.textContent = "";
    this.search.disabled = true;
    this.search.closest("label")?.setAttribute("hidden", "");
    this.node.replaceChildren(el("p", { class: "note note-info mem-reason", testid: `${this.prefix}-reason`, text }));
  }

  draw() {
    this.search.disabled = false;
    this.search.closest("label")?.removeAttribute("hidden");
    const shown = filterRows(this.rows, this.query, this.textOf);
    this.count.textContent = this.countText(shown.length);
    if (!shown.length) {
      const text = this.rows.length ? `No operator name contains “${this.query.trim()}”.` : this.noRows;
      this.node.replaceChildren(el("p", { class: "empty", testid: "table-empty", text }));
      return;
    }
    const { prefix } = this;
    this.node.replaceChildren(buildTable({
      caption: this.caption,
      columns: this.columns,
      rows: shown,
      sort: this.sort,
      pageSize: PAGE_SIZE,
      page: this.page,
      testid: this.testid,
      onSort: (sort) => {
        this.sort = sort;
        updateQuery({ [`${prefix}_sort`]: sortToText(sort) });
      },
      onPage: (page) => {
        this.page = page;
        updateQuery({ [`${prefix}_page`]: page === 1 ? null : String(page) });
      },
    }));
  }
}

/**
 * The facts over the chart: peaks, capacity and how allocated memory changed over the range.
 * @param {HTMLElement} node
 * @param {Curve} curve
 * @param {Range} span
 * @param {number} origin
 * @param {boolean} ranged
 */
function drawFacts(node, curve, span, origin, ranged) {
  /** @type {{label: string, value: string, testid: string, sub?: string, key?: string}[]} */
  const facts = [];
  const where = ranged ? " in range" : "";
  if (curve.peak_allocated) {
    facts.push({ label: `Peak allocated${where}`, value: formatBytes(curve.peak_allocated.bytes), testid: "peak-allocated",
      sub: `at ${formatOffset(curve.peak_allocated.t_us - origin)}`, key: "allocated" });
  }
  if (curve.peak_reserved && curve.peak_reserved.bytes > 0) {
    facts.push({ label: `Peak reserved${where}`, value: formatBytes(curve.peak_reserved.bytes), testid: "peak-reserved",
      sub: `at ${formatOffset(curve.peak_reserved.t_us - origin)}`, key: "reserved" });
  }
  const change = allocatedChange(curve, span);
  if (change) {
    const sign = change.change > 0 ? "+" : change.change < 0 ? "−" : "±";
    facts.push({ label: "Allocated, start → end", value: `${formatBytes(change.from)} → ${formatBytes(change.to)}`,
      testid: "allocated-change", sub: `${sign}${formatBytes(Math.abs(change.change))}` });
  }
  if (typeof curve.capacity_bytes === "number") {
    facts.push({ label: "Device capacity", value: formatBytes(curve.capacity_bytes), testid: "capacity", key: "capacity" });
  }
  // The swatches double as the chart's legend.
  node.replaceChildren(...facts.map(({ label, value, testid, sub, key }) => el("div", { class: "mem-fact" }, [
    el("dt", {}, [key ? el("span", { class: `mem-key mem-key-${key}`, attrs: { "aria-hidden": "true" } }) : null, label]),
    el("dd", {}, [el("span", { class: "mem-fact-value", text: value, testid }),
      sub ? el("span", { class: "mem-fact-sub", text: ` ${sub}` }) : null]),
  ])));
  node.hidden = !facts.length;
}

/**
 * @param {HTMLElement} node
 * @param {Curve} curve
 * @param {{span: Range, origin: number, steps: StepRange[], toCapacity: boolean}} o
 */
async function drawCurve(node, curve, { span, origin, steps, toCapacity }) {
  const top = yTop(curve, span, toCapacity);
  const ticks = byteTicks(top);
  const marks = stepMarks(steps, span, origin);
  const capacity = capacityMarks(curve.capacity_bytes, top);
  await draw(node, curveTraces(curve, span, origin), layout({
    margin: { l: 64, r: 20, t: 22, b: 44 },
    showlegend: false,
    dragmode: "zoom",
    hovermode: "x unified",
    xaxis: {
      title: { text: "Time since trace start (ms)", standoff: 8 },
      range: [toMs(span.start_us, origin), toMs(span.end_us, origin)],
      zeroline: false, showspikes: true, spikemode: "across", spikethickness: 1, spikecolor: "#9aa0a6", spikedash: "dot",
      unifiedhovertitle: { text: "%{x:.3f} ms" }, hoverformat: ".3f",
    },
    yaxis: { fixedrange: true, range: [0, top], tickvals: ticks.tickvals, ticktext: ticks.ticktext, rangemode: "tozero" },
    shapes: [...marks.shapes, ...capacity.shapes],
    // The peaks are marked by their markers and named above the chart: a label beside a peak sat under the
    // hover box whenever the pointer came near it.
    annotations: [...marks.annotations, ...capacity.annotations],
  }), { showTips: false }); // the hint under the chart says how to zoom back out
}

/**
 * Fetches and draws the memory view of one worker's span.
 * @param {HTMLElement} root the `[data-view="memory"]` section
 * @param {Selection & Record<string, string|undefined>} params
 * @param {{signal?: AbortSignal}} [context]
 */
export async function mount(root, params, { signal } = {}) {
  const sel = { run: params.run, worker: params.worker, span: params.span };
  const ui = {
    warnings: byTestId(root, "warnings"),
    noMemory: byTestId(root, "no-memory"),
    controls: byTestId(root, "controls"),
    device: /** @type {HTMLSelectElement} */ (byTestId(root, "device-select")),
    step: /** @type {HTMLSelectElement} */ (byTestId(root, "step-select")),
    reset: /** @type {HTMLButtonElement} */ (byTestId(root, "reset-range")),
    rangeText: byTestId(root, "range-text"),
    capacity: /** @type {HTMLInputElement} */ (byTestId(root, "capacity-toggle")),
    curveCard: byTestId(root, "curve-card"),
    curveMeta: byTestId(root, "curve-meta"),
    facts: byTestId(root, "curve-summary"),
    chart: byTestId(root, "memory-curve"),
    hint: byTestId(root, "curve-hint"),
    eventsCard: byTestId(root, "events-card"),
    statsCard: byTestId(root, "stats-card"),
  };
  // A previous mount's chart carries its listeners: start from a bare node.
  purgeAll(ui.chart);
  ui.chart.replaceChildren();

  const [devices, traceStart] = await Promise.all([fetchDevices(sel, signal), fetchOrigin(sel, signal)]);
  if (signal && signal.aborted) return;

  const parts = [ui.controls, ui.curveCard, ui.eventsCard, ui.statsCard];
  if (!devices.devices.length) {
    for (const part of parts) part.hidden = true;
    showWarnings(ui.warnings, []);
    ui.noMemory.textContent = "This trace has no memory records, so there is nothing to show here. "
      + "Profile with profile_memory=True (torch.profiler.profile(..., profile_memory=True)) to record them.";
    ui.noMemory.hidden = false;
    return;
  }
  ui.noMemory.hidden = true;
  for (const part of parts) part.hidden = false;

  const picked = pickDevice(devices, params.device);
  const device = /** @type {string} */ (picked.device);
  if (picked.warning) updateQuery({ device: null });
  const steps = devices.steps || [];
  const extent = memoryExtent(devices);
  const origin = traceStart ?? (extent ? extent.start_us : 0);
  const info = devices.devices.find((d) => d.device === device);

  ui.device.replaceChildren(...devices.devices.map((d) => el("option", {
    text: `${d.label} (${formatCount(d.records)} records)`, attrs: { value: d.device } })));
  ui.device.value = device;
  ui.step.replaceChildren(
    el("option", { text: "Whole trace", attrs: { value: "" } }),
    el("option", { text: "Selected range", testid: "custom-range", attrs: { value: "custom", disabled: "" } }),
    ...steps.map((s) => el("option", {
      text: `Step ${s.step} (${formatUs(s.end_us - s.start_us)})`,
      title: `${formatOffset(s.start_us - origin)} – ${formatOffset(s.end_us - origin)}`, attrs: { value: s.step } })),
  );
  ui.step.disabled = !steps.length;
  ui.capacity.checked = params.capacity === "1";

  let range = parseRange(params.start_us, params.end_us, extent);
  if ((params.start_us || params.end_us) && !range) updateQuery(rangeQuery(null));

  const events = new SearchTable({
    node: byTestId(root, "events-table"), count: byTestId(root, "events-count"),
    search: /** @type {HTMLInputElement} */ (byTestId(root, "events-search")), prefix: "events",
    columns: eventColumns(sel, origin), defaultSort: null, params, textOf: (row) => row.operator || "",
    caption: "Memory events", testid: "events-data", signal,
  });
  const stats = new SearchTable({
    node: byTestId(root, "stats-table"), count: byTestId(root, "stats-count"),
    search: /** @type {HTMLInputElement} */ (byTestId(root, "stats-search")), prefix: "stats",
    columns: statColumns(sel), defaultSort: STATS_SORT, params, textOf: (row) => row.name,
    caption: "Memory statistics per operator", testid: "stats-data", signal,
  });

  /** @type {Curve|null} */ let curve = null;
  /** @type {string[]} */ let warnings = [];
  /** @type {AbortController|null} */ let loading = null;
  let first = true;

  const span = () => range || extent || { start_us: origin, end_us: origin + 1 };

  const showRange = () => {
    ui.rangeText.textContent = rangeLabel(range, extent, origin);
    ui.reset.disabled = !range;
    const step = stepOfRange(range, steps);
    ui.step.value = step ? step.step : range ? "custom" : "";
    root.dataset.range = range ? `${rangeQuery(range).start_us}-${rangeQuery(range).end_us}` : "";
  };

  const redrawCurve = async () => {
    if (!curve) return;
    if (curve.reason) {
      purgeAll(ui.chart);
      ui.chart.classList.add("chart-memory-note");
      ui.chart.replaceChildren(el("p", { class: "note note-info mem-reason", testid: "curve-reason",
        text: `No memory curve for ${info ? info.label : device}: ${curve.reason}.` }));
      ui.facts.hidden = true;
      ui.hint.hidden = true;
      ui.capacity.disabled = true;
      ui.capacity.closest("label")?.setAttribute("hidden", "");
      ui.curveMeta.textContent = "";
      return;
    }
    ui.hint.hidden = false;
    ui.capacity.disabled = typeof curve.capacity_bytes !== "number";
    ui.capacity.closest("label")?.toggleAttribute("hidden", ui.capacity.disabled);
    ui.curveMeta.textContent = `${formatCount(curve.records)} record${curve.records === 1 ? "" : "s"}`
      + (curve.points < curve.records ? `, ${formatCount(curve.points)} points drawn (every peak kept)` : "");
    drawFacts(ui.facts, curve, span(), origin, Boolean(range));
    if (!curve.t_us.length && !curve.at_start) {
      purgeAll(ui.chart);
      ui.chart.classList.add("chart-memory-note");
      ui.chart.replaceChildren(el("p", { class: "empty", testid: "curve-empty",
        text: `No memory records for ${info ? info.label : device} in this range.` }));
      return;
    }
    const fresh = !ui.chart.classList.contains("js-plotly-plot");
    ui.chart.classList.remove("chart-memory-note");
    await drawCurve(ui.chart, curve, { span: span(), origin, steps, toCapacity: ui.capacity.checked });
    if (fresh) {
      /** @type {any} */ (ui.chart).on("plotly_relayout", (/** @type {Record<string, any>} */ event) => {
        if (signal && signal.aborted) return;
        const next = rangeFromRelayout(event, origin);
        if (next === null) return;
        setRange(next === "reset" ? null : clampRange(next, extent));
      });
    }
  };

  /** @param {Range|null} next */
  const load = async (next) => {
    if (loading) loading.abort();
    const controller = new AbortController();
    loading = controller;
    const abort = () => controller.abort();
    if (signal) signal.addEventListener("abort", abort, { once: true });
    root.dataset.loading = "true";
    try {
      const width = Math.max(100, Math.min(MAX_CURVE_PX, Math.round(ui.chart.clientWidth - 84)));
      const [c, e, s] = await Promise.all([
        fetchPart("curve", sel, device, next, { width_px: width }, controller.signal),
        fetchPart("events", sel, device, next, {}, controller.signal),
        fetchPart("stats", sel, device, next, {}, controller.signal),
      ]);
      if (controller.signal.aborted) return;
      curve = /** @type {Curve} */ (c);
      const ev = /** @type {Events} */ (e);
      const st = /** @type {Stats} */ (s);
      warnings = [...(picked.warning ? [picked.warning] : []), ...(devices.warnings || []),
        ...(curve.warnings || []), ...(ev.warnings || []), ...(st.warnings || [])];
      showWarnings(ui.warnings, warnings);
      await redrawCurve();
      if (ev.reason) {
        events.showReason(`No events table for ${info ? info.label : device}: ${ev.reason}.`);
      } else {
        events.setRows(ev.rows, {
          keepPage: first,
          countText: (shown) => eventsCountText(shown, ev.rows.length, ev.total, events.query),
          noRows: next ? "No allocation or release in this range." : "No allocations were recorded on this device.",
        });
      }
      stats.setRows(st.rows, {
        keepPage: first,
        countText: (shown) => (stats.query.trim()
          ? `${formatCount(shown)} of ${formatCount(st.rows.length)} operators match “${stats.query.trim()}”`
          : `${formatCount(st.rows.length)} operator${st.rows.length === 1 ? "" : "s"}`),
        noRows: next ? "No operator touched memory on this device in this range." : "No operator touched memory on this device.",
      });
      first = false;
    } catch (err) {
      if (isAbort(err) || controller.signal.aborted) return;
      if (first) throw err;
      showWarnings(ui.warnings, [...warnings, `Could not load this range: ${err instanceof Error ? err.message : String(err)}`]);
    } finally {
      if (signal) signal.removeEventListener("abort", abort);
      if (loading === controller) {
        loading = null;
        delete root.dataset.loading;
      }
    }
  };

  /** @param {Range|null} next */
  function setRange(next) {
    const same = (next === null && range === null)
      || (next && range && next.start_us === range.start_us && next.end_us === range.end_us);
    range = next;
    showRange();
    if (same && !first) {
      redrawCurve();
      return;
    }
    updateQuery(rangeQuery(range));
    load(range);
  }

  const listen = { signal };
  ui.device.addEventListener("change", () => {
    // A new device is a new page state: the shell mounts the view again (the range stays).
    navigate({ device: ui.device.value, events_page: null, stats_page: null });
  }, listen);
  ui.step.addEventListener("change", () => {
    const step = steps.find((s) => s.step === ui.step.value);
    if (ui.step.value === "") setRange(null);
    else if (step) setRange(clampRange({ start_us: step.start_us, end_us: step.end_us }, extent));
  }, listen);
  ui.reset.addEventListener("click", () => setRange(null), listen);
  ui.capacity.addEventListener("change", () => {
    updateQuery({ capacity: ui.capacity.checked ? "1" : null });
    redrawCurve();
  }, listen);

  showRange();
  await load(range);
}
