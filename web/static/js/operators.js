/**
 * The Operators view (`operators`): where host and device time goes per PyTorch operator (or per operator and
 * input shape), as four top-N pies and a sortable, paginated table, with each operator's call
 * stacks on demand and a link to the kernels it launched. Reads `/api/operators` and
 * `/api/operators/stacks`.
 *
 * Three layers: fetch (`fetchOperators`, `fetchStacks`), shape (pure functions from JSON to pie
 * slices, table columns and links, exported for reuse and tests) and draw (`mount` and the `draw*`
 * helpers). View state lives in the URL: `group_by`, `top`, `q`, `sort`, `page`.
 * @module operators
 */

import { getJSON } from "./lib/api.js";
import { byTestId, el, showWarnings } from "./lib/dom.js";
import { formatCount, formatRatio, formatUs } from "./lib/format.js";
import { draw, showEmpty } from "./lib/plot.js";
import { LABEL_CHARS, colorMap, pieLayout, pieTrace, shortLabel, topSlices } from "./lib/pie.js";
import { drawRankedTable, rankedState, toolbar, wireToolbar } from "./lib/ranked.js";
import { stackPanel } from "./lib/stacks.js";
import { filterRows } from "./lib/table.js";
import { traceHref, viewHref } from "./lib/url.js";

/**
 * @typedef {{name: string, input_shape?: string, calls: number, device_self_us: number,
 *            device_total_us: number, host_self_us: number, host_total_us: number, tc_eligible: boolean,
 *            tc_self_ratio: number|null, tc_total_ratio: number|null, has_call_stack: boolean}} OperatorRow
 * @typedef {{group_by: "name"|"name_shape", rows: OperatorRow[], warnings: string[]}} Operators
 * @typedef {import("./lib/stacks.js").Stacks} Stacks
 * @typedef {{run?: string, worker?: string, span?: string}} Selection
 */

/** The four pies: one per time metric, in the reference plugin's order. */
export const OPERATOR_PIES = Object.freeze([
  { testid: "pie-device-self", key: "device_self_us", title: "Device Self Time" },
  { testid: "pie-device-total", key: "device_total_us", title: "Device Total Time" },
  { testid: "pie-host-self", key: "host_self_us", title: "Host Self Time" },
  { testid: "pie-host-total", key: "host_total_us", title: "Host Total Time" },
]);

const DEFAULT_SORT = Object.freeze({ key: "device_self_us", desc: true });

// ---------------------------------------------------------------- fetch

/**
 * @param {Selection} selection
 * @param {"name"|"name_shape"} groupBy
 * @param {AbortSignal} [signal]
 * @returns {Promise<Operators>}
 */
export function fetchOperators({ run, worker, span }, groupBy, signal) {
  return getJSON("/api/operators", { run, worker, span, group_by: groupBy }, signal);
}

/**
 * @param {Selection} selection
 * @param {{name: string, input_shape?: string|null}} operator the input shape narrows to that shape
 * @param {AbortSignal} [signal]
 * @returns {Promise<Stacks>}
 */
export function fetchStacks({ run, worker, span }, { name, input_shape }, signal) {
  return getJSON("/api/operators/stacks", { run, worker, span, name, input_shape }, signal);
}

// ---------------------------------------------------------------- shape

/**
 * The grouping a URL asks for; anything unknown is "name".
 * @param {string|null|undefined} text
 * @returns {"name"|"name_shape"}
 */
export function parseGroupBy(text) {
  return text === "name_shape" ? "name_shape" : "name";
}

/**
 * A row's identity within one grouping: the name, or the name and the input shape.
 * @param {OperatorRow} row
 * @returns {string}
 */
export function rowKey(row) {
  return row.input_shape === undefined || row.input_shape === null ? row.name : `${row.name}\u0000${row.input_shape}`;
}

/**
 * Input shapes in a few characters, for a pie label: the distinct tensor sizes in order
 * ("64×256×14×14, 256×256×3×3"), as many as fit in `max` characters (at most two), ", …" when more
 * follow; scalars and empty lists are left out ("" when nothing is left).
 * @param {string} inputShape as the API gives it, e.g. "[[64, 256, 14, 14], [256], []]"
 * @param {number} [max]
 * @returns {string}
 */
