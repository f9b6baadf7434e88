/**
 * The Modules view (`modules`): nn.Module instances as an icicle (widths: device, host or backward device time)
 * and as a tree table with their numbers, and the main thread's operator tree. Reads `/api/modules`
 * and `/api/modules/optree`.
 *
 * Three layers: fetch (`fetchModules`, `fetchOpTree`), shape (pure functions in lib/moduleview.js
 * and lib/treetable.js) and draw (`mount` and the `draw*` helpers).
 * @module modules
 */

import { getJSON } from "./lib/api.js";
import {
  WIDTHS, backwardText, icicleChart, isMoreNode, moduleMeta, pickWidth, threadText, widthChoices,
} from "./lib/moduleview.js";
import { byTestId, el, showWarnings } from "./lib/dom.js";
import { formatCount, formatUs } from "./lib/format.js";
import { draw, showEmpty } from "./lib/plot.js";
import { countColumn, emptyText, timeColumn } from "./lib/table.js";
import { buildTreeTable } from "./lib/treetable.js";
import { updateQuery } from "./lib/url.js";

/**
 * @typedef {import("./lib/moduleview.js").Modules} Modules
 * @typedef {import("./lib/moduleview.js").OpTreeData} OpTreeData
 * @typedef {import("./lib/moduleview.js").Width} Width
 * @typedef {import("./lib/table.js").Column} Column
 * @typedef {import("./lib/treetable.js").TreeTable} TreeTable
 * @typedef {{run?: string, worker?: string, span?: string}} Selection
 */

/** Said where the icicle would be, for a trace without nn.Module events (the note above says how to record them). */
const NO_MODULES = "No nn.Module events in this trace, so there is no module hierarchy to draw.";

// ---------------------------------------------------------------- fetch

/**
 * @param {Selection} selection
 * @param {AbortSignal} [signal]
 * @returns {Promise<Modules>}
 */
export function fetchModules({ run, worker, span }, signal) {
  return getJSON("/api/modules", { run, worker, span }, signal);
}

/**
 * @param {Selection} selection
 * @param {AbortSignal} [signal]
 * @returns {Promise<OpTreeData>}
 */
export function fetchOpTree({ run, worker, span }, signal) {
  return getJSON("/api/modules/optree", { run, worker, span }, signal);
}

// ---------------------------------------------------------------- draw helpers


/**
 * Wires a card's Expand all / Collapse all buttons to a tree (hidden and disabled without one).
 * @param {HTMLElement} root
 * @param {string} part
 * @param {TreeTable|null} tree
 */
function wireTreeButtons(root, part, tree) {
  const expand = /** @type {HTMLButtonElement} */ (byTestId(root, `${part}-expand-all`));
  const collapse = /** @type {HTMLButtonElement} */ (byTestId(root, `${part}-collapse-all`));
  expand.disabled = collapse.disabled = !tree;
  /** @type {HTMLElement} */ (expand.parentElement).hidden = !tree;
  expand.onclick = tree ? () => tree.expandAll() : null;
  collapse.onclick = tree ? () => tree.collapseAll() : null;
}

/**
 * The module tree table. A module's name is a button that zooms the icicle onto it.
 * @param {HTMLElement} root
 * @param {Modules} data
 * @param {(id: string) => void} onFocus
 * @returns {TreeTable|null}
 */
