/**
 * The Memory Snapshot view: a CUDA caching-allocator snapshot (`torch.cuda.memory._dump_snapshot`)
 * of the run: summary cards, the active memory timeline (live allocations over the recorded
 * history, stacked), the allocator's segments and blocks at a chosen point of the history and
 * the top allocation sites. Reads `/api/snapshot`, `.../timeline`, `.../state`, `.../sites`.
 *
 * Three layers: fetch (`fetch*`), shape (pure functions in `lib/memsnap.js`) and draw (`mount`
 * and the `draw*` helpers). View state lives in the URL: `file`, `device`, `at` (the history
 * point of the allocator state; absent: the final state), `seg_sort`, `sites_by`, `sites_sort`.
 * A click on the timeline picks `at` without reloading the rest.
 * @module snapshot
 */

import { ApiError, getJSON, isAbort } from "./lib/api.js";
import { byTestId, clear, el, showWarnings } from "./lib/dom.js";
import { formatBytes, formatCount, formatRatio } from "./lib/format.js";
import {
  BLOCK_STATES, blockPieces, bytesAxis, deviceTotals, hexAddress, indexAt, parseAt, parseDevice, pieceTitle,
  siteLabel, stateCaption, stateCards, summaryCards, timelineAnnotations, timelineShapes, timelineTraces,
} from "./lib/memsnap.js";
import { draw, layout, showEmpty } from "./lib/plot.js";
import { frameItem } from "./lib/stacks.js";
import { buildTable, parseSort, sortToText } from "./lib/table.js";
import { navigate, updateQuery } from "./lib/url.js";

/**
 * @typedef {import("./lib/memsnap.js").Timeline} Timeline
 * @typedef {import("./lib/memsnap.js").State} State
 * @typedef {import("./lib/memsnap.js").Segment} Segment
 * @typedef {import("./lib/memsnap.js").Site} Site
 * @typedef {import("./lib/memsnap.js").Oom} Oom
 * @typedef {import("./lib/memsnap.js").Card} Card
 * @typedef {{run?: string, file?: string, device?: string, at?: string, seg_sort?: string, sites_by?: string,
 *            sites_sort?: string}} Params
 */

/** Bands drawn one by one on the timeline; smaller allocations are summed. */
const MAX_BANDS = 150;
/** Points along the history (the server keeps every peak). */
const MAX_POINTS = 1500;
/** Segments per page of the segment table (it scrolls inside its box). */
const SEGMENT_PAGE = 100;
/** Allocation sites listed. */
const SITES_N = 50;
const SITES_BY = ["total_bytes", "peak_bytes", "live_bytes", "calls"];

// ---------------------------------------------------------------- fetch

/** @param {Params} p @param {AbortSignal} [signal] */
export function fetchSummary(p, signal) {
  return getJSON("/api/snapshot", { run: p.run, file: p.file }, signal);
}

/** @param {Params} p @param {number} device @param {AbortSignal} [signal] @returns {Promise<Timeline>} */
export function fetchTimeline(p, device, signal) {
  return getJSON("/api/snapshot/timeline", { run: p.run, file: p.file, device,
    max_allocations: MAX_BANDS, max_points: MAX_POINTS }, signal);
}

/** @param {Params} p @param {number} device @param {number|null} at @param {AbortSignal} [signal] @returns {Promise<State>} */
export function fetchState(p, device, at, signal) {
  return getJSON("/api/snapshot/state", { run: p.run, file: p.file, device, at }, signal);
}

/** @param {Params} p @param {number} device @param {string} by @param {AbortSignal} [signal] */
export function fetchSites(p, device, by, signal) {
  return getJSON("/api/snapshot/sites", { run: p.run, file: p.file, device, n: SITES_N, by }, signal);
}

// ---------------------------------------------------------------- draw helpers

/**
 * @param {HTMLElement} node
 * @param {Card[]} cards
 */