export function shapeLabel(inputShape, max = Infinity) {
  let shapes;
  try {
    shapes = JSON.parse(inputShape);
  } catch {
    return shortLabel(inputShape, Math.min(max, inputShape.length));
  }
  if (!Array.isArray(shapes)) return shortLabel(inputShape, Math.min(max, inputShape.length));
  const sizes = [...new Set(shapes
    .filter((s) => Array.isArray(s) && s.length && s.every((d) => typeof d === "number"))
    .map((s) => s.join("×")))];
  if (!sizes.length) return "";
  const shown = [sizes[0]];
  if (sizes.length > 1 && `${sizes[0]}, ${sizes[1]}${sizes.length > 2 ? ", …" : ""}`.length <= max) shown.push(sizes[1]);
  const text = shown.length < sizes.length ? `${shown.join(", ")}, …` : shown.join(", ");
  return text.length <= max ? text : shortLabel(sizes[0], max);
}

/**
 * A pie label for a row grouped by input shape: its name and its sizes, each shortened on its own so that
 * both show within the pie's label width (the name in the middle, where operator names differ least).
 * @param {OperatorRow} row
 * @returns {string}
 */
export function shapedLabel(row) {
  const shape = row.input_shape ? shapeLabel(row.input_shape, SHAPE_CHARS) : "";
  if (!shape) return row.name;
  return `${shortLabel(row.name, LABEL_CHARS - shape.length - 1, "middle")} ${shape}`;
}

/** Characters of a pie label that the sizes may take (the rest is the operator's name). */
const SHAPE_CHARS = 18;

/**
 * The slices of one pie: the top N rows by `metric`, and Other.
 * @param {OperatorRow[]} rows
 * @param {string} metric e.g. "device_self_us"
 * @param {number} top
 */
export function operatorSlices(rows, metric, top) {
  return topSlices(rows.map((row) => ({
    key: rowKey(row),
    name: row.name,
    label: shapedLabel(row),
    value: row[metric],
    details: row.input_shape ? [`Input shape: ${row.input_shape}`] : [],
  })), top, "operators");
}

/**
 * The kernel view filtered to the kernels an operator (and the operators it called) launched.
 * @param {Selection} selection
 * @param {string} name
 * @returns {string}
 */
export function kernelsHref({ run, worker, span }, name) {
  return viewHref("kernels", { run, worker, span, group_by: "name_op", op: name });
}

/**
 * Columns of the operator table.
 * @param {"name"|"name_shape"} groupBy
 * @param {(row: OperatorRow) => Node|null} [actions] the last cell's content (links, buttons)
 * @returns {import("./lib/table.js").Column[]}
 */
export function operatorColumns(groupBy, actions) {
  const time = (/** @type {number} */ v) => formatUs(v);
  const ratio = (/** @type {number|null} */ v) => formatRatio(v);
  /** @type {import("./lib/table.js").Column[]} */
  const columns = [{ key: "name", label: "Name", truncate: true, cellClass: "cell-name" }];
  if (groupBy === "name_shape") {
    columns.push({ key: "input_shape", label: "Input Shape", truncate: true, cellClass: "cell-shape",
      title: "Dimensions of each input, as the profiler recorded them (record_shapes=True)" });
  }
  columns.push(
    { key: "calls", label: "Calls", numeric: true, format: (v) => formatCount(v) },
    { key: "device_self_us", label: "Device Self", numeric: true, format: time,
      title: "Time of the kernels, memcpys and memsets this operator launched itself" },
    { key: "device_total_us", label: "Device Total", numeric: true, format: time,
      title: "Device time of this operator and of the operators it called" },
    { key: "host_self_us", label: "Host Self", numeric: true, format: time,
      title: "Host (CPU) time of this operator, less the operators it called" },
    { key: "host_total_us", label: "Host Total", numeric: true, format: time,
      title: "Host (CPU) time of this operator, the operators it called included" },
    { key: "tc_eligible", label: "Tensor Cores Eligible", cellClass: "cell-flag", format: (v) => (v ? "Yes" : "No"),
      sortValue: (row) => (row.tc_eligible ? 1 : 0), title: "Whether this operator can run on tensor cores (e.g. matmul, convolution)" },
    { key: "tc_self_ratio", label: "Tensor Cores Self %", numeric: true, format: ratio,
      title: "Share of Device Self time in kernels that use tensor cores" },
    { key: "tc_total_ratio", label: "Tensor Cores Total %", numeric: true, format: ratio,
      title: "Share of Device Total time in kernels that use tensor cores" },
  );
  if (actions) columns.push({ key: "actions", label: "", sortable: false, cellClass: "cell-actions", render: actions });
  return columns;
}

