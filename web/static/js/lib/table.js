/**
 * A small sortable table, optionally paginated. Cells are written with `textContent` only
 * (or as nodes a column builds with `lib/dom.js`).
 * @module lib/table
 */

import { el } from "./dom.js";
import { formatBytes, formatCount, formatRatio, formatUs } from "./format.js";

/**
 * @typedef {object} Column
 * @property {string} key field of the row object
 * @property {string} label header text
 * @property {(value: any, row: any) => string} [format] cell text (default: String(value))
 * @property {(row: any) => (number|string|null)} [sortValue] what sorting compares (default: the field)
 * @property {boolean} [numeric] right-aligned, sorts descending first
 * @property {(row: any) => Node|null} [decorate] optional node put before the text (e.g. a colour swatch)
 * @property {(row: any) => (Node|string|null)} [render] the cell's content, instead of the formatted text
 * @property {boolean} [truncate] one line cut with an ellipsis by CSS; the full text is the cell's tooltip
 * @property {boolean} [sortable] false: a plain header (e.g. an actions column); default true
 * @property {string} [cellClass] extra class of the column's cells (header included)
 * @property {string} [title] header tooltip
 */

/** @param {string} key @param {string} label @param {string} [title] @returns {Column} a time column (us in, units out) */
export const timeColumn = (key, label, title) => ({ key, label, numeric: true, format: (v) => formatUs(v), title });
/** @param {string} key @param {string} label @param {string} [title] @returns {Column} a count column */
export const countColumn = (key, label, title) => ({ key, label, numeric: true, format: (v) => formatCount(v), title });
/** @param {string} key @param {string} label @param {string} [title] @returns {Column} a size column (bytes) */
export const bytesColumn = (key, label, title) => ({ key, label, numeric: true, format: (v) => formatBytes(v), title });
/** @param {string} key @param {string} label @param {string} [title] @returns {Column} a 0..1 share column */
export const ratioColumn = (key, label, title) => ({ key, label, numeric: true, format: (v) => formatRatio(v), title });

/**
 * Say, in place of a table, why there is none.
 * @param {HTMLElement} node @param {string} text @param {string} [testid]
 */
export function emptyText(node, text, testid) {
  node.replaceChildren(el("p", { class: "empty", text, testid }));
}

/** Rows a page shows when a table is paginated and the caller does not say. */
export const PAGE_SIZE = 50;

/**
 * @typedef {object} Sort
 * @property {string} key
 * @property {boolean} desc
 */

/**
 * Parses "key" / "key:desc" / "key:asc" (as kept in the URL).
 * @param {string|null|undefined} text
 * @param {Column[]} columns
 * @returns {Sort|null}
 */
export function parseSort(text, columns) {
  if (!text) return null;
  const [key, dir] = text.split(":");
  const column = columns.find((c) => c.key === key);
  if (!column) return null;
  return { key, desc: dir ? dir === "desc" : Boolean(column.numeric) };
}

/**
 * The URL form of a sort.
 * @param {Sort} sort
 * @returns {string}
 */
export function sortToText(sort) {
  return `${sort.key}:${sort.desc ? "desc" : "asc"}`;
}

/**
 * Rows sorted by one column; nulls last, numbers numerically, text naturally ("step 10" after "step 9").
 * @param {any[]} rows
 * @param {Column[]} columns
 * @param {Sort|null} sort
 * @returns {any[]}
 */
export function sortRows(rows, columns, sort) {
  if (!sort) return rows.slice();
  const column = columns.find((c) => c.key === sort.key);
  if (!column) return rows.slice();
  const value = column.sortValue || ((row) => row[column.key]);
  const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });
  const sign = sort.desc ? -1 : 1;
  return rows
    .map((row, index) => ({ row, index, v: value(row) }))
    .sort((a, b) => {
      const an = a.v === null || a.v === undefined;
      const bn = b.v === null || b.v === undefined;
      if (an || bn) return an === bn ? a.index - b.index : an ? 1 : -1;
      const order = typeof a.v === "number" && typeof b.v === "number" ? a.v - b.v : collator.compare(String(a.v), String(b.v));
      return order === 0 ? a.index - b.index : sign * order;
    })
    .map((item) => item.row);
}

