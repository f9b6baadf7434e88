/**
 * The Kernels view (`kernels`): GPU kernels by total time, as a top-N pie, a tensor-core pie and a sortable,
 * paginated table, per kernel or per kernel and launching operator, optionally only the kernels
 * one operator launched. Reads `/api/kernels`.
 *
 * Three layers: fetch (`fetchKernels`), shape (pure functions from JSON to pie slices and table
 * columns, exported for reuse and tests) and draw (`mount` and the `draw*` helpers). View state
 * lives in the URL: `group_by`, `op`, `top`, `q`, `sort`, `page`.
 * @module kernels
 */

import { getJSON } from "./lib/api.js";
import { byTestId, clear, el, showWarnings } from "./lib/dom.js";
import { NA, formatBytes, formatCount, formatRatio, formatUs, shortKernelName } from "./lib/format.js";
import { draw, showEmpty } from "./lib/plot.js";
import { OTHER_COLOR, pieLayout, pieTrace, topSlices } from "./lib/pie.js";
import { drawRankedTable, rankedState, toolbar, wireToolbar } from "./lib/ranked.js";
import { filterRows } from "./lib/table.js";
import { traceHref, viewHref } from "./lib/url.js";

/**
 * @typedef {{name: string, calls: number, total_us: number, mean_us: number, max_us: number, min_us: number,
 *            tensor_cores: boolean, tensor_cores_guess: boolean, blocks_per_sm: number|null,
 *            achieved_occupancy_ratio: number|null, op?: string|null, grid?: number[]|null,
 *            block?: number[]|null, registers_per_thread?: number|null, shared_memory_bytes?: number|null,
 *            op_tc_eligible?: boolean}} KernelRow
 * @typedef {{group_by: "name"|"name_op", op: string|null, rows: KernelRow[], warnings: string[]}} Kernels
 * @typedef {{run?: string, worker?: string, span?: string}} Selection
 */

const DEFAULT_SORT = Object.freeze({ key: "total_us", desc: true });

/** What the tensor-core pie splits kernel time into, with fixed colours. */
export const TC_SLICES = Object.freeze([
  { key: "yes", name: "Using tensor cores", color: "#59a14f" },
  { key: "guess", name: "Using tensor cores (guess)", color: "#8cd17d" },
  { key: "no", name: "Not using tensor cores", color: OTHER_COLOR },
]);

export const GUESS_TITLE = "Inferred from the kernel name by a rule that can be wrong (e.g. a Triton matmul template); "
  + "the trace does not say which instructions a kernel ran.";

// ---------------------------------------------------------------- fetch

/**
 * @param {Selection} selection
 * @param {"name"|"name_op"} groupBy
 * @param {string|null} op only kernels launched by this operator or the operators it called
 * @param {AbortSignal} [signal]
 * @returns {Promise<Kernels>}
 */
export function fetchKernels({ run, worker, span }, groupBy, op, signal) {
  return getJSON("/api/kernels", { run, worker, span, group_by: groupBy, op }, signal);
}

// ---------------------------------------------------------------- shape

/**
 * The grouping a URL asks for; anything unknown is "name".
 * @param {string|null|undefined} text
 * @returns {"name"|"name_op"}
 */
export function parseGroupBy(text) {
  return text === "name_op" ? "name_op" : "name";
}

/**
 * A row's tensor-core use: "yes", "guess" (told from the name) or "no".
 * @param {KernelRow} row
 * @returns {"yes"|"guess"|"no"}
 */
export function tensorCoreUse(row) {
  if (!row.tensor_cores) return "no";
  return row.tensor_cores_guess ? "guess" : "yes";
}

/**
 * The slices of the top-kernels pie: the top N kernels by total time, and Other. Rows of one kernel
 * name (several launching operators or launch configurations, with group_by=name_op) are one slice,
 * as the pie ranks kernels.
 * @param {KernelRow[]} rows
 * @param {number} top
 */
export function kernelSlices(rows, top) {
  /** @type {Map<string, number>} */ const totals = new Map();
  for (const row of rows) {
    if (Number.isFinite(row.total_us)) totals.set(row.name, (totals.get(row.name) || 0) + row.total_us);
  }
  return topSlices([...totals].map(([name, value]) => ({
    key: name,
    name,
    label: shortKernelName(name),
    value,
  })), top, "kernels");
}

