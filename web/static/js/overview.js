/**
 * The Overview view: GPU summary (with the GPU's idle time by cause), execution summary (average
 * step breakdown), step-time chart, per-step table, recommendations and warnings. Reads `/api/overview`.
 *
 * Three layers: fetch (`fetchOverview`), shape (pure functions from JSON to Plotly traces and
 * table rows, exported for reuse and tests) and draw (`mount` and the `draw*` helpers).
 * @module overview
 */

import { getJSON } from "./lib/api.js";
import { byTestId, clear, el, inlineCode, showWarnings } from "./lib/dom.js";
import { evidenceList, savingLine, severityBadge, sortBySaving, traceLink } from "./lib/findings.js";
import {
  STEP_CATEGORIES, formatBytes, formatRatio, formatText, formatUs, timeAxis,
} from "./lib/format.js";
import { draw, layout, purgeAll } from "./lib/plot.js";
import { buildTable, parseSort, sortToText } from "./lib/table.js";
import { updateQuery, viewHref } from "./lib/url.js";

/**
 * @typedef {{total_us: number, kernel_us: number, memcpy_us: number, memset_us: number,
 *            communication_us: number, runtime_us: number, dataloader_us: number,
 *            cpu_exec_us: number, other_us: number}} StepCosts
 * @typedef {StepCosts & {step: string, start_us: number, end_us: number}} Step
 * @typedef {{device: number, name: string|null, memory_bytes: number|null, compute_capability: string|null,
 *            utilization_ratio: number|null, sm_efficiency_ratio: number|null,
 *            achieved_occupancy_ratio: number|null, tensor_core_ratio: number|null}} Gpu
 * @typedef {{idle_us: number, host_wait_us: number, kernel_wait_us: number, other_us: number}} IdleCauses
 * @typedef {IdleCauses & {device: number, span_us: number}} GpuIdle
 * @typedef {IdleCauses & {device: number, stream: number|null}} StreamIdle
 * @typedef {{kernel_wait_threshold_us: number, devices: GpuIdle[], steps: (StreamIdle & {step: string})[],
 *            average: StreamIdle[]}} Idle
 * @typedef {import("./lib/findings.js").Finding} Recommendation
 * @typedef {{steps: Step[], average: StepCosts, gpus: Gpu[], idle: Idle, recommendations: Recommendation[],
 *            warnings: string[]}} Overview
 */

/** One fixed colour per category (Tableau 10), the same in the chart, the pie and the tables. */
export const CATEGORY_COLORS = Object.freeze({
  kernel_us: "#4e79a7",
  memcpy_us: "#f28e2b",
  memset_us: "#edc948",
  communication_us: "#b07aa1",
  runtime_us: "#e15759",
  dataloader_us: "#76b7b2",
  cpu_exec_us: "#59a14f",
  other_us: "#bab0ac",
});

/** Why the GPU was idle (server/analysis/idle.py), each with its colour; busy time comes first in the bar. */
export const IDLE_CAUSES = Object.freeze([
  { key: "host_wait_us", label: "Host wait", color: "#e15759",
    title: "Nothing was queued: the GPU waited for the host to launch the next work" },
  { key: "kernel_wait_us", label: "Kernel wait", color: "#ff9da7",
    title: "Short gaps between work already queued (back-to-back kernels)" },
  { key: "other_us", label: "Other", color: "#bab0ac",
    title: "Work was queued but waited, e.g. for another stream or a synchronisation" },
]);
const BUSY = { key: "busy_us", label: "Busy", color: CATEGORY_COLORS.kernel_us, title: "At least one kernel running" };

// ---------------------------------------------------------------- fetch

/**
 * @param {{run?: string, worker?: string, span?: string}} params
 * @param {AbortSignal} [signal]
 * @returns {Promise<Overview>}
 */
export function fetchOverview({ run, worker, span }, signal) {
  return getJSON("/api/overview", { run, worker, span }, signal);
}

// ---------------------------------------------------------------- shape

/**
 * `part / whole` as a 0..1 share, null when the whole is not positive.
 * @param {number} part
 * @param {number} whole
 * @returns {number|null}
 */