function drawCards(node, cards) {
  node.replaceChildren(...cards.map((c) => el("div", {
    class: `snap-stat${c.alert ? " snap-stat-alert" : ""}`, testid: `card-${c.key}`, title: c.title || "",
  }, [
    el("div", { class: "snap-stat-label", text: c.label }),
    el("div", { class: "snap-stat-value", testid: "card-value", text: c.value }),
    c.sub ? el("div", { class: "snap-stat-sub", text: c.sub }) : null,
  ])));
}

/** An error shown inside a section, so that the other sections keep working. @param {HTMLElement} node @param {string} title @param {unknown} err */
function sectionError(node, title, err) {
  node.replaceChildren(el("div", { class: "error-box", testid: "section-error" }, [
    el("div", { class: "error-title", text: title }),
    el("div", { class: "error-message", text: err instanceof Error ? err.message : String(err) }),
  ]));
}

/**
 * Fills a select with options; disabled when there is nothing to choose.
 * @param {HTMLSelectElement} select
 * @param {{value: string, label: string}[]} options
 * @param {string} value
 */
function fillSelect(select, options, value) {
  select.replaceChildren(...options.map((o) => el("option", { text: o.label, attrs: { value: o.value } })));
  select.value = value;
  select.disabled = options.length < 2;
  const control = select.closest(".control");
  if (control instanceof HTMLElement) control.hidden = options.length === 0;
}

/**
 * The OOM box: each event with a button that shows the allocator state there.
 * @param {HTMLElement} node
 * @param {Oom[]} ooms
 * @param {(index: number) => void} pick
 */
function drawOoms(node, ooms, pick) {
  if (!ooms.length) {
    node.hidden = true;
    clear(node);
    return;
  }
  node.replaceChildren(
    el("div", { class: "error-title", text: `${ooms.length} out-of-memory event${ooms.length === 1 ? "" : "s"} recorded` }),
    el("ul", { class: "snap-oom-list" }, ooms.map((o) => {
      const button = el("button", { class: "snap-button", text: "Show the allocator state there", testid: "oom-show",
        attrs: { type: "button" } });
      button.addEventListener("click", () => pick(o.index));
      return el("li", { testid: "oom-event" }, [
        `Entry ${formatCount(o.index)}: asked for ${formatBytes(o.size_bytes)}`,
        o.device_free_bytes !== null && o.device_free_bytes !== undefined
          ? ` with ${formatBytes(o.device_free_bytes)} free on the device. ` : ". ",
        button,
      ]);
    })),
  );
  node.hidden = false;
}

/** The legend of block states above the segment table. @param {HTMLElement} node */
function drawLegend(node) {
  node.replaceChildren(...BLOCK_STATES.map((s) => {
    const swatch = el("span", { class: `swatch snap-b-${s.state}` });
    return el("span", { class: "legend-item" }, [swatch, s.label]);
  }));
}

/**
 * One segment's strip of blocks.
 * @param {Segment} segment
 * @param {Site[]} sites
 * @returns {HTMLElement}
 */
function segmentStrip(segment, sites) {
  const strip = el("div", { class: "snap-strip", testid: "segment-strip",
    attrs: { role: "img", "aria-label": `${formatBytes(segment.allocated_bytes)} allocated of ${formatBytes(segment.total_bytes)}` } });
  for (const piece of blockPieces(segment)) {
    const node = el("div", { class: `snap-block snap-b-${piece.state}`, title: pieceTitle(piece, sites) });
    node.style.left = `${(piece.left * 100).toFixed(3)}%`;
    node.style.width = `${(piece.width * 100).toFixed(3)}%`;
    strip.append(node);
  }
  if (!Array.isArray(segment.blocks)) strip.classList.add("snap-strip-summary");
  return strip;
}

/**
 * The segment table: one row per segment with its blocks as a strip.
 * @param {HTMLElement} node
 * @param {State} state
 * @param {Params} params
 */
