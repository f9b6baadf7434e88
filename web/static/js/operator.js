/**
 * The Operator view: where host and device time goes per PyTorch operator (or per operator and
 * input shape), as four top-N pies and a sortable, paginated table, with each operator's call
 * stacks on demand and a link to the kernels it launched. Reads `/api/operators` and
 * `/api/operators/stacks`.
 *
 * Three layers: fetch (`fetchOperators`, `fetchStacks`), shape (pure functions from JSON to pie
 * slices, table columns and links, exported for reuse and tests) and draw (`mount` and the `draw*`
 * helpers). View state lives in the URL: `group_by`, `top`, `q`, `sort`, `page`.
 * @module operator
 */

import { getJSON, isAbort } from "./lib/api.js";
import { byTestId, clear, el, showWarnings } from "./lib/dom.js";
import { editorHref, frameCopyText, frameLocation, isAbsolutePath, isLibraryFrame } from "./lib/frames.js";
import { formatCount, formatRatio, formatUs } from "./lib/format.js";
import { draw, showEmpty } from "./lib/plot.js";
import { DEFAULT_TOP, colorMap, parseTop, pieLayout, pieTrace, topSlices } from "./lib/pie.js";
import { PAGE_SIZE, buildTable, filterRows, parseSort, sortToText } from "./lib/table.js";
import { navigate, updateQuery, viewHref } from "./lib/url.js";

/**
 * @typedef {{name: string, input_shape?: string, calls: number, device_self_us: number,
 *            device_total_us: number, host_self_us: number, host_total_us: number, tc_eligible: boolean,
 *            tc_self_ratio: number|null, tc_total_ratio: number|null, has_call_stack: boolean}} OperatorRow
 * @typedef {{group_by: "name"|"name_shape", rows: OperatorRow[], warnings: string[]}} Operators
 * @typedef {import("./lib/frames.js").Frame} Frame
 * @typedef {{calls: number, device_self_us: number, device_total_us: number, host_self_us: number,
 *            host_total_us: number, tc_self_ratio: number|null, tc_total_ratio: number|null,
 *            frames: Frame[]}} StackRow
 * @typedef {{name: string, input_shape: string|null, rows: StackRow[], warnings?: string[]}} Stacks
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
const SEARCH_DELAY_MS = 150;

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
 * The slices of one pie: the top N rows by `metric`, and Other.
 * @param {OperatorRow[]} rows
 * @param {string} metric e.g. "device_self_us"
 * @param {number} top
 */