export function share(part, whole) {
  return whole > 0 && Number.isFinite(part) ? part / whole : null;
}

/**
 * The categories worth charting: those with time in any step (or in the average).
 * @param {Step[]} steps
 * @param {StepCosts} average
 */
export function chartedCategories(steps, average) {
  return STEP_CATEGORIES.filter(({ key }) => (average && average[key] > 0) || steps.some((s) => s[key] > 0));
}

/** Bars wider than this look like blocks when a trace has only a few steps. */
const MAX_BAR_PX = 72;

/**
 * The bar width, as a fraction of a step's slot, that keeps bars at most {@link MAX_BAR_PX} wide.
 * @param {number} stepCount
 * @param {number} plotWidthPx the chart's width on screen (an estimate is fine)
 * @returns {number}
 */
export function barWidth(stepCount, plotWidthPx) {
  const slot = Math.max(plotWidthPx, 1) / Math.max(stepCount, 1);
  return Math.min(0.7, MAX_BAR_PX / slot);
}

/**
 * Stacked-bar traces of the step-time breakdown, one per category, in the fixed category order.
 * @param {Step[]} steps
 * @param {StepCosts} average
 * @param {number} [plotWidthPx] the chart's width, to cap the bar width
 * @returns {{traces: object[], unit: string, yTitle: string}}
 */
export function stepBarTraces(steps, average, plotWidthPx = 800) {
  const axis = timeAxis(steps.reduce((max, s) => Math.max(max, s.total_us || 0), 0));
  const x = steps.map((s) => s.step);
  const width = barWidth(steps.length, plotWidthPx);
  const traces = chartedCategories(steps, average).map(({ key, label }) => ({
    type: "bar",
    name: label,
    x,
    y: steps.map((s) => (s[key] || 0) / axis.divisor),
    customdata: steps.map((s) => `${label}: ${formatUs(s[key])} (${formatRatio(share(s[key], s.total_us))})`),
    hovertemplate: "%{customdata}<extra></extra>",
    marker: { color: CATEGORY_COLORS[key], line: { width: 0 } },
    width,
  }));
  return { traces, unit: axis.unit, yTitle: axis.axisTitle("Step time") };
}

/**
 * The Plotly layout of the step chart.
 * @param {Step[]} steps
 * @param {string} yTitle
 */
export function stepBarLayout(steps, yTitle) {
  return layout({
    barmode: "stack",
    hovermode: "x unified",
    margin: { l: 64, r: 16, t: 8, b: 48 },
    xaxis: { type: "category", title: { text: "Step" }, unifiedhovertitle: { text: "Step %{x}" } },
    yaxis: { title: { text: yTitle }, rangemode: "tozero" },
    legend: { traceorder: "normal" },
  });
}

/**
 * The donut of the average step's breakdown.
 * @param {StepCosts} average
 * @param {Step[]} steps
 * @returns {object}
 */
export function breakdownPieTrace(average, steps) {
  const categories = chartedCategories(steps, average);
  const values = categories.map(({ key }) => average[key] || 0);
  const shares = values.map((v) => share(v, average.total_us));
  return {
    type: "pie",
    hole: 0.5,
    sort: false,
    direction: "clockwise",
    labels: categories.map((c) => c.label),
    values,
    marker: { colors: categories.map(({ key }) => CATEGORY_COLORS[key]), line: { color: "#fff", width: 1 } },
    // Slices under 5 % get no label: they would overlap.
    text: shares.map((s) => (s !== null && s >= 0.05 ? formatRatio(s, 1) : "")),
    textinfo: "text",
    textposition: "inside",
    insidetextorientation: "horizontal",
    insidetextfont: { color: "#fff", size: 11 },
    customdata: categories.map((c, i) => `${c.label}: ${formatUs(values[i])} (${formatRatio(shares[i])})`),
    hovertemplate: "%{customdata}<extra></extra>",
    showlegend: false,
  };
}

/**
 * The donut's layout, with the average step time in its hole.
 * @param {StepCosts} average
 */