function drawSegments(node, state, params) {
  const sites = state.sites || [];
  /** @type {import("./lib/table.js").Column[]} */
  const columns = [
    { key: "address", label: "Address", cellClass: "cell-mono", format: (v) => hexAddress(v) },
    { key: "segment_type", label: "Pool", format: (v, row) => `${v || "n/a"}${row.stream ? ` · s${row.stream}` : ""}`,
      title: "The allocator's pool (large or small blocks), and the CUDA stream when not the default one" },
    { key: "total_bytes", label: "Size", numeric: true, format: (v) => formatBytes(v) },
    { key: "blocks", label: "Blocks by offset", sortable: false, cellClass: "cell-strip",
      render: (row) => segmentStrip(row, sites) },
    { key: "allocated_bytes", label: "Allocated", numeric: true, format: (v) => formatBytes(v) },
    { key: "pending_free_bytes", label: "Awaiting free", numeric: true, format: (v) => formatBytes(v) },
    { key: "inactive_bytes", label: "Inactive", numeric: true, format: (v) => formatBytes(v) },
    { key: "fragmentation_ratio", label: "Frag.", numeric: true, format: (v) => formatRatio(v, 1),
      title: "Fragmentation: inactive bytes / segment size" },
  ];
  const segments = state.segments || [];
  if (!segments.length) {
    node.replaceChildren(el("p", { class: "empty", testid: "table-empty", text: "The allocator held no segments at this point." }));
    return;
  }
  const sort = parseSort(params.seg_sort, columns) || { key: "total_bytes", desc: true };
  node.replaceChildren(buildTable({
    columns, rows: segments, sort, caption: "Segments", testid: "segments",
    pageSize: segments.length > SEGMENT_PAGE ? SEGMENT_PAGE : undefined,
    onSort: (s) => updateQuery({ seg_sort: sortToText(s) }),
  }));
}

/**
 * The top allocation sites, a row expanding to its frames.
 * @param {HTMLElement} node
 * @param {{rows: any[], allocations: number, total_bytes: number}} data
 * @param {Params} params
 */
function drawSites(node, data, params) {
  const rows = data.rows || [];
  if (!rows.length) {
    node.replaceChildren(el("p", { class: "empty", testid: "table-empty",
      text: "No allocations were recorded (the snapshot has no history)." }));
    return;
  }
  /** @param {any} row */
  const siteCell = (row) => el("button", {
    class: "snap-site-toggle", testid: "site-toggle", title: row.site,
    attrs: { type: "button", "aria-expanded": "false" },
  }, [el("span", { class: "snap-caret", text: "▸", attrs: { "aria-hidden": "true" } }), el("span", { class: "truncate", text: siteLabel(row) })]);
  /** @type {import("./lib/table.js").Column[]} */
  const columns = [
    { key: "site", label: "Site", cellClass: "cell-name snap-site-cell", render: siteCell,
      title: "The first frame in user code, else the operator; click a row for its stack" },
    { key: "op", label: "Operator", truncate: true, cellClass: "cell-name cell-mono snap-op-cell", format: (v) => (v ? String(v) : "n/a") },
    { key: "calls", label: "Calls", numeric: true, format: (v) => formatCount(v) },
    { key: "total_bytes", label: "Total", numeric: true, format: (v) => formatBytes(v), title: "Bytes over all its allocations" },
    { key: "peak_bytes", label: "At peak", numeric: true, format: (v) => formatBytes(v), title: "Its live bytes at the timeline's peak" },
    { key: "live_bytes", label: "Live", numeric: true, format: (v) => formatBytes(v), title: "Still allocated at the snapshot" },
    { key: "max_bytes", label: "Largest", numeric: true, format: (v) => formatBytes(v), title: "Its largest single allocation" },
  ];
  const table = buildTable({
    columns, rows, sort: parseSort(params.sites_sort, columns), caption: "Top allocation sites", testid: "sites",
    onSort: (s) => updateQuery({ sites_sort: sortToText(s) }),
  });
  const body = table.querySelector("tbody");
  if (body) {
    body.addEventListener("click", (event) => {
      const target = /** @type {HTMLElement} */ (event.target);
      if (target.closest("a, .copy-button, .snap-site-detail")) return;
      const tr = target.closest("tr");
      const toggle = tr ? tr.querySelector('[data-testid="site-toggle"]') : null;
      if (!tr || !toggle) return;
      const index = [...body.children].filter((r) => !r.classList.contains("snap-site-detail")).indexOf(tr);
      toggleSite(tr, /** @type {HTMLElement} */ (toggle), siteRowOf(tr, rows, table), columns.length, index);
    });
  }
  node.replaceChildren(table);
}