/**
 * The tensor-core pie's slices: kernel time using tensor cores (known, guessed) and not; empty parts left out.
 * @param {KernelRow[]} rows
 */
export function tensorCoreSlices(rows) {
  const sums = { yes: 0, guess: 0, no: 0 };
  for (const row of rows) {
    if (Number.isFinite(row.total_us) && row.total_us > 0) sums[tensorCoreUse(row)] += row.total_us;
  }
  const total = sums.yes + sums.guess + sums.no;
  const slices = TC_SLICES.filter((s) => sums[s.key] > 0).map((s) => ({
    key: s.key, name: s.name, label: s.name, value: sums[s.key], share_ratio: total > 0 ? sums[s.key] / total : null, details: [],
  }));
  return { slices, total, colors: new Map(TC_SLICES.map((s) => [s.key, s.color])) };
}

/**
 * "[1568, 1, 32]" for a launch dimension, "n/a" when unknown.
 * @param {number[]|null|undefined} dims
 * @returns {string}
 */
export function formatDims(dims) {
  return Array.isArray(dims) && dims.length ? `[${dims.join(", ")}]` : NA;
}

/**
 * The mean blocks per SM as the reference shows it: two decimals.
 * @param {number|null|undefined} value
 * @returns {string}
 */
export function formatBlocks(value) {
  return typeof value === "number" && Number.isFinite(value) ? value.toFixed(2) : NA;
}

/**
 * @param {KernelRow} row
 * @returns {Node}
 */
function tensorCoreCell(row) {
  const use = tensorCoreUse(row);
  if (use === "guess") return el("span", { class: "tc-guess", text: "Yes (guess)", title: GUESS_TITLE });
  return document.createTextNode(use === "yes" ? "Yes" : "No");
}

/**
 * Columns of the kernel table.
 * @param {"name"|"name_op"} groupBy
 * @param {(row: KernelRow) => Node|null} [actions] the last cell's content (links)
 * @returns {import("./lib/table.js").Column[]}
 */
export function kernelColumns(groupBy, actions) {
  const time = (/** @type {number} */ v) => formatUs(v);
  const byOp = groupBy === "name_op";
  /** @type {import("./lib/table.js").Column[]} */
  const columns = [{ key: "name", label: "Name", truncate: true, cellClass: "cell-name cell-kernel" }];
  if (byOp) {
    columns.push({ key: "op", label: "Operator", truncate: true, cellClass: "cell-name cell-op",
      format: (v) => (v === null || v === undefined ? NA : String(v)),
      title: "The operator that launched the kernel (n/a: launched outside any operator)" });
  }
  columns.push(
    { key: "tensor_cores", label: "Tensor Cores", cellClass: "cell-flag", render: tensorCoreCell,
      sortValue: (row) => ({ yes: 2, guess: 1, no: 0 })[tensorCoreUse(row)],
      title: "Whether the kernel uses tensor cores, told from its name" },
  );
  if (byOp) {
    columns.push({ key: "op_tc_eligible", label: "Op TC Eligible", cellClass: "cell-flag",
      format: (v) => (v ? "Yes" : "No"), sortValue: (row) => (row.op_tc_eligible ? 1 : 0),
      title: "Whether the launching operator can run on tensor cores" });
  }
  columns.push(
    { key: "calls", label: "Calls", numeric: true, format: (v) => formatCount(v) },
    { key: "total_us", label: "Total", numeric: true, format: time },
    { key: "mean_us", label: "Mean", numeric: true, format: time },
    { key: "max_us", label: "Max", numeric: true, format: time },
    { key: "min_us", label: "Min", numeric: true, format: time },
    { key: "blocks_per_sm", label: "Mean Blocks per SM", numeric: true, format: (v) => formatBlocks(v),
      title: "Thread blocks per SM, weighted by kernel duration (n/a: the trace lacks it)" },
    { key: "achieved_occupancy_ratio", label: "Mean Est. Achieved Occupancy", numeric: true, format: (v) => formatRatio(v),
      title: "Estimated achieved occupancy, weighted by kernel duration (n/a: the trace lacks it)" },
  );
  if (byOp) {
    columns.push(
      { key: "grid", label: "Grid", cellClass: "cell-dims", format: (v) => formatDims(v),
        sortValue: (row) => (row.grid ? row.grid.reduce((a, b) => a * b, 1) : null) },
      { key: "block", label: "Block", cellClass: "cell-dims", format: (v) => formatDims(v),
        sortValue: (row) => (row.block ? row.block.reduce((a, b) => a * b, 1) : null) },
      { key: "registers_per_thread", label: "Registers / Thread", numeric: true, format: (v) => formatCount(v) },
      { key: "shared_memory_bytes", label: "Shared Memory", numeric: true, format: (v) => formatBytes(v) },
    );
  }
  if (actions) columns.push({ key: "actions", label: "", sortable: false, cellClass: "cell-actions", render: actions });
  return columns;
}

