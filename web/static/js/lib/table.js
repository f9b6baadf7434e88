/**
 * A small sortable table. Cells are written with `textContent` only.
 * @module lib/table
 */

import { el } from "./dom.js";

/**
 * @typedef {object} Column
 * @property {string} key field of the row object
 * @property {string} label header text
 * @property {(value: any, row: any) => string} [format] cell text (default: String(value))
 * @property {(row: any) => (number|string|null)} [sortValue] what sorting compares (default: the field)
 * @property {boolean} [numeric] right-aligned, sorts descending first
 * @property {(row: any) => Node|null} [decorate] optional node put before the text (e.g. a colour swatch)
 * @property {string} [title] header tooltip
 */

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
 * Builds a table element; clicking a header sorts by it (again: reverses).
 * @param {object} options
 * @param {Column[]} options.columns
 * @param {any[]} options.rows
 * @param {Sort|null} [options.sort] initial sort (null: rows as given)
 * @param {(sort: Sort) => void} [options.onSort] told about every new sort (e.g. to keep it in the URL)
 * @param {any} [options.footer] a row object shown last, never sorted (e.g. an average)
 * @param {string} [options.caption] accessible caption
 * @returns {HTMLElement} a scrollable wrapper holding the table
 */
export function buildTable({ columns, rows, sort = null, onSort, footer, caption }) {
  let current = sort;
  const table = el("table", { class: "data-table" });
  if (caption) table.append(el("caption", { class: "visually-hidden", text: caption }));
  const headRow = el("tr");
  table.append(el("thead", {}, [headRow]));
  const body = el("tbody");
  table.append(body);

  const headers = columns.map((column) => {
    const button = el("button", { class: "sort-button", text: column.label, attrs: { type: "button" } });
    const th = el("th", { class: column.numeric ? "num" : "", title: column.title || "", attrs: { scope: "col" } }, [button]);
    button.addEventListener("click", () => {
      const desc = current && current.key === column.key ? !current.desc : Boolean(column.numeric);
      current = { key: column.key, desc };
      render();
      if (onSort) onSort(current);
    });
    headRow.append(th);
    return th;
  });

  /** @param {any} row @param {string} [cls] */
  const makeRow = (row, cls) => el("tr", { class: cls || "" }, columns.map((column) => {
    const value = row[column.key];
    const text = column.format ? column.format(value, row) : value === null || value === undefined ? "" : String(value);
    const decoration = column.decorate ? column.decorate(row) : null;
    return el("td", { class: column.numeric ? "num" : "" }, [decoration, text]);
  }));

  function render() {
    headers.forEach((th, i) => {
      const active = current && current.key === columns[i].key;
      th.setAttribute("aria-sort", active ? (current.desc ? "descending" : "ascending") : "none");
    });
    body.replaceChildren(...sortRows(rows, columns, current).map((row) => makeRow(row)));
  }
  render();
  if (footer) table.append(el("tfoot", {}, [makeRow(footer, "footer-row")]));
  return el("div", { class: "table-wrap" }, [table]);
}