export function breakdownPieLayout(average) {
  return layout({
    margin: { l: 8, r: 8, t: 8, b: 8 },
    annotations: [{
      text: `<b>${formatUs(average.total_us)}</b><br>avg step`,
      showarrow: false, x: 0.5, y: 0.5, xref: "paper", yref: "paper",
      font: { size: 13, color: "#3c4043" },
    }],
  });
}

/**
 * Rows of the execution summary: each category's average time and its share of the step.
 * @param {StepCosts} average
 * @returns {{key: string, category: string, time_us: number, share_ratio: number|null}[]}
 */
export function summaryRows(average) {
  return STEP_CATEGORIES.map(({ key, label }) => ({
    key,
    category: label,
    time_us: average[key] || 0,
    share_ratio: share(average[key] || 0, average.total_us),
  }));
}

/**
 * Label/value pairs of one GPU's summary card, as the reference plugin lists them.
 * @param {Gpu} gpu
 * @returns {[string, string][]}
 */
export function gpuFields(gpu) {
  return [
    ["Name", formatText(gpu.name)],
    ["Memory", formatBytes(gpu.memory_bytes)],
    ["Compute Capability", formatText(gpu.compute_capability)],
    ["GPU Utilization", formatRatio(gpu.utilization_ratio)],
    ["Est. SM Efficiency", formatRatio(gpu.sm_efficiency_ratio)],
    ["Est. Achieved Occupancy", formatRatio(gpu.achieved_occupancy_ratio)],
    ["Kernel Time using Tensor Cores", formatRatio(gpu.tensor_core_ratio)],
  ];
}

/**
 * Segments of one GPU's time over the steps: busy, then idle by cause, each with its share of the span.
 * @param {GpuIdle} idle
 * @returns {{key: string, label: string, color: string, title: string, us: number, ratio: number|null}[]}
 */
export function idleSegments(idle) {
  return [{ ...BUSY, us: idle.span_us - idle.idle_us }, ...IDLE_CAUSES.map((c) => ({ ...c, us: idle[c.key] }))]
    .map((s) => ({ ...s, ratio: share(s.us, idle.span_us) }));
}

/**
 * Rows of one GPU's idle table, per step on average: the GPU as a whole (no kernel running on any
 * stream), then each of its streams (between its first and last work, as HTA counts it).
 * @param {StreamIdle[]} average
 * @param {number} device
 * @returns {(StreamIdle & {name: string})[]}
 */
export function idleRows(average, device) {
  return average.filter((r) => r.device === device)
    .map((r) => ({ ...r, name: r.stream === null ? "GPU" : `Stream ${r.stream}` }));
}

/**
 * Columns of the per-step table: step (a link to its time range in the trace view), total, then
 * each category.
 * @param {{run?: string, worker?: string, span?: string}} [selection]
 * @returns {import("./lib/table.js").Column[]}
 */
export function stepColumns(selection = {}) {
  const time = (/** @type {number} */ v) => formatUs(v);
  return [
    { key: "step", label: "Step", sortValue: (row) => (Number.isFinite(Number(row.step)) ? Number(row.step) : row.step),
      render: (row) => traceLink(selection, row, String(row.step)) || String(row.step) },
    { key: "total_us", label: "Total", numeric: true, format: time },
    ...STEP_CATEGORIES.map(({ key, label }) => ({ key, label, numeric: true, format: time, title: `${label} time per step` })),
  ];
}

// ---------------------------------------------------------------- draw

/**
 * @param {HTMLElement} node
 * @param {string} text
 */
function emptyNote(node, text) {
  purgeAll(node);
  node.replaceChildren(el("p", { class: "empty", text }));
}

/** @param {{color: string}} item */
function swatchOf(item) {
  const swatch = el("span", { class: "swatch", attrs: { "aria-hidden": "true" } });
  swatch.style.background = item.color;
  return swatch;
}

/**
 * Why one GPU was idle: a bar of its time over the steps (busy, then each cause), its legend, and the
 * per-step averages of the GPU and of each stream.
 * @param {GpuIdle|undefined} idle
 * @param {StreamIdle[]} average
 * @param {number} threshold the kernel-wait threshold (us)
 */