// ---------------------------------------------------------------- draw

/** @param {HTMLElement} node @param {string|null} op @param {Selection} params */
function drawOpBanner(node, op, params) {
  if (!op) {
    node.hidden = true;
    clear(node);
    return;
  }
  const { op: _op, page: _page, ...rest } = params;
  node.replaceChildren(
    el("span", { class: "banner-text" }, [
      "Kernels launched by ",
      el("code", { class: "banner-op", text: op, title: op, testid: "op-name" }),
      " (and the operators it called)",
    ]),
    el("a", { class: "banner-clear", text: "Show all kernels", testid: "op-clear",
      attrs: { href: viewHref("kernels", { ...rest, op: null }) } }),
  );
  node.hidden = false;
}

/**
 * @param {HTMLElement} node
 * @param {KernelRow[]} rows
 * @param {number} top
 * @param {string} query
 */
async function drawPies(node, rows, top, query) {
  const kernels = kernelSlices(rows, top);
  const tc = tensorCoreSlices(rows);
  const emptyText = query ? `No kernel time in the kernels matching “${query}”.` : "No kernel time was recorded.";
  const topChart = byTestId(node, "pie-kernels");
  const tcChart = byTestId(node, "pie-tensor-cores");
  await Promise.all([
    kernels.slices.length ? draw(topChart, [pieTrace(kernels.slices)], pieLayout()) : showEmpty(topChart, emptyText),
    tc.slices.length ? draw(tcChart, [pieTrace(tc.slices, { colors: tc.colors })], pieLayout()) : showEmpty(tcChart, emptyText),
  ]);
}

/**
 * Fetches and draws the kernel view of one worker's span.
 * @param {HTMLElement} root the `[data-view="kernels"]` section
 * @param {Selection & {group_by?: string, op?: string, top?: string, q?: string, sort?: string, page?: string}} params
 * @param {{signal?: AbortSignal}} [context]
 */
export async function mount(root, params, { signal } = {}) {
  const groupBy = parseGroupBy(params.group_by);
  const op = params.op || null;
  const columns = kernelColumns(groupBy, (row) => el("a", {
    class: "action-link", text: "Trace", testid: "trace-link", title: "Find this kernel's runs in the trace view",
    attrs: { href: traceHref(params, { q: row.name }) },
  }));
  const state = rankedState(params, columns, DEFAULT_SORT);
  const ui = toolbar(root, groupBy, state);
  const pies = byTestId(root, "pies");
  const topTitle = byTestId(root, "pie-kernels-title");
  drawOpBanner(byTestId(root, "op-banner"), op, params);

  const data = await fetchKernels(params, groupBy, op, signal);
  if (signal && signal.aborted) return;
  const rows = data.rows || [];
  showWarnings(byTestId(root, "warnings"), data.warnings || []);

  const drawTable = () => drawRankedTable({
    node: byTestId(root, "kernel-table"),
    count: ui.count,
    rows,
    state,
    columns,
    noun: groupBy === "name_op" ? "kernel + operator rows" : "kernels",
    caption: "Kernels",
    thing: "kernel",
    noRows: op ? `No kernels were launched by ${op} or the operators it called.` : "No GPU kernels were recorded in this trace.",
  });
  const redraw = () => {
    topTitle.textContent = `Top ${state.top} Kernels by Total Time`;
    return drawPies(pies, filterRows(rows, state.query), state.top, state.query.trim());
  };
  wireToolbar(ui, state, { drawTable, drawPies: redraw, signal });
  drawTable();
  await redraw();
}