function drawModuleTree(root, data, onFocus) {
  const node = byTestId(root, "modules");
  const modules = data.modules;
  byTestId(root, "modules-meta").textContent = moduleMeta(data);
  const backward = byTestId(root, "backward-summary");
  backward.textContent = backwardText(data.backward);
  backward.hidden = !backward.textContent;
  if (!modules.length) {
    node.replaceChildren(el("p", { class: "empty mod-empty", testid: "no-modules" }, [
      "This trace has no ", el("code", { text: "nn.Module" }), " events, so there is no module tree. Record it with ",
      el("code", { text: "with_stack=True" }), " (or ", el("code", { text: "with_modules=True" }),
      ") in ", el("code", { text: "torch.profiler.profile" }), ". The operator tree below works without them.",
    ]));
    return null;
  }
  /** @type {Column[]} */
  const columns = [
    countColumn("occurrences", "Occurrences", "Calls of this module instance from this place"),
    { key: "operators", label: "Operators", numeric: true,
      title: "Operator calls made by the module and its children (hover a cell: the module's own code alone)",
      render: (row) => el("span", { text: formatCount(row.operators),
        title: `${formatCount(row.self_operators)} from the module's own code` }) },
    timeColumn("host_total_us", "Host total", "The calls' durations on the CPU"),
    timeColumn("host_self_us", "Host self", "Host total less the child modules' calls"),
    timeColumn("device_total_us", "Device total", "GPU time launched by the module and its children"),
    timeColumn("device_self_us", "Device self", "GPU time launched by the module's own operators"),
    timeColumn("avg_host_total_us", "Avg host total", "Host total per occurrence"),
    timeColumn("avg_device_total_us", "Avg device total", "Device total per occurrence"),
  ];
  if (data.backward) {
    columns.push(timeColumn("backward_device_total_us", "Backward device total",
      "GPU time of the backward ranges autograd ran for the module and its children"));
  }
  const tree = buildTreeTable({
    caption: "nn.Module instances by call path",
    testid: "modules-table",
    nodes: modules,
    nameColumn: { key: "name", label: "Module", cellClass: "mod-name-col",
      render: (row) => el("span", { class: "mod-name-wrap" }, [
        el("button", { class: "mod-name", text: row.name, testid: "module-name",
          title: `Zoom the icicle onto ${row.name}`, attrs: { type: "button" } }),
        row.compiled_regions > 0 ? el("span", { class: "mod-badge", testid: "compiled-badge",
          text: `compiled ×${formatCount(row.compiled_regions)}`,
          title: `${formatCount(row.compiled_regions)} torch.compile region call(s) ran inside: the submodules `
            + "in compiled code record no module events, so their time is this module's self time" }) : null,
      ]) },
    columns,
  });
  tree.element.addEventListener("click", (event) => {
    const button = /** @type {Element} */ (event.target).closest(".mod-name");
    const tr = button && button.closest("tr");
    if (tr && tr.dataset.nodeId !== undefined) onFocus(tr.dataset.nodeId);
  });
  node.replaceChildren(tree.element);
  return tree;
}

/**
 * The main thread's operator tree.
 * @param {HTMLElement} root
 * @param {OpTreeData} data
 * @returns {TreeTable|null}
 */
function drawOpTree(root, data) {
  const node = byTestId(root, "optree");
  byTestId(root, "optree-meta").textContent = threadText(data);
  const truncated = byTestId(root, "optree-truncated");
  truncated.hidden = !data.truncated;
  truncated.textContent = data.truncated
    ? `The tree was cut to ${formatCount(data.nodes.length)} nodes: each "… N more" row sums the siblings left out.`
    : "";
  if (!data.nodes.length) {
    emptyText(node, "No operators on any thread of this trace.", "no-operators");
    return null;
  }
  const tree = buildTreeTable({
    caption: "The main thread's operators, annotations and modules, same-named siblings merged",
    testid: "optree-table",
    nodes: data.nodes,
    nameColumn: { key: "name", label: "Name", cellClass: "cell-mono" },
    columns: [
      countColumn("calls", "Calls", "Calls merged into this node (same name, same place)"),
      timeColumn("host_total_us", "Host total"),
      timeColumn("host_self_us", "Host self", "Host total less the children's and the node's own runtime calls"),
      timeColumn("device_total_us", "Device total"),
      timeColumn("device_self_us", "Device self", "GPU time launched by the node's own runtime calls"),
    ],
    rowClass: (row) => (isMoreNode(row) ? "mod-more" : ""),
  });
  node.replaceChildren(tree.element);
  return tree;
}

/**
 * Fills the width select and keeps the chosen width in the URL.
 * @param {HTMLElement} root
 * @param {Modules} data
 * @param {Width} width
 * @param {(width: Width) => void} onChange
 */
function drawWidthSelect(root, data, width, onChange) {
  const select = /** @type {HTMLSelectElement} */ (byTestId(root, "width-select"));
  select.replaceChildren(...widthChoices(data).map((c) => {
    const option = /** @type {HTMLOptionElement} */ (el("option", { text: c.label, title: c.title, attrs: { value: c.key } }));
    option.disabled = !c.available;
    return option;
  }));
  select.value = width;
  select.disabled = !data.modules.length;
  /** @type {HTMLElement} */ (select.closest(".control")).hidden = !data.modules.length;
  select.onchange = () => onChange(/** @type {Width} */ (select.value));
}