/**
 * The site a body row shows (rows are re-sorted by the table, so match by the site text).
 * @param {HTMLElement} tr @param {any[]} rows @param {HTMLElement} _table
 */
function siteRowOf(tr, rows, _table) {
  const toggle = tr.querySelector('[data-testid="site-toggle"]');
  const text = toggle ? toggle.getAttribute("title") : null;
  const op = tr.children[1] ? tr.children[1].textContent : null;
  return rows.find((r) => r.site === text && (r.op || "n/a") === op) || rows.find((r) => r.site === text);
}

/**
 * Opens or closes the frames row under a site row.
 * @param {HTMLElement} tr @param {HTMLElement} toggle @param {any} row @param {number} span @param {number} _index
 */
function toggleSite(tr, toggle, row, span, _index) {
  const next = tr.nextElementSibling;
  if (next && next.classList.contains("snap-site-detail")) {
    next.remove();
    toggle.setAttribute("aria-expanded", "false");
    return;
  }
  const frames = (row && row.frames) || [];
  const content = frames.length
    ? el("ol", { class: "frames", testid: "site-frames" }, frames.map(frameItem))
    : el("p", { class: "empty", testid: "site-frames",
      text: `No Python frames were recorded for these allocations${row && row.op ? ` (made inside ${row.op})` : ""}.` });
  const cell = el("td", { attrs: { colspan: String(span) } }, [
    el("div", { class: "snap-site-frames" }, [
      el("div", { class: "stack-sub", text: frames.length ? `${frames.length} frames, innermost first` : "" }),
      content,
    ]),
  ]);
  tr.after(el("tr", { class: "snap-site-detail", testid: "site-detail" }, [cell]));
  toggle.setAttribute("aria-expanded", "true");
}

/**
 * Shows a snapshot that cannot be read: the server's message in the view, the file picker kept.
 * @param {HTMLElement} root @param {unknown} err @param {Params} params @param {AbortSignal|undefined} signal
 */
async function showSnapshotError(root, err, params, signal) {
  const box = byTestId(root, "snap-error");
  const code = err instanceof ApiError ? err.code : "client";
  box.replaceChildren(
    el("div", { class: "error-title", text: code === "snapshot_error" ? "This snapshot could not be read" : "No snapshot to show" }),
    el("div", { class: "error-message", testid: "snap-error-message", text: err instanceof Error ? err.message : String(err) }),
  );
  box.hidden = false;
  byTestId(root, "snap-body").hidden = true;
  byTestId(root, "snap-file-meta").textContent = "";
  // The picker still lists the run's snapshots, so that another one can be opened.
  /** @type {string[]} */ let files = [];
  try {
    const runs = await getJSON("/api/runs", {}, signal);
    const run = (runs.runs || []).find((/** @type {any} */ r) => r.name === params.run);
    files = run && Array.isArray(run.snapshots) ? run.snapshots : [];
  } catch (e) {
    if (isAbort(e)) return;
  }
  const current = params.file || files[0] || "";
  const options = files.map((f) => ({ value: f, label: f }));
  if (current && !files.includes(current)) options.unshift({ value: current, label: `${current} (not found)` });
  const fileSelect = /** @type {HTMLSelectElement} */ (byTestId(root, "snap-file"));
  fillSelect(fileSelect, options, current);
  fileSelect.disabled = files.length < 1 || (files.length === 1 && files[0] === current);
  fileSelect.onchange = () => navigate({ file: fileSelect.value, device: null, at: null });
  fillSelect(/** @type {HTMLSelectElement} */ (byTestId(root, "snap-device")), [], "");
}