function idleBlock(idle, average, threshold) {
  if (!idle || !(idle.span_us > 0)) return null;
  const segments = idleSegments(idle);
  const bar = el("div", {
    class: "idle-bar", testid: "idle-bar",
    attrs: { role: "img", "aria-label": segments.map((s) => `${s.label} ${formatRatio(s.ratio)}`).join(", ") },
  }, segments.filter((s) => s.ratio > 0).map((s) => {
    const part = el("span", { class: "idle-part", title: `${s.label}: ${formatUs(s.us)} (${formatRatio(s.ratio)})`,
      attrs: { "data-key": s.key } });
    part.style.width = `${(s.ratio || 0) * 100}%`;
    part.style.background = s.color;
    return part;
  }));
  const legend = el("ul", { class: "idle-legend", testid: "idle-legend" }, segments.map((s) =>
    el("li", { title: s.title, attrs: { "data-key": s.key } }, [
      swatchOf(s), `${s.label} `, el("span", { class: "idle-value", text: formatRatio(s.ratio) }),
    ])));
  const time = (/** @type {number} */ v) => formatUs(v);
  const table = buildTable({
    caption: "GPU idle time per step by cause",
    testid: "idle-table",
    columns: [
      { key: "name", label: "Per step", sortable: false,
        title: "Per step on average: the GPU (no kernel on any stream), then each stream between its first and last work" },
      { key: "idle_us", label: "Idle", numeric: true, format: time, sortable: false },
      ...IDLE_CAUSES.map(({ key, label, title }) => ({
        key, label, title: key === "kernel_wait_us" ? `${title}: under ${formatUs(threshold)}` : title,
        numeric: true, format: time, sortable: false,
      })),
    ],
    rows: idleRows(average, idle.device),
  });
  return el("div", { class: "gpu-idle", testid: "gpu-idle" }, [
    el("div", { class: "gpu-idle-title", text: `Idle ${formatRatio(share(idle.idle_us, idle.span_us))} of the steps' time, by cause` }),
    bar, legend, table,
  ]);
}

/** @param {HTMLElement} node @param {Gpu[]} gpus @param {Idle|undefined} idle */
function drawGpus(node, gpus, idle) {
  if (!gpus.length) {
    node.replaceChildren(el("p", { class: "empty", text: "No GPU ran kernels in this trace." }));
    return;
  }
  const { devices = [], average = [], kernel_wait_threshold_us: threshold = 0 } = idle || {};
  node.replaceChildren(...gpus.map((gpu) => el("div", { class: "gpu", attrs: { "data-device": String(gpu.device) } }, [
    gpus.length > 1 ? el("div", { class: "gpu-title", text: `GPU ${gpu.device}` }) : null,
    el("dl", { class: "kv" }, gpuFields(gpu).flatMap(([label, value]) => [
      el("dt", { text: label }),
      el("dd", { text: value, class: value === "n/a" ? "muted" : "" }),
    ])),
    idleBlock(devices.find((d) => d.device === gpu.device), average, threshold),
  ])));
}

/**
 * @param {HTMLElement} headline where the average step time goes
 * @param {HTMLElement} node where the per-category table goes
 * @param {StepCosts} average
 * @param {number} stepCount
 */
function drawSummary(headline, node, average, stepCount) {
  headline.replaceChildren(
    el("span", { class: "headline-label", text: "Average step time" }),
    el("span", { class: "headline-value", testid: "average-step-time", text: formatUs(average.total_us) }),
    el("span", { class: "headline-sub", text: `over ${stepCount} step${stepCount === 1 ? "" : "s"}` }),
  );
  node.replaceChildren(buildTable({
    caption: "Average step time by category",
    columns: [
      {
        key: "category",
        label: "Category",
        decorate: (row) => swatchOf({ color: CATEGORY_COLORS[row.key] }),
      },
      { key: "time_us", label: "Time", numeric: true, format: (v) => formatUs(v) },
      { key: "share_ratio", label: "Share", numeric: true, format: (v) => formatRatio(v) },
    ],
    rows: summaryRows(average),
  }));
}

