/**
 * The Memory view's tables, as pure shaping: columns of the events table (allocations paired with
 * their frees) and of the per-operator statistics, the "—" cells that say why a value is absent,
 * the links into the Trace and Operator views, and the count lines.
 * @module lib/memtables
 */

import { el } from "./dom.js";
import { NA, formatBytes, formatCount, formatOffset, formatUs } from "./format.js";
import { traceHref, viewHref } from "./url.js";

/**
 * @typedef {{operator: string|null, size_bytes: number, alloc_us: number|null, free_us: number|null,
 *            lifetime_us: number|null, addr: number, op_id: number|null, caller_id: number|null}} EventRow
 * @typedef {{name: string, calls: number, size_increase_bytes: number, self_size_increase_bytes: number,
 *            allocation_count: number, self_allocation_count: number, allocation_size_bytes: number,
 *            self_allocation_size_bytes: number}} StatRow
 * @typedef {{run?: string, worker?: string, span?: string}} Selection
 */

/** The trace view's window around an allocation that has no operator to select (us each side). */
const TRACE_CONTEXT_US = 500;

export const ABSENT = "—";
export const WHY = Object.freeze({
  unseenAlloc: "The trace did not see this allocation: it was made before profiling started; only its release was recorded.",
  neverFreed: "Never freed in the trace: still allocated when profiling stopped.",
  noOperator: "Allocated outside any operator (e.g. directly inside a step, the DataLoader or an optimizer step).",
});


/**
 * A cell for a value the trace lacks: a dash whose tooltip says why.
 * @param {string} why
 * @returns {HTMLElement}
 */
function absent(why) {
  return el("span", { class: "mem-absent", text: ABSENT, title: why, attrs: { "aria-label": `none: ${why}` } });
}

/**
 * Why an event row lacks its operator / allocation time / release time / lifetime (null: it has it).
 * @param {EventRow} row
 * @param {"operator"|"alloc_us"|"free_us"|"lifetime_us"} key
 * @returns {string|null}
 */
export function missingReason(row, key) {
  const unseen = row.alloc_us === null || row.alloc_us === undefined;
  const open = row.free_us === null || row.free_us === undefined;
  if (key === "operator") return row.operator ? null : unseen ? WHY.unseenAlloc : WHY.noOperator;
  if (key === "alloc_us") return unseen ? WHY.unseenAlloc : null;
  if (key === "free_us") return open ? WHY.neverFreed : null;
  if (row.lifetime_us !== null && row.lifetime_us !== undefined) return null;
  return unseen ? WHY.unseenAlloc : WHY.neverFreed;
}

/**
 * Where an event row's "Trace" link goes: the allocating operator selected (the trace view zooms
 * to it), else a window around the allocation (or the release, for an unseen allocation).
 * @param {Selection} sel
 * @param {EventRow} row
 * @returns {string|null}
 */
export function eventTraceHref(sel, row) {
  if (row.op_id !== null && row.op_id !== undefined) return traceHref(sel, { select: row.op_id });
  const t = row.alloc_us ?? row.free_us;
  if (typeof t !== "number") return null;
  const round = (/** @type {number} */ v) => Math.round(v * 1000) / 1000;
  return traceHref(sel, { start_us: round(t - TRACE_CONTEXT_US), end_us: round(t + TRACE_CONTEXT_US) });
}

/**
 * The events table's columns; times are offsets from the trace start.
 * @param {Selection} sel
 * @param {number} origin
 * @returns {import("./lib/table.js").Column[]}
 */