/**
 * Rows whose text (by `textOf`, default the `name` field) contains `query`, ignoring case.
 * An empty or blank query keeps every row.
 * @template T
 * @param {T[]} rows
 * @param {string|null|undefined} query
 * @param {(row: T) => string} [textOf]
 * @returns {T[]}
 */
export function filterRows(rows, query, textOf = (row) => /** @type {any} */ (row).name) {
  const needle = (query || "").trim().toLowerCase();
  if (!needle) return rows.slice();
  return rows.filter((row) => String(textOf(row) ?? "").toLowerCase().includes(needle));
}

/**
 * The page to show of `total` rows: `page` (1-based, from the URL, so possibly junk) clamped into
 * range, the page count and the [start, end) row indexes.
 * @param {number} total
 * @param {number|string|null|undefined} page
 * @param {number} [pageSize]
 * @returns {{page: number, pages: number, start: number, end: number}}
 */
export function pageRange(total, page, pageSize = PAGE_SIZE) {
  const size = Math.max(1, Math.floor(pageSize));
  const pages = Math.max(1, Math.ceil(Math.max(0, total) / size));
  const wanted = Math.floor(Number(page));
  const current = Number.isFinite(wanted) ? Math.min(Math.max(1, wanted), pages) : 1;
  const start = total > 0 ? (current - 1) * size : 0;
  return { page: current, pages, start, end: Math.min(Math.max(0, total), start + size) };
}

/**
 * The pager's count: "51–100 of 1,234", or "No rows".
 * @param {{start: number, end: number}} range from {@link pageRange}
 * @param {number} total
 * @returns {string}
 */
export function rangeText({ start, end }, total) {
  if (!(total > 0)) return "No rows";
  const count = (/** @type {number} */ n) => n.toLocaleString("en-US");
  return `${count(start + 1)}–${count(end)} of ${count(total)}`;
}

/**
 * Builds a table element; clicking a header sorts by it (again: reverses).
 * @param {object} options
 * @param {Column[]} options.columns
 * @param {any[]} options.rows
 * @param {Sort|null} [options.sort] initial sort (null: rows as given)
 * @param {(sort: Sort) => void} [options.onSort] told about every new sort (e.g. to keep it in the URL)
 * @param {any} [options.footer] a row object shown last, never sorted (e.g. an average)
 * @param {string} [options.caption] accessible caption
 * @param {number} [options.pageSize] rows per page; paginates when given (a pager under the table)
 * @param {number|string} [options.page] the 1-based page shown first (clamped)
 * @param {(page: number) => void} [options.onPage] told about every page change (sorting goes back to page 1)
 * @param {(row: any) => string} [options.rowClass] extra class of a body row (e.g. the selected one)
 * @param {string} [options.testid] `data-testid` of the returned element
 * @returns {HTMLElement} a scrollable wrapper holding the table; with paging, a block holding that
 *   wrapper and the pager
 */