// ---------------------------------------------------------------- timeline

/**
 * Draws the timeline and wires clicks to `onPick`. Returns a function that moves the `at` marker.
 * @param {HTMLElement} node
 * @param {Timeline} timeline
 * @param {number|null} t0
 * @param {number|null} at
 * @param {Oom[]} ooms
 * @param {(index: number) => void} onPick
 * @param {AbortSignal|undefined} signal fires when the view is mounted again (drops the listeners)
 * @returns {Promise<(at: number|null) => void>}
 */
async function drawTimeline(node, timeline, t0, at, ooms, onPick, signal) {
  const top = Math.max(...timeline.total_bytes, timeline.peak ? timeline.peak.bytes : 0, 1);
  const axis = bytesAxis(top);
  const traces = timelineTraces(timeline, axis, t0);
  const chartLayout = layout({
    hovermode: "closest",
    hoverdistance: 12,
    dragmode: "zoom",
    showlegend: false,
    margin: { l: 64, r: 24, t: 24, b: 48 },
    xaxis: { title: { text: "Allocator history (entry)" }, zeroline: false, range: [-1, Math.max(0, timeline.entries - 1)] },
    yaxis: { title: { text: `Live memory (${axis.unit})` }, rangemode: "tozero", fixedrange: true },
    shapes: timelineShapes(at, ooms),
    annotations: timelineAnnotations(timeline, axis, at, ooms),
  });
  const started = performance.now();
  await draw(node, traces, chartLayout);
  node.dataset.drawMs = String(Math.round(performance.now() - started));
  node.dataset.traces = String(traces.length);
  const gd = /** @type {any} */ (node);
  gd.removeAllListeners && gd.removeAllListeners("plotly_click");
  let plotlyClickAt = -Infinity;
  gd.on("plotly_click", (/** @type {any} */ event) => {
    plotlyClickAt = performance.now();
    const index = indexAt(clickX(gd, event), timeline.entries);
    if (index !== null) onPick(index);
  });
  // Plotly reports clicks only over data (a band, the total line); a click on empty plot area
  // (above the stack) picks its x too. Not after a zoom drag, nor twice for one click.
  /** @type {{x: number, y: number}|null} */ let down = null;
  node.addEventListener("mousedown", (e) => { down = { x: e.clientX, y: e.clientY }; }, { signal });
  node.addEventListener("click", (e) => {
    const target = /** @type {Element} */ (e.target);
    const moved = down ? Math.hypot(e.clientX - down.x, e.clientY - down.y) : 0;
    if (!target.closest(".nsewdrag") || moved > 4 || performance.now() - plotlyClickAt < 300) return;
    const index = indexAt(clickX(gd, { event: e }), timeline.entries);
    if (index !== null) onPick(index);
  }, { signal });
  return (next) => {
    /** @type {any} */ (window).Plotly.relayout(node, {
      shapes: timelineShapes(next, ooms),
      annotations: timelineAnnotations(timeline, axis, next, ooms),
    });
  };
}

/**
 * The x (entry index) under a click: from the mouse position when Plotly gives it (a band's fill
 * has no point), else the clicked point's x.
 * @param {any} gd the chart node
 * @param {any} event Plotly's click event
 * @returns {number}
 */
