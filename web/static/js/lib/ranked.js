/**
 * Ranked views (Operator, Kernel): a toolbar of Group by, Top N and Search over top-N pies and a
 * searchable, sortable, paginated table. Their state lives in the URL: `group_by`, `top`, `q`,
 * `sort`, `page`. The view draws its own pies; this module wires the rest.
 * @module lib/ranked
 */

import { byTestId, el } from "./dom.js";
import { formatCount } from "./format.js";
import { DEFAULT_TOP, parseTop } from "./pie.js";
import { PAGE_SIZE, buildTable, filterRows, parseSort, sortToText } from "./table.js";
import { navigate, updateQuery } from "./url.js";

const SEARCH_DELAY_MS = 150;

/**
 * @typedef {{top: number, query: string, sort: import("./table.js").Sort, page: number}} RankedState
 * @typedef {{groupBy: HTMLSelectElement, top: HTMLInputElement, search: HTMLInputElement, count: HTMLElement}} Toolbar
 */

/**
 * The view state a URL asks for.
 * @param {Record<string, string|undefined>} params the query string
 * @param {import("./table.js").Column[]} columns
 * @param {import("./table.js").Sort} defaultSort
 * @returns {RankedState}
 */
export function rankedState(params, columns, defaultSort) {
  return {
    top: parseTop(params.top),
    query: params.q || "",
    sort: parseSort(params.sort, columns) || defaultSort,
    page: Number(params.page) || 1,
  };
}

/**
 * The toolbar's controls and the row count inside `root`, set to `groupBy` and `state`.
 * @param {HTMLElement} root
 * @param {string} groupBy
 * @param {RankedState} state
 * @returns {Toolbar}
 */
export function toolbar(root, groupBy, state) {
  const ui = {
    groupBy: /** @type {HTMLSelectElement} */ (byTestId(root, "group-by")),
    top: /** @type {HTMLInputElement} */ (byTestId(root, "top-n")),
    search: /** @type {HTMLInputElement} */ (byTestId(root, "search")),
    count: byTestId(root, "row-count"),
  };
  ui.groupBy.value = groupBy;
  ui.top.value = String(state.top);
  ui.search.value = state.query;
  return ui;
}

/**
 * Draws the rows matching the search as a paginated table into `node`, and their count.
 * @param {object} options
 * @param {HTMLElement} options.node where the table goes
 * @param {HTMLElement} options.count where "12 of 76 operators match “conv”" goes
 * @param {any[]} options.rows every row
 * @param {RankedState} options.state updated as the user sorts and pages
 * @param {import("./table.js").Column[]} options.columns
 * @param {string} options.noun plural, e.g. "operators"
 * @param {string} options.caption the table's accessible caption
 * @param {string} options.noRows shown when there are no rows at all
 * @param {string} options.thing singular, e.g. "operator", for "No operator name contains …"
 * @param {(row: any) => string} [options.rowClass]
 * @returns {any[]} the rows shown
 */
export function drawRankedTable({ node, count, rows, state, columns, noun, caption, noRows, thing, rowClass }) {
  const shown = filterRows(rows, state.query);
  count.textContent = state.query
    ? `${formatCount(shown.length)} of ${formatCount(rows.length)} ${noun} match “${state.query}”`
    : `${formatCount(rows.length)} ${noun}`;
  if (!shown.length) {
    const text = rows.length ? `No ${thing} name contains “${state.query}”.` : noRows;
    node.replaceChildren(el("p", { class: "empty", testid: "table-empty", text }));
    return shown;
  }
  node.replaceChildren(buildTable({
    caption,
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
    rowClass,
  }));
  return shown;
}

/**
 * Wires the toolbar: search (debounced) redraws table and pies, Top N redraws the pies, Group by
 * asks the server for new rows (a new history entry; the shell mounts the view again).
 * @param {Toolbar} ui
 * @param {RankedState} state
 * @param {{drawTable: () => void, drawPies: () => unknown, signal?: AbortSignal}} hooks
 */
export function wireToolbar(ui, state, { drawTable, drawPies, signal }) {
  let searchTimer = 0;
  ui.search.addEventListener("input", () => {
    window.clearTimeout(searchTimer);
    searchTimer = window.setTimeout(() => {
      state.query = ui.search.value;
      state.page = 1;
      updateQuery({ q: state.query || null, page: null });
      drawTable();
      drawPies();
    }, SEARCH_DELAY_MS);
  }, { signal });
  ui.top.addEventListener("change", () => {
    state.top = parseTop(ui.top.value);
    ui.top.value = String(state.top);
    updateQuery({ top: state.top === DEFAULT_TOP ? null : String(state.top) });
    drawPies();
  }, { signal });
  ui.groupBy.addEventListener("change", () => {
    navigate({ group_by: ui.groupBy.value === "name" ? null : ui.groupBy.value, page: null });
  }, { signal });
  if (signal) signal.addEventListener("abort", () => window.clearTimeout(searchTimer));
}
