/**
 * The Diff view (`diff`): a candidate run compared with a baseline per training step: the verdict,
 * a waterfall of the average step from baseline to candidate by category, the findings resolved
 * and new, and the operators, kernels and modules that changed most, each linking to its own view
 * in either run. Reads `/api/runs` (for the pickers) and `/api/diff`.
 *
 * The baseline is the shell's selection (`run`, `worker`, `span`); the candidate is `new_run`,
 * `new_worker`, `new_span` in the URL, by default the first other run of the logdir. Both pickers
 * change the URL, so a link holds both selections.
 * @module diff
 */

import { ApiError, getJSON } from "./lib/api.js";
import { byTestId, el } from "./lib/dom.js";
import { NA, STEP_CATEGORIES, formatBytes, formatCount, formatRatio, formatUs, shortKernelName } from "./lib/format.js";
import { draw, layout } from "./lib/plot.js";
import { buildTable, emptyText } from "./lib/table.js";
import { navigate, viewHref } from "./lib/url.js";

/**
 * @typedef {{run: string, worker?: string, span?: string}} Selection
 * @typedef {{name: string, status: string, base_calls: number, new_calls: number, base_device_us: number,
 *            new_device_us: number, delta_device_us: number, base_host_us?: number, new_host_us?: number,
 *            delta_host_us?: number, input_shape?: string}} Change
 * @typedef {{base: Record<string, number>, new: Record<string, number>, delta: Record<string, number>}} Three
 * @typedef {{base: {run: string, worker: string, span: string}, new: {run: string, worker: string, span: string},
 *            step_delta_ratio: number|null, verdict: "regression"|"improvement"|"unchanged",
 *            step_count: {base: number, new: number}, steps: Three, gpu: Three,
 *            memory: {base_peak_bytes: number|null, new_peak_bytes: number|null, delta_bytes: number|null},
 *            operators: Change[], kernels: Change[], modules: Change[],
 *            recommendations: {resolved: string[], new: string[]}}} Diff
 * @typedef {{name: string, status: string, workers: string[], spans: Record<string, string[]>}} RunInfo
 */

/** Rows a table shows per page. */
export const PAGE_SIZE = 15;
/** How long to wait before asking again while a selection is still loading. */
const RETRY_MS = 1000;
const SLOWER = "#e15759";
const FASTER = "#59a14f";
const TOTAL = "#4e79a7";
const STATUS_ORDER = ["added", "removed", "increased", "decreased", "unchanged"];
/** Where each table's items have their own view, and the query that finds one there. */
const ITEM_VIEWS = {
  operators: (/** @type {Change} */ row) => ["operators", { q: row.name }],
  kernels: (/** @type {Change} */ row) => ["kernels", { q: row.name }],
  modules: () => ["modules", {}],
};

// ---------------------------------------------------------------- fetch

/**
 * /api/diff of two selections; while one is still loading, asks again every second, telling `onWait`.
 * @param {Selection} base
 * @param {Selection} candidate
 * @param {AbortSignal|undefined} signal
 * @param {(message: string) => void} onWait
 * @returns {Promise<Diff>}
 */
export async function fetchDiff(base, candidate, signal, onWait) {
  const query = {
    base_run: base.run, base_worker: base.worker, base_span: base.span,
    new_run: candidate.run, new_worker: candidate.worker, new_span: candidate.span,
  };
  for (;;) {
    try {
      return await getJSON("/api/diff", query, signal);
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== "loading") throw err;
      onWait(err.message);
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      if (signal && signal.aborted) throw err;
    }
  }
}

// ---------------------------------------------------------------- shape

/**
 * A selection completed with the run's first worker and span where it names none (or one the run lacks).
 * @param {RunInfo[]} runs
 * @param {string} run
 * @param {string|undefined} worker
 * @param {string|undefined} span
 * @returns {Selection}
 */
export function complete(runs, run, worker, span) {
  const info = runs.find((r) => r.name === run);
  if (!info) return { run, worker, span };
  const w = worker && info.workers.includes(worker) ? worker : info.workers[0];
  const spans = info.spans[w] || [];
  return { run, worker: w, span: span && spans.includes(span) ? span : spans[0] };
}