function clickX(gd, event) {
  const xaxis = gd._fullLayout && gd._fullLayout.xaxis;
  const mouse = event && event.event;
  if (xaxis && mouse && typeof xaxis.p2d === "function") {
    const box = gd.querySelector(".nsewdrag") || gd;
    const rect = box.getBoundingClientRect();
    const x = xaxis.p2d(mouse.clientX - rect.left);
    if (Number.isFinite(x)) return x;
  }
  const point = event && event.points && event.points[0];
  return point && typeof point.x === "number" ? point.x : NaN;
}

// ---------------------------------------------------------------- mount

/**
 * Fetches and draws the snapshot view of a run.
 * @param {HTMLElement} root the `[data-view="snapshot"]` section
 * @param {Params} params
 * @param {{signal?: AbortSignal}} [context]
 */
export async function mount(root, params, { signal } = {}) {
  const errorBox = byTestId(root, "snap-error");
  errorBox.hidden = true;
  clear(errorBox);
  const body = byTestId(root, "snap-body");
  body.hidden = false;

  let summary;
  try {
    summary = await fetchSummary(params, signal);
  } catch (err) {
    if (isAbort(err)) throw err;
    if (err instanceof ApiError && (err.code === "snapshot_error" || (err.code === "not_found" && params.file))) {
      await showSnapshotError(root, err, params, signal);
      return;
    }
    throw err;
  }
  if (signal && signal.aborted) return;

  const p = { ...params, file: summary.file };
  const devices = summary.devices || [];
  const device = parseDevice(params.device, devices);
  const totals = deviceTotals(summary, device);
  const entries = Number(totals.trace_entries ?? summary.trace_entries) || 0;
  const t0 = typeof totals.first_time_us === "number" ? totals.first_time_us : null;
  let at = parseAt(params.at, entries);
  const ooms = ((summary.ooms && summary.ooms.events) || []).filter((/** @type {Oom} */ o) =>
    o.device === undefined || o.device === device);

  // Pickers: a new file or device is a new view state (remount through the shell).
  const fileSelect = /** @type {HTMLSelectElement} */ (byTestId(root, "snap-file"));
  fillSelect(fileSelect, (summary.files || []).map((/** @type {any} */ f) => ({ value: f.name, label: f.name })), summary.file);
  fileSelect.onchange = () => navigate({ file: fileSelect.value, device: null, at: null });
  const deviceSelect = /** @type {HTMLSelectElement} */ (byTestId(root, "snap-device"));
  fillSelect(deviceSelect, devices.map((/** @type {number} */ d) => ({ value: String(d), label: `GPU ${d}` })), String(device));
  deviceSelect.onchange = () => navigate({ device: deviceSelect.value, at: null });
  const info = (summary.files || []).find((/** @type {any} */ f) => f.name === summary.file);
  byTestId(root, "snap-file-meta").textContent = info ? `${formatBytes(info.size_bytes)} pickle` : "";

  showWarnings(byTestId(root, "warnings"), summary.warnings || []);
  drawCards(byTestId(root, "snap-summary"), summaryCards(summary, device));

  // The allocator state: reloaded alone when a click picks another point.
  const stateNode = byTestId(root, "snap-state");
  const stateTitle = byTestId(root, "state-title");
  const stateMeta = byTestId(root, "state-meta");
  const finalButton = /** @type {HTMLButtonElement} */ (byTestId(root, "state-final"));
  const approxNote = byTestId(root, "state-approximate");
  const stateTotals = byTestId(root, "state-totals");
  const segmentNode = byTestId(root, "segment-table");
  drawLegend(byTestId(root, "state-legend"));
  /** @type {AbortController|null} */ let stateController = null;
  /** @type {(at: number|null) => void} */ let moveMarker = () => {};

  /** @param {number|null} point */
  const loadState = async (point) => {
    if (stateController) stateController.abort();
    const local = new AbortController();
    stateController = local;
    const onAbort = () => local.abort();
    if (signal) signal.addEventListener("abort", onAbort, { once: true });
    stateNode.setAttribute("aria-busy", "true");
    try {
      const state = await fetchState(p, device, point, local.signal);
      if (local.signal.aborted) return;
      stateTitle.textContent = point === null ? "Allocator State (final)" : "Allocator State";
      stateMeta.textContent = stateCaption(state, point, t0);
      stateNode.dataset.at = point === null ? "final" : String(point);
      finalButton.hidden = point === null;
      approxNote.hidden = !state.approximate;
      approxNote.textContent = state.approximate
        ? "Approximate: blocks freed before the snapshot have estimated sizes (the history records requested sizes), "
          + "so part of their rounding may show as inactive."
        : "";
      drawCards(stateTotals, stateCards(state.totals));
      drawSegments(segmentNode, state, params);
    } catch (err) {
      if (local.signal.aborted || isAbort(err)) return;
      sectionError(segmentNode, "The allocator state could not be loaded", err);
    } finally {
      if (signal) signal.removeEventListener("abort", onAbort);
      if (stateController === local) stateNode.removeAttribute("aria-busy");
    }
  };

  /** @param {number|null} point */
  const pick = (point) => {
    at = point;
    updateQuery({ at: point === null ? null : String(point) });
    moveMarker(point);
    return loadState(point);
  };
  finalButton.onclick = () => { pick(null); };
  drawOoms(byTestId(root, "snap-ooms"), ooms, (index) => { pick(index); });

  const timelineNode = byTestId(root, "snap-timeline");
  const timelineMeta = byTestId(root, "timeline-meta");
  const hint = byTestId(root, "timeline-hint");
  const drawTimelinePart = async () => {
    if (!entries) {
      timelineMeta.textContent = "";
      hint.textContent = "";
      showEmpty(timelineNode, "No allocation history in this snapshot: it was taken without "
        + "torch.cuda.memory._record_memory_history(), so only the final state below is known.");
      return;
    }
    try {
      const timeline = await fetchTimeline(p, device, signal);
      if (signal && signal.aborted) return;
      const shown = timeline.bands.length;
      timelineMeta.textContent = `${formatCount(timeline.allocations)} allocations over ${formatCount(timeline.entries)} entries; `
        + `the ${formatCount(shown)} largest drawn one by one, ${formatCount(timeline.other_allocations)} smaller ones summed (grey)`;
      hint.textContent = "Hover a band for its size and stack; click anywhere on the chart to see the allocator state at that point; drag to zoom, double-click to zoom out.";
      moveMarker = await drawTimeline(timelineNode, timeline, t0, at, ooms, (index) => { pick(index); }, signal);
    } catch (err) {
      if (isAbort(err) || (signal && signal.aborted)) return;
      sectionError(timelineNode, "The timeline could not be loaded", err);
    }
  };

  const sitesBy = SITES_BY.includes(params.sites_by || "") ? /** @type {string} */ (params.sites_by) : "total_bytes";
  const sitesSelect = /** @type {HTMLSelectElement} */ (byTestId(root, "sites-by"));
  sitesSelect.value = sitesBy;
  const sitesNode = byTestId(root, "sites-table");
  const sitesMeta = byTestId(root, "sites-meta");
  /** @param {string} by */
  const drawSitesPart = async (by) => {
    try {
      const data = await fetchSites(p, device, by, signal);
      if (signal && signal.aborted) return;
      sitesMeta.textContent = `top ${formatCount(data.rows.length)} of ${formatCount(data.allocations)} allocations' sites`;
      drawSites(sitesNode, data, params);
    } catch (err) {
      if (isAbort(err) || (signal && signal.aborted)) return;
      sectionError(sitesNode, "The allocation sites could not be loaded", err);
    }
  };
  sitesSelect.onchange = () => {
    updateQuery({ sites_by: sitesSelect.value === "total_bytes" ? null : sitesSelect.value, sites_sort: null });
    params = { ...params, sites_sort: undefined };
    drawSitesPart(sitesSelect.value);
  };

  await Promise.all([drawTimelinePart(), loadState(at), drawSitesPart(sitesBy)]);
}