export function operatorSlices(rows, metric, top) {
  return topSlices(rows.map((row) => ({
    key: rowKey(row),
    name: row.name,
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
  return viewHref("kernel", { run, worker, span, group_by: "name_op", op: name });
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

/**
 * The numbers shown above one call stack, as label/value pairs.
 * @param {StackRow} stack
 * @returns {[string, string][]}
 */
export function stackStats(stack) {
  /** @type {[string, string][]} */
  const out = [
    ["Calls", formatCount(stack.calls)],
    ["Device Self", formatUs(stack.device_self_us)],
    ["Device Total", formatUs(stack.device_total_us)],
    ["Host Self", formatUs(stack.host_self_us)],
    ["Host Total", formatUs(stack.host_total_us)],
  ];
  if (stack.tc_self_ratio !== null && stack.tc_self_ratio !== undefined) out.push(["Tensor Cores Self", formatRatio(stack.tc_self_ratio)]);
  if (stack.tc_total_ratio !== null && stack.tc_total_ratio !== undefined) out.push(["Tensor Cores Total", formatRatio(stack.tc_total_ratio)]);
  return out;
}

/**
 * How many frames of these stacks name their file by an absolute path, and how many by a relative
 * one (no editor link possible).
 * @param {StackRow[]} stacks
 * @returns {{absolute: number, relative: number}}
 */
export function pathKinds(stacks) {
  const out = { absolute: 0, relative: 0 };
  for (const stack of stacks) {
    for (const frame of stack.frames || []) {
      if (frame.file) out[isAbsolutePath(frame.file) ? "absolute" : "relative"] += 1;
    }
  }
  return out;
}

/**
 * The panel's note on paths without editor links, or null when every path is absolute.
 * @param {{absolute: number, relative: number}} kinds from {@link pathKinds}
 * @returns {string|null}
 */
export function relativePathNote({ absolute, relative }) {
  if (!relative) return null;
  const copy = "the Copy buttons still give path:line.";
  return absolute
    ? `Some file paths here are relative (to the working directory, or to Python's sys.path as PyTorch 2.x records them): they have no editor link; ${copy}`
    : `File paths here are relative to Python's sys.path (PyTorch 2.x records them so). Editor links need absolute paths; ${copy}`;
}

// ---------------------------------------------------------------- draw

/**
 * Copies `text`: the Clipboard API where the page may use it, else a hidden textarea and the copy
 * command, else selects `fallback` so that Ctrl+C copies what is shown.
 * @param {string} text
 * @param {HTMLElement} fallback
 * @returns {Promise<boolean>} whether the text reached the clipboard
 */
async function copyText(text, fallback) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // denied or unavailable: try the older ways
  }
  const area = /** @type {HTMLTextAreaElement} */ (el("textarea", { class: "visually-hidden", attrs: { readonly: "" } }));
  area.value = text;
  document.body.append(area);
  area.select();
  let copied = false;
  try {
    copied = document.execCommand("copy");
  } catch {
    copied = false;
  }
  area.remove();
  if (!copied) {
    const selection = window.getSelection();
    if (selection) selection.selectAllChildren(fallback);
  }
  return copied;
}

/**
 * One frame: location (a VS Code link for absolute paths), function, and a copy button.
 * @param {Frame} frame
 */
function frameItem(frame) {
  const location = frameLocation(frame);
  const href = editorHref(frame);
  const copy = frameCopyText(frame);
  /** @type {HTMLElement|null} */ let where = null;
  if (location) {
    where = href
      ? el("a", { class: "frame-loc", text: location, title: "Open in VS Code", testid: "frame-link", attrs: { href } })
      : el("span", { class: "frame-loc", text: location });
  }
  /** @type {HTMLElement|null} */ let button = null;
  if (copy && where) {
    const target = where;
    const copyButton = el("button", {
      class: "copy-button", text: "Copy", title: `Copy ${copy}`, testid: "copy-frame",
      attrs: { type: "button", "aria-label": `Copy ${copy}`, "data-copy": copy },
    });
    copyButton.addEventListener("click", async () => {
      const ok = await copyText(copy, target);
      copyButton.textContent = ok ? "Copied" : "Selected";
      copyButton.classList.add("copy-done");
      window.setTimeout(() => {
        copyButton.textContent = "Copy";
        copyButton.classList.remove("copy-done");
      }, 1500);
    });
    button = copyButton;
  }
  return el("li", { class: `frame${isLibraryFrame(frame) ? " frame-lib" : ""}`, testid: "frame" }, [
    el("span", { class: "frame-text" }, [
      where,
      where ? el("span", { class: "frame-sep", text: ": " }) : null,
      el("span", { class: "frame-fn", text: frame.function }),
    ]),
    button,
  ]);
}

/** @param {StackRow} stack @param {number} index @param {number} count */
function stackSection(stack, index, count) {
  const frames = stack.frames || [];
  return el("section", { class: "stack", testid: "stack" }, [
    el("div", { class: "stack-head" }, [
      el("span", { class: "stack-title", text: count > 1 ? `Stack ${index + 1} of ${count}` : "Stack" }),
      el("span", { class: "stack-sub", text: frames.length ? `${frames.length} frame${frames.length === 1 ? "" : "s"}, innermost first` : "" }),
    ]),
    el("dl", { class: "stack-stats" }, stackStats(stack).map(([label, value]) =>
      el("div", { class: "stat" }, [el("dt", { text: label }), el("dd", { text: value })]))),
    frames.length
      ? el("ol", { class: "frames" }, frames.map(frameItem))
      : el("p", { class: "empty", text: "No Python frames were recorded for these calls (called from C++, or profiled without with_stack=True)." }),
  ]);
}

/**
 * The call-stack panel of one view instance: open for a row, fetch, show, close.
 * @param {HTMLElement} panel the `stack-panel` element
 * @param {Selection} selection
 * @param {AbortSignal|undefined} mountSignal fires when the view is remounted
 * @param {(key: string|null) => void} onSelect told which row the panel shows (null: closed)
 */
function stackPanel(panel, selection, mountSignal, onSelect) {
  const title = byTestId(panel, "stack-title");
  const subtitle = byTestId(panel, "stack-subtitle");
  const body = byTestId(panel, "stack-body");
  const closeButton = byTestId(panel, "stack-close");
  /** @type {AbortController|null} */ let controller = null;
  /** @type {HTMLElement|null} */ let opener = null;

  function close() {
    if (controller) controller.abort();
    controller = null;
    panel.hidden = true;
    clear(body);
    onSelect(null);
    if (opener && opener.isConnected) opener.focus();
    opener = null;
  }

  /** @param {OperatorRow} row @param {HTMLElement} button */
  async function open(row, button) {
    if (controller) controller.abort();
    const local = new AbortController();
    controller = local;
    opener = button;
    onSelect(rowKey(row));
    title.textContent = row.name;
    title.title = row.name;
    subtitle.textContent = row.input_shape ? `Input shape ${row.input_shape}` : "";
    subtitle.hidden = !row.input_shape;
    body.replaceChildren(el("p", { class: "empty", testid: "stack-loading", text: "Loading call stacks…" }));
    panel.hidden = false;
    panel.setAttribute("aria-busy", "true");
    closeButton.focus();
    try {
      const data = await fetchStacks(selection, { name: row.name, input_shape: row.input_shape ?? null }, local.signal);
      if (local.signal.aborted) return;
      const stacks = data.rows || [];
      if (!stacks.length) {
        body.replaceChildren(
          ...(data.warnings || []).map((w) => el("p", { class: "note note-warn", testid: "stack-warning", text: w })),
          el("p", { class: "empty", text: "No call stacks were recorded for this operator." }),
        );
        return;
      }
      const note = relativePathNote(pathKinds(stacks));
      const notes = (data.warnings || []).map((w) => el("p", { class: "note note-warn", testid: "stack-warning", text: w }));
      if (note) notes.push(el("p", { class: "note note-info", testid: "stack-note", text: note }));
      body.replaceChildren(...notes, ...stacks.map((stack, i) => stackSection(stack, i, stacks.length)));
    } catch (err) {
      if (local.signal.aborted || isAbort(err)) return;
      body.replaceChildren(el("div", { class: "error-box", testid: "stack-error" }, [
        el("div", { class: "error-title", text: "The call stacks could not be loaded" }),
        el("div", { class: "error-message", text: err instanceof Error ? err.message : String(err) }),
      ]));
    } finally {
      if (controller === local) panel.removeAttribute("aria-busy");
    }
  }

  closeButton.addEventListener("click", close, { signal: mountSignal });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !panel.hidden) close();
  }, { signal: mountSignal });
  if (mountSignal) mountSignal.addEventListener("abort", () => { if (controller) controller.abort(); });
  // A remount (new run, span or grouping) starts with the panel closed.
  panel.hidden = true;
  clear(body);
  return { open, close };
}

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
 * @param {HTMLElement} root the `[data-view="operator"]` section
 * @param {Selection & {group_by?: string, top?: string, q?: string, sort?: string, page?: string}} params
 * @param {{signal?: AbortSignal}} [context]
 */