/**
 * The candidate the URL asks for (`new_run`, `new_worker`, `new_span`), else the first other run
 * with traces (the baseline's own run when there is none).
 * @param {Record<string, string>} params
 * @param {RunInfo[]} runs
 * @returns {Selection}
 */
export function candidateOf(params, runs) {
  if (params.new_run) return complete(runs, params.new_run, params.new_worker, params.new_span);
  const other = runs.find((r) => r.name !== params.run && r.workers.length && r.status !== "error");
  return complete(runs, other ? other.name : params.run, undefined, undefined);
}

/**
 * The waterfall's columns: the baseline's average step, each category's change (categories that
 * are zero in both runs left out), the candidate's average step.
 * @param {Three} steps
 */
export function waterfall(steps) {
  const parts = STEP_CATEGORIES.filter((c) => steps.base[c.key] || steps.new[c.key]);
  return {
    x: ["Baseline", ...parts.map((c) => c.label), "Candidate"],
    measure: ["absolute", ...parts.map(() => "relative"), "total"],
    us: [steps.base.total_us, ...parts.map((c) => steps.delta[c.key]), steps.new.total_us],
  };
}

/**
 * A signed duration: "+1.20 ms", "−350 us", "0 us".
 * @param {number|null|undefined} us
 * @returns {string}
 */
export function formatDelta(us) {
  if (typeof us !== "number" || !Number.isFinite(us)) return NA;
  if (us === 0) return formatUs(0);
  return `${us > 0 ? "+" : "−"}${formatUs(Math.abs(us))}`;
}

/**
 * A signed share: "+41.7%", "−29.4%".
 * @param {number|null|undefined} ratio
 * @returns {string}
 */
export function formatChange(ratio) {
  if (typeof ratio !== "number" || !Number.isFinite(ratio)) return NA;
  return `${ratio > 0 ? "+" : ratio < 0 ? "−" : ""}${formatRatio(Math.abs(ratio), 1)}`;
}

/**
 * A change of a share, in percentage points: "+23.5 pp", "−0.1 pp".
 * @param {number|null|undefined} delta
 * @returns {string}
 */
export function formatPoints(delta) {
  if (typeof delta !== "number" || !Number.isFinite(delta)) return NA;
  const points = Math.abs(delta * 100).toFixed(1);
  return `${delta > 0 && points !== "0.0" ? "+" : delta < 0 && points !== "0.0" ? "−" : ""}${points} pp`;
}

/**
 * "2 added, 1 removed, 5 decreased, 30 unchanged" for a table's rows.
 * @param {Change[]} rows
 * @returns {string}
 */
export function statusCounts(rows) {
  /** @type {Record<string, number>} */ const counts = {};
  for (const row of rows) counts[row.status] = (counts[row.status] || 0) + 1;
  return STATUS_ORDER.filter((s) => counts[s]).map((s) => `${formatCount(counts[s])} ${s}`).join(", ");
}

// ---------------------------------------------------------------- draw

/**
 * @param {HTMLElement} root
 * @param {"base"|"new"} side
 * @param {RunInfo[]} runs
 * @param {Selection} picked
 * @param {(selection: Selection) => void} onPick
 */
function drawPicker(root, side, runs, picked, onPick) {
  const [run, worker, span] = ["run", "worker", "span"].map(
    (k) => /** @type {HTMLSelectElement} */ (byTestId(root, `${side}-${k}`)));
  const info = runs.find((r) => r.name === picked.run);
  /** @param {HTMLSelectElement} select @param {string[]} values @param {string|undefined} value */
  const fill = (select, values, value) => {
    const known = value === undefined || values.includes(value) ? values : [value, ...values];
    select.replaceChildren(...known.map((v) => el("option", { text: v, attrs: { value: v } })));
    if (value !== undefined) select.value = value;
    select.disabled = known.length === 0;
  };
  fill(run, runs.filter((r) => r.workers.length).map((r) => r.name), picked.run);
  fill(worker, info ? info.workers : [], picked.worker);
  fill(span, info && picked.worker ? info.spans[picked.worker] || [] : [], picked.span);
  run.onchange = () => onPick(complete(runs, run.value, picked.worker, picked.span));
  worker.onchange = () => onPick(complete(runs, picked.run, worker.value, picked.span));
  span.onchange = () => onPick({ ...picked, span: span.value });
}

/**
 * @param {HTMLElement} root
 * @param {Diff} diff
 */