/**
 * Draws the icicle for one width (zoomed onto `level` when given); `onSector` hears of clicked sectors.
 * @param {HTMLElement} root
 * @param {Modules} data
 * @param {Width} width
 * @param {string|null} level
 * @param {(id: string) => void} onSector
 */
async function drawIcicle(root, data, width, level, onSector) {
  const chart = byTestId(root, "icicle");
  const meta = byTestId(root, "icicle-meta");
  byTestId(root, "icicle-hint").hidden = !data.modules.length;
  if (!data.modules.length) {
    meta.textContent = "";
    chart.style.height = "";
    showEmpty(chart, NO_MODULES);
    return;
  }
  const drawn = icicleChart(data, width, level);
  chart.dataset.width = width;
  if (!drawn) {
    meta.textContent = "";
    chart.style.height = "";
    showEmpty(chart, `No ${WIDTHS[width].label.toLowerCase()} was recorded for these modules.`);
    return;
  }
  const total = /** @type {number[]} */ (drawn.traces[0].values).reduce((a, b) => a + b, 0);
  meta.textContent = `${WIDTHS[width].label}: ${formatUs(total)} over ${formatCount(data.modules.length)} modules`;
  chart.style.height = `${drawn.height}px`;
  await draw(chart, drawn.traces, drawn.layout);
  const plotted = /** @type {any} */ (chart);
  // The chart div outlives a mount (Plotly.react reuses it): one listener, for this mount's data.
  plotted.removeAllListeners("plotly_click");
  plotted.on("plotly_click", (/** @type {any} */ event) => {
    const point = event && event.points && event.points[0];
    if (point && point.id !== undefined) onSector(String(point.id));
  });
}

// ---------------------------------------------------------------- mount

/**
 * Fetches and draws the Module view of one worker's span.
 * @param {HTMLElement} root the `[data-view="modules"]` section
 * @param {Selection & {width?: string}} params
 * @param {{signal?: AbortSignal}} [context]
 */
export async function mount(root, params, { signal } = {}) {
  const selection = { run: params.run, worker: params.worker, span: params.span };
  const [data, ops] = await Promise.all([fetchModules(selection, signal), fetchOpTree(selection, signal)]);
  if (signal && signal.aborted) return;
  // One note for both answers; the optree's "no operators" is said in its card too.
  showWarnings(byTestId(root, "warnings"), [...new Set([...(data.warnings || []), ...(ops.warnings || [])])]);

  let width = pickWidth(params.width, data);
  if (params.width && params.width !== width) updateQuery({ width: null });
  const chart = byTestId(root, "icicle");
  /** @type {TreeTable|null} */ let modules = null;
  // A module picked in the icicle (Plotly zooms onto it) or the table: its row opens, selected.
  const onSector = (/** @type {string} */ id) => {
    const found = data.modules.find((m) => String(m.id) === id);
    if (found && modules) modules.reveal(found.id);
  };
  /** @param {string|null} level */
  const redraw = (level) => drawIcicle(root, data, width, level, onSector);

  drawWidthSelect(root, data, width, (next) => {
    width = next;
    updateQuery({ width: next });
    // Keep the zoom Plotly's clicks made (it writes them to the trace's `level`).
    redraw(zoomedOn(chart));
  });
  modules = drawModuleTree(root, data, (id) => {
    onSector(id);
    redraw(id);
    chart.scrollIntoView({ block: "nearest" });
  });
  wireTreeButtons(root, "modules", modules);
  wireTreeButtons(root, "optree", drawOpTree(root, ops));
  await redraw(null);
}

/**
 * The module the icicle is zoomed onto (by a click in it, or from the table), or null.
 * @param {HTMLElement} chart
 * @returns {string|null}
 */
function zoomedOn(chart) {
  const data = /** @type {any} */ (chart).data;
  const level = Array.isArray(data) && data[0] ? data[0].level : null;
  return level === undefined || level === null || level === "" ? null : String(level);
}