export async function mount(root, params, { signal } = {}) {
  const groupBy = parseGroupBy(params.group_by);
  const state = {
    top: parseTop(params.top),
    query: params.q || "",
    sort: parseSort(params.sort, operatorColumns(groupBy)) || DEFAULT_SORT,
    page: Number(params.page) || 1,
    /** @type {string|null} */ selected: null,
  };
  const ui = {
    groupBy: /** @type {HTMLSelectElement} */ (byTestId(root, "group-by")),
    top: /** @type {HTMLInputElement} */ (byTestId(root, "top-n")),
    search: /** @type {HTMLInputElement} */ (byTestId(root, "search")),
    pies: byTestId(root, "pies"),
    table: byTestId(root, "op-table"),
    count: byTestId(root, "row-count"),
  };
  ui.groupBy.value = groupBy;
  ui.top.value = String(state.top);
  ui.search.value = state.query;
  const panel = stackPanel(byTestId(root, "stack-panel"), params, signal, (key) => {
    state.selected = key;
    for (const tr of ui.table.querySelectorAll("tr.row-selected")) tr.classList.remove("row-selected");
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
    return el("span", { class: "actions" }, [kernels, stacks]);
  };
  const columns = operatorColumns(groupBy, actions);

  function drawTable() {
    const shown = filterRows(rows, state.query);
    const noun = groupBy === "name_shape" ? "operator + input shape rows" : "operators";
    ui.count.textContent = state.query
      ? `${formatCount(shown.length)} of ${formatCount(rows.length)} ${noun} match “${state.query}”`
      : `${formatCount(rows.length)} ${noun}`;
    if (!shown.length) {
      ui.table.replaceChildren(el("p", { class: "empty", testid: "table-empty", text: rows.length
        ? `No operator name contains “${state.query}”.`
        : "No operators were recorded in this trace." }));
      return shown;
    }
    ui.table.replaceChildren(buildTable({
      caption: "Operators",
      columns,
      rows: shown,
      sort: state.sort,
      pageSize: PAGE_SIZE,
      page: state.page,
      onSort: (sort) => {
        state.sort = sort;
        updateQuery({ sort: sortToText(sort) });
      },
      onPage: (page) => {
        state.page = page;
        updateQuery({ page: page === 1 ? null : String(page) });
      },
      rowClass: (row) => (state.selected !== null && rowKey(row) === state.selected ? "row-selected" : ""),
    }));
    return shown;
  }

  const redraw = () => drawPies(ui.pies, filterRows(rows, state.query), state.top, state.query.trim());

  let searchTimer = 0;
  ui.search.addEventListener("input", () => {
    window.clearTimeout(searchTimer);
    searchTimer = window.setTimeout(() => {
      state.query = ui.search.value;
      state.page = 1;
      updateQuery({ q: state.query || null, page: null });
      drawTable();
      redraw();
    }, SEARCH_DELAY_MS);
  }, { signal });
  ui.top.addEventListener("change", () => {
    state.top = parseTop(ui.top.value);
    ui.top.value = String(state.top);
    updateQuery({ top: state.top === DEFAULT_TOP ? null : String(state.top) });
    redraw();
  }, { signal });
  ui.groupBy.addEventListener("change", () => {
    // New rows from the server: a new history entry, and the shell mounts the view again.
    navigate({ group_by: ui.groupBy.value === "name" ? null : ui.groupBy.value, page: null });
  }, { signal });
  if (signal) signal.addEventListener("abort", () => window.clearTimeout(searchTimer));

  drawTable();
  await redraw();
}