function drawVerdict(root, diff) {
  const { steps, step_count: count } = diff;
  const ratio = diff.step_delta_ratio;
  const word = { regression: "Regression", improvement: "Improvement", unchanged: "Unchanged" }[diff.verdict];
  byTestId(root, "verdict").replaceChildren(
    el("span", { class: `badge badge-${diff.verdict === "regression" ? "high" : "low"}`, text: word, testid: "verdict-word" }),
    el("span", { class: "headline-value", testid: "step-delta", text: formatChange(ratio) }),
    el("span", { class: "headline-sub",
      text: `average step ${formatUs(steps.base.total_us)} → ${formatUs(steps.new.total_us)} (${formatDelta(steps.delta.total_us)})` }),
  );
  byTestId(root, "verdict-meta").textContent = `Baseline ${count.base} steps, candidate ${count.new}: compared per step`;
  const { gpu, memory } = diff;
  const ratios = [
    ["GPU utilization", "utilization_ratio"], ["Est. SM efficiency", "sm_efficiency_ratio"],
    ["Est. achieved occupancy", "achieved_occupancy_ratio"], ["Kernel time using tensor cores", "tensor_core_ratio"],
  ].map(([label, key]) => ({ label, base: formatRatio(gpu.base[key]), new: formatRatio(gpu.new[key]),
    delta: formatPoints(gpu.delta[key]) }));
  ratios.push({ label: "Peak memory allocated", base: formatBytes(memory.base_peak_bytes),
    new: formatBytes(memory.new_peak_bytes),
    delta: memory.delta_bytes === null ? NA : `${memory.delta_bytes >= 0 ? "+" : "−"}${formatBytes(Math.abs(memory.delta_bytes))}` });
  byTestId(root, "ratios").replaceChildren(buildTable({
    columns: [{ key: "label", label: "", sortable: false }, { key: "base", label: "Baseline", numeric: true, sortable: false },
      { key: "new", label: "Candidate", numeric: true, sortable: false }, { key: "delta", label: "Change", numeric: true, sortable: false }],
    rows: ratios, caption: "GPU and memory", testid: "ratio-table",
  }));
}

/**
 * @param {HTMLElement} node
 * @param {Three} steps
 */
async function drawWaterfall(node, steps) {
  const columns = waterfall(steps);
  const trace = {
    type: "waterfall",
    orientation: "v",
    x: columns.x,
    measure: columns.measure,
    y: columns.us.map((us) => us / 1000),
    text: columns.us.map((us, i) => (columns.measure[i] === "relative" ? formatDelta(us) : formatUs(us))),
    textposition: "outside",
    hovertemplate: "%{x}: %{text}<extra></extra>",
    increasing: { marker: { color: SLOWER } },
    decreasing: { marker: { color: FASTER } },
    totals: { marker: { color: TOTAL } },
    connector: { line: { color: "#bdc1c6", width: 1 } },
  };
  await draw(node, [trace], layout({ showlegend: false, yaxis: { title: { text: "ms per step" }, rangemode: "tozero" } }));
}

/**
 * @param {HTMLElement} node
 * @param {Diff} diff
 */
function drawRecommendations(node, diff) {
  const list = (/** @type {string[]} */ ids, /** @type {Diff["base"]} */ sel, /** @type {string} */ testid) => (ids.length
    ? el("ul", { testid }, ids.map((id) => el("li", {}, [
      el("a", { class: "action-link", text: id, attrs: { href: viewHref("recommendations", sel) } })])))
    : el("p", { class: "empty", testid, text: "None" }));
  node.replaceChildren(
    el("div", { class: "headline-label", text: "Resolved (found in the baseline, not in the candidate)" }),
    list(diff.recommendations.resolved, diff.base, "resolved"),
    el("div", { class: "headline-label", text: "New (found in the candidate only)" }),
    list(diff.recommendations.new, diff.new, "new-findings"),
  );
}

/**
 * The columns of a table of changes; `links` makes the last cell.
 * @param {boolean} host whether the rows have host times
 * @param {(row: Change) => Node} links
 * @param {boolean} kernels names shortened as kernel names
 */