export function eventColumns(sel, origin) {
  /** @param {"alloc_us"|"free_us"} key */
  const time = (key) => (/** @type {EventRow} */ row) => {
    const why = missingReason(row, key);
    return why ? absent(why) : formatOffset(/** @type {number} */ (row[key]) - origin);
  };
  return [
    { key: "operator", label: "Operator", cellClass: "cell-name mem-op",
      title: "The operator that allocated; a factory such as aten::empty shows its caller: “caller (aten::empty)”",
      render: (row) => {
        const why = missingReason(row, "operator");
        return why ? absent(why) : el("span", { class: "truncate", text: row.operator, title: row.operator });
      } },
    { key: "size_bytes", label: "Size", numeric: true, format: (v) => formatBytes(v) },
    { key: "alloc_us", label: "Allocation Time", numeric: true, render: time("alloc_us"),
      title: "When it was allocated, since the trace start" },
    { key: "free_us", label: "Release Time", numeric: true, render: time("free_us"),
      title: "When it was freed, since the trace start" },
    { key: "lifetime_us", label: "Lifetime", numeric: true,
      render: (row) => {
        const why = missingReason(row, "lifetime_us");
        return why ? absent(why) : formatUs(row.lifetime_us);
      } },
    { key: "addr", label: "Address", cellClass: "cell-dims", format: (v) => formatAddress(v),
      title: "The allocation's device address" },
    { key: "actions", label: "", sortable: false, cellClass: "cell-actions", render: (row) => {
      const href = eventTraceHref(sel, row);
      return href ? el("a", { class: "action-link", text: "Trace", testid: "trace-link", attrs: { href },
        title: row.op_id !== null ? "Select the allocating operator in the trace view" : "Open the trace view at this time" }) : null;
    } },
  ];
}

/**
 * An address as hex ("0x7f0a1c000000"); n/a when absent.
 * @param {number|null|undefined} addr
 * @returns {string}
 */
export function formatAddress(addr) {
  return typeof addr === "number" && Number.isFinite(addr) && addr >= 0 ? `0x${addr.toString(16)}` : NA;
}

/**
 * The statistics table's columns; names link to the Operator view searching for them.
 * @param {Selection} sel
 * @returns {import("./lib/table.js").Column[]}
 */
export function statColumns(sel) {
  const { run, worker, span } = sel;
  const bytes = (/** @type {number} */ v) => formatBytes(v);
  const count = (/** @type {number} */ v) => formatCount(v);
  return [
    { key: "name", label: "Name", cellClass: "cell-name", render: (row) => el("a", {
      class: "mem-op-link truncate", text: row.name, testid: "op-link", title: `${row.name}: open in the Operator view`,
      attrs: { href: viewHref("operators", { run, worker, span, q: row.name }) } }) },
    { key: "calls", label: "Calls", numeric: true, format: count, title: "Calls of the operator that overlap the range" },
    { key: "size_increase_bytes", label: "Size Increase", numeric: true, format: bytes,
      title: "Bytes allocated less bytes freed, by the operator and the operators it called" },
    { key: "self_size_increase_bytes", label: "Self Size Increase", numeric: true, format: bytes,
      title: "Bytes allocated less bytes freed by the operator itself" },
    { key: "allocation_count", label: "Allocation Count", numeric: true, format: count,
      title: "Allocations by the operator and the operators it called" },
    { key: "self_allocation_count", label: "Self Allocation Count", numeric: true, format: count,
      title: "Allocations by the operator itself" },
    { key: "allocation_size_bytes", label: "Allocation Size", numeric: true, format: bytes,
      title: "Bytes allocated by the operator and the operators it called (frees ignored)" },
    { key: "self_allocation_size_bytes", label: "Self Allocation Size", numeric: true, format: bytes,
      title: "Bytes allocated by the operator itself (frees ignored)" },
    { key: "actions", label: "", sortable: false, cellClass: "cell-actions", render: (row) => el("a", {
      class: "action-link", text: "Trace", testid: "trace-link", title: "Find this operator's calls in the trace view",
      attrs: { href: traceHref(sel, { q: row.name }) } }) },
  ];
}

/**
 * The events table's count line.
 * @param {number} shown rows matching the search
 * @param {number} received rows the API sent
 * @param {number} total rows in the range
 * @param {string} query
 * @returns {string}
 */
export function eventsCountText(shown, received, total, query) {
  const noun = (/** @type {number} */ n) => `allocation${n === 1 ? "" : "s"}`;
  const base = received < total
    ? `first ${formatCount(received)} of ${formatCount(total)} ${noun(total)}`
    : `${formatCount(total)} ${noun(total)}`;
  return query.trim() ? `${formatCount(shown)} of ${base} match “${query.trim()}”` : base.replace(/^first/, "Showing the first");
}