// ---------------------------------------------------------------- draw

/**
 * @param {HTMLElement} node
 * @param {OperatorRow[]} rows
 * @param {number} top
 * @param {string} query
 */
async function drawPies(node, rows, top, query) {
  const pies = OPERATOR_PIES.map((pie) => ({ ...pie, ...operatorSlices(rows, pie.key, top) }));
  const colors = colorMap(pies.map((p) => p.slices));
  await Promise.all(pies.map(async (pie) => {
    const chart = byTestId(node, pie.testid);
    if (!pie.slices.length) {
      const what = pie.key.startsWith("device") ? "device" : "host";
      showEmpty(chart, query
        ? `No ${what} time in the operators matching “${query}”.`
        : `No ${what} time was recorded for any operator.`);
      return;
    }
    await draw(chart, [pieTrace(pie.slices, { colors, cut: "middle" })], pieLayout());
  }));
}

/**
 * Fetches and draws the operator view of one worker's span.
 * @param {HTMLElement} root the `[data-view="operators"]` section
 * @param {Selection & {group_by?: string, top?: string, q?: string, sort?: string, page?: string}} params
 * @param {{signal?: AbortSignal}} [context]
 */
export async function mount(root, params, { signal } = {}) {
  const groupBy = parseGroupBy(params.group_by);
  const state = rankedState(params, operatorColumns(groupBy), DEFAULT_SORT);
  /** @type {string|null} */ let selected = null;
  const ui = toolbar(root, groupBy, state);
  const pies = byTestId(root, "pies");
  const table = byTestId(root, "op-table");
  const panel = stackPanel(byTestId(root, "stack-panel"), (row, stackSignal) => fetchStacks(params, row, stackSignal),
    signal, (row) => {
      selected = row ? rowKey(/** @type {OperatorRow} */ (row)) : null;
      for (const tr of table.querySelectorAll("tr.row-selected")) tr.classList.remove("row-selected");
    });

  const data = await fetchOperators(params, groupBy, signal);
  if (signal && signal.aborted) return;
  const rows = data.rows || [];
  showWarnings(byTestId(root, "warnings"), data.warnings || []);

  /** @param {OperatorRow} row */
  const actions = (row) => {
    const kernels = row.device_total_us > 0
      ? el("a", { class: "action-link", text: "Kernels", testid: "kernels-link",
        title: "The kernels this operator and the operators it called launched", attrs: { href: kernelsHref(params, row.name) } })
      : null;
    /** @type {HTMLElement|null} */ let stacks = null;
    if (row.has_call_stack) {
      stacks = el("button", { class: "action-button", text: "Call stacks", testid: "stacks-button",
        attrs: { type: "button", "aria-haspopup": "dialog" } });
      const button = stacks;
      button.addEventListener("click", () => {
        panel.open(row, button);
        const tr = button.closest("tr");
        if (tr) tr.classList.add("row-selected");
      });
    }
    const trace = el("a", { class: "action-link", text: "Trace", testid: "trace-link",
      title: "Find this operator's calls in the trace view", attrs: { href: traceHref(params, { q: row.name }) } });
    return el("span", { class: "actions" }, [kernels, stacks, trace]);
  };
  const columns = operatorColumns(groupBy, actions);

  const drawTable = () => drawRankedTable({
    node: table,
    count: ui.count,
    rows,
    state,
    columns,
    noun: groupBy === "name_shape" ? "operator + input shape rows" : "operators",
    caption: "Operators",
    thing: "operator",
    noRows: "No operators were recorded in this trace.",
    rowClass: (row) => (selected !== null && rowKey(row) === selected ? "row-selected" : ""),
  });
  const redraw = () => drawPies(pies, filterRows(rows, state.query), state.top, state.query.trim());
  wireToolbar(ui, state, { drawTable, drawPies: redraw, signal });
  drawTable();
  await redraw();
}