export function changeColumns(host, links, kernels = false) {
  const time = (/** @type {string} */ key, /** @type {string} */ label) => ({ key, label, numeric: true,
    format: (/** @type {number} */ v) => (key.startsWith("delta") ? formatDelta(v) : formatUs(v)) });
  const calls = (/** @type {number} */ v) => (Number.isInteger(v) ? formatCount(v) : v.toFixed(2));
  /** @type {import("./lib/table.js").Column[]} */
  const columns = [
    { key: "status", label: "Status", cellClass: "cell-flag", sortValue: (row) => STATUS_ORDER.indexOf(row.status) },
    { key: "name", label: "Name", truncate: true, cellClass: "cell-name",
      format: (v, row) => (kernels ? shortKernelName(v) : v) + (row.input_shape ? ` ${row.input_shape}` : "") },
    { key: "base_calls", label: "Calls (base)", numeric: true, format: calls },
    { key: "new_calls", label: "Calls (new)", numeric: true, format: calls },
    time("base_device_us", "Device (base)"), time("new_device_us", "Device (new)"), time("delta_device_us", "Δ Device"),
  ];
  if (host) columns.push(time("base_host_us", "Host (base)"), time("new_host_us", "Host (new)"), time("delta_host_us", "Δ Host"));
  columns.push({ key: "links", label: "", sortable: false, cellClass: "cell-actions", render: links });
  return columns;
}

/**
 * @param {HTMLElement} root
 * @param {"operators"|"kernels"|"modules"} part
 * @param {Diff} diff
 */
function drawChanges(root, part, diff) {
  const rows = diff[part];
  const node = byTestId(root, `${part}-table`);
  byTestId(root, `${part}-meta`).textContent = statusCounts(rows);
  if (!rows.length) {
    emptyText(node, `No ${part} in either run.`, `${part}-empty`);
    return;
  }
  const link = (/** @type {Change} */ row, /** @type {Diff["base"]} */ sel, /** @type {string} */ text, /** @type {string} */ testid) => {
    const [view, query] = ITEM_VIEWS[part](row);
    return el("a", { class: "action-link", text, testid, title: `This item in the ${view} view of ${sel.run}`,
      attrs: { href: viewHref(view, { ...sel, ...query }) } });
  };
  // On one line: "Base · New", or the one run that has the item.
  const links = (/** @type {Change} */ row) => el("span", {}, [
    row.status === "added" ? null : link(row, diff.base, "Base", "base-link"),
    row.status === "added" || row.status === "removed" ? null : " · ",
    row.status === "removed" ? null : link(row, diff.new, "New", "new-link"),
  ]);
  node.replaceChildren(buildTable({
    columns: changeColumns(part !== "kernels", links, part === "kernels"),
    rows, pageSize: PAGE_SIZE, caption: `${part} by change per step`, testid: `${part}-changes`,
    rowClass: (row) => `status-${row.status}`,
  }));
}

/**
 * Fetches and draws the diff of the baseline (the shell's selection) and the candidate.
 * @param {HTMLElement} root the `[data-view="diff"]` section
 * @param {Selection & Record<string, string>} params
 * @param {{signal?: AbortSignal}} [context]
 */
export async function mount(root, params, { signal } = {}) {
  const status = byTestId(root, "diff-status");
  const { runs } = await getJSON("/api/runs", {}, signal);
  const base = complete(runs, params.run, params.worker, params.span);
  const candidate = candidateOf(params, runs);
  const pick = (/** @type {Selection} */ b, /** @type {Selection} */ c) => navigate({
    run: b.run, worker: b.worker, span: b.span, new_run: c.run, new_worker: c.worker, new_span: c.span,
  });
  drawPicker(root, "base", runs, base, (b) => pick(b, candidate));
  drawPicker(root, "new", runs, candidate, (c) => pick(base, c));
  byTestId(root, "swap").onclick = () => pick(candidate, base);

  const diff = await fetchDiff(base, candidate, signal, (message) => {
    status.textContent = `Waiting: ${message}`;
    status.hidden = false;
  });
  if (signal && signal.aborted) return;
  status.hidden = true;
  drawVerdict(root, diff);
  drawRecommendations(byTestId(root, "recommendations"), diff);
  for (const part of /** @type {const} */ (["operators", "kernels", "modules"])) drawChanges(root, part, diff);
  await drawWaterfall(byTestId(root, "waterfall"), diff.steps);
}