/**
 * The compact list of findings, largest saving first: severity, title, saving, suggestion, evidence
 * with links into the Trace view.
 * @param {HTMLElement} node
 * @param {HTMLAnchorElement} details the card's link to the Recommendations view
 * @param {Recommendation[]} recommendations
 * @param {{run?: string, worker?: string, span?: string}} selection
 */
function drawRecommendations(node, details, recommendations, selection) {
  const { run, worker, span } = selection;
  details.href = viewHref("recommendations", { run, worker, span });
  if (!recommendations.length) {
    node.replaceChildren(el("p", { class: "empty", text: "Nothing stood out in this trace." }));
    return;
  }
  node.replaceChildren(el("ul", { class: "rec-list" }, sortBySaving(recommendations).map((r) =>
    el("li", { class: `rec rec-${r.severity}`, testid: "recommendation", attrs: { "data-id": r.id } }, [
      el("div", { class: "rec-head" }, [
        severityBadge(r.severity),
        el("span", { class: "rec-title", text: r.title }),
      ]),
      savingLine(r),
      r.detail ? el("p", { class: "rec-detail" }, inlineCode(r.detail)) : null,
      evidenceList(selection, r.evidence),
    ]))));
}

/**
 * @param {HTMLElement} node
 * @param {Step[]} steps
 * @param {StepCosts} average
 * @param {string|undefined} sortText
 * @param {{run?: string, worker?: string, span?: string}} selection
 */
function drawStepTable(node, steps, average, sortText, selection) {
  if (!steps.length) {
    node.replaceChildren(el("p", { class: "empty", text: "No steps found in this trace." }));
    return;
  }
  const columns = stepColumns(selection);
  node.replaceChildren(buildTable({
    caption: "Time per step by category",
    columns,
    rows: steps,
    sort: parseSort(sortText, columns),
    onSort: (sort) => updateQuery({ sort: sortToText(sort) }),
    footer: steps.length > 1 ? { step: "Average", ...average } : undefined,
  }));
}

/** @param {HTMLElement} node @param {Step[]} steps @param {StepCosts} average */
async function drawStepChart(node, steps, average) {
  if (!steps.length) {
    emptyNote(node, "No steps found in this trace.");
    return;
  }
  const { traces, yTitle } = stepBarTraces(steps, average, Math.max(node.clientWidth - 80, 200));
  if (!node.classList.contains("js-plotly-plot")) clear(node);
  await draw(node, traces, stepBarLayout(steps, yTitle));
}

/** @param {HTMLElement} node @param {Step[]} steps @param {StepCosts} average */
async function drawPie(node, steps, average) {
  if (!steps.length || !(average.total_us > 0)) {
    emptyNote(node, "No step time to break down.");
    return;
  }
  if (!node.classList.contains("js-plotly-plot")) clear(node);
  await draw(node, [breakdownPieTrace(average, steps)], breakdownPieLayout(average));
}

/**
 * Fetches and draws the overview of one worker's span.
 * @param {HTMLElement} root the `[data-view="overview"]` section
 * @param {{run?: string, worker?: string, span?: string, sort?: string}} params
 * @param {{signal?: AbortSignal}} [context]
 */
export async function mount(root, params, { signal } = {}) {
  const data = await fetchOverview(params, signal);
  if (signal && signal.aborted) return;
  const steps = data.steps || [];
  const average = data.average;
  showWarnings(byTestId(root, "warnings"), data.warnings || []);
  drawGpus(byTestId(root, "gpu-summary"), data.gpus || [], data.idle);
  drawSummary(byTestId(root, "average-step"), byTestId(root, "execution-summary"), average, steps.length);
  drawRecommendations(byTestId(root, "recommendations"),
    /** @type {HTMLAnchorElement} */ (byTestId(root, "recommendations-link")), data.recommendations || [], params);
  drawStepTable(byTestId(root, "step-table"), steps, average, params.sort, params);
  await Promise.all([
    drawStepChart(byTestId(root, "step-chart"), steps, average),
    drawPie(byTestId(root, "breakdown-pie"), steps, average),
  ]);
}