export function buildTable({
  columns, rows, sort = null, onSort, footer, caption, pageSize, page = 1, onPage, rowClass, testid,
}) {
  let current = sort;
  let currentPage = pageSize ? pageRange(rows.length, page, pageSize).page : 1;
  const table = el("table", { class: "data-table" });
  if (caption) table.append(el("caption", { class: "visually-hidden", text: caption }));
  const headRow = el("tr");
  table.append(el("thead", {}, [headRow]));
  const body = el("tbody");
  table.append(body);

  /** @param {Column} column */
  const cellClass = (column) => [column.numeric ? "num" : "", column.cellClass || ""].filter(Boolean).join(" ");

  const headers = columns.map((column) => {
    const sortable = column.sortable !== false;
    const label = sortable
      ? el("button", { class: "sort-button", text: column.label, attrs: { type: "button" } })
      : column.label;
    const th = el("th", { class: cellClass(column), title: column.title || "", attrs: { scope: "col" } }, [label]);
    if (typeof label !== "string") {
      // On the whole cell, not only its label: a click on the padding beside the text sorts too. The
      // button keeps the header reachable by keyboard; its click comes here by bubbling.
      th.classList.add("sortable");
      th.addEventListener("click", () => {
        const desc = current && current.key === column.key ? !current.desc : Boolean(column.numeric);
        current = { key: column.key, desc };
        const pageChanged = currentPage !== 1;
        currentPage = 1;
        render();
        if (onSort) onSort(current);
        if (pageChanged && onPage) onPage(currentPage);
      });
    }
    headRow.append(th);
    return th;
  });

  /** @param {any} row @param {string} [cls] */
  const makeRow = (row, cls) => el("tr", { class: cls || "" }, columns.map((column) => {
    const value = row[column.key];
    if (column.render) return el("td", { class: cellClass(column) }, [column.render(row)]);
    const text = column.format ? column.format(value, row) : value === null || value === undefined ? "" : String(value);
    const decoration = column.decorate ? column.decorate(row) : null;
    if (column.truncate) {
      return el("td", { class: cellClass(column) }, [decoration, el("span", { class: "truncate", text, title: text })]);
    }
    return el("td", { class: cellClass(column) }, [decoration, text]);
  }));

  /** @type {HTMLElement|null} */ let pager = null;
  /** @type {Record<string, HTMLButtonElement>} */ const pagerButtons = {};
  /** @type {HTMLElement|null} */ let pagerText = null;
  if (pageSize) {
    /** @param {string} name @param {string} text @param {string} label @param {(range: {page: number, pages: number}) => number} target */
    const pagerButton = (name, text, label, target) => {
      const button = /** @type {HTMLButtonElement} */ (el("button", {
        class: "pager-button", text, testid: `pager-${name}`, attrs: { type: "button", "aria-label": label },
      }));
      button.addEventListener("click", () => {
        const next = target(pageRange(rows.length, currentPage, pageSize));
        if (next === currentPage) return;
        currentPage = pageRange(rows.length, next, pageSize).page;
        render();
        if (onPage) onPage(currentPage);
      });
      pagerButtons[name] = button;
      return button;
    };
    pagerText = el("span", { class: "pager-range", testid: "pager-range", attrs: { "aria-live": "polite" } });
    pager = el("div", { class: "pager", testid: "pager", attrs: { role: "navigation", "aria-label": "Table pages" } }, [
      pagerButton("first", "«", "First page", () => 1),
      pagerButton("prev", "‹ Prev", "Previous page", (r) => r.page - 1),
      pagerText,
      pagerButton("next", "Next ›", "Next page", (r) => r.page + 1),
      pagerButton("last", "»", "Last page", (r) => r.pages),
    ]);
  }

  function render() {
    headers.forEach((th, i) => {
      if (columns[i].sortable === false) return;
      const active = current && current.key === columns[i].key;
      th.setAttribute("aria-sort", active ? (current.desc ? "descending" : "ascending") : "none");
    });
    let sorted = sortRows(rows, columns, current);
    if (pageSize) {
      const range = pageRange(sorted.length, currentPage, pageSize);
      currentPage = range.page;
      sorted = sorted.slice(range.start, range.end);
      if (pagerText) pagerText.textContent = rangeText(range, rows.length);
      pagerButtons.first.disabled = pagerButtons.prev.disabled = range.page <= 1;
      pagerButtons.next.disabled = pagerButtons.last.disabled = range.page >= range.pages;
    }
    body.replaceChildren(...sorted.map((row) => makeRow(row, rowClass ? rowClass(row) : "")));
  }
  render();
  if (footer) table.append(el("tfoot", {}, [makeRow(footer, "footer-row")]));
  const wrap = el("div", { class: "table-wrap" }, [table]);
  const out = pager ? el("div", { class: "table-block" }, [wrap, pager]) : wrap;
  if (testid) out.dataset.testid = testid;
  return out;
}
