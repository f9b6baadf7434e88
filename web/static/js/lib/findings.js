/**
 * Recommendations ("findings") as the Overview panel and the Recommendations view show them:
 * severity order, or saving order with what fixing each would save, one readable line per
 * evidence item, where each evidence item opens the Trace (or Operator) view, and the measured
 * numbers beside the thresholds they were judged by.
 *
 * Built for the general shape of a finding (README, `/api/recommendations`), not for particular
 * rules: evidence items carry a `kind`, a `label`, `start_us`/`end_us` on the trace clock, an
 * `event_id` where one event is the culprit, and any other fields (`op`, `frame`, `*_us`, lists).
 * @module lib/findings
 */

import { el } from "./dom.js";
import { fieldLabel, formatField, formatRatio, formatUs } from "./format.js";
import { traceHref, viewHref } from "./url.js";
import { windowAround } from "./viewport.js";

/**
 * @typedef {{run?: string, worker?: string, span?: string}} Selection
 * @typedef {{kind: string, label?: string, start_us?: number, end_us?: number, event_id?: number,
 *            [key: string]: any}} Evidence
 * @typedef {"high"|"medium"|"low"} Severity
 * @typedef {{id: string, severity: Severity, title: string, detail: string,
 *            numbers?: Record<string, any>, thresholds?: Record<string, any>, evidence: Evidence[],
 *            saving_us?: number|null, saving_ratio?: number|null, saving_note?: string,
 *            included_in?: string}} Finding
 * @typedef {{key: string, label: string, value: string|null, thresholds: {label: string, value: string}[]}} MeasureRow
 */

/** The severities, most severe first. */
export const SEVERITIES = /** @type {Severity[]} */ (["high", "medium", "low"]);

/** Fields of an evidence item that say where it is, not what was measured: never listed as text. */
const PLACE_KEYS = new Set(["kind", "label", "start_us", "end_us", "event_id"]);

/** Fields that name what an evidence item is about: left out of its line when its label names them. */
const IDENTITY_KEYS = new Set(["step", "device", "rank", "stream"]);

/**
 * Findings, most severe first (stable within a severity; unknown severities last).
 * @param {Finding[]} findings
 * @returns {Finding[]}
 */
export function sortFindings(findings) {
  const rank = (/** @type {string} */ s) => (SEVERITIES.includes(/** @type {Severity} */ (s)) ? SEVERITIES.indexOf(/** @type {Severity} */ (s)) : SEVERITIES.length);
  return findings
    .map((f, i) => ({ f, i }))
    .sort((a, b) => rank(a.f.severity) - rank(b.f.severity) || a.i - b.i)
    .map(({ f }) => f);
}

/**
 * Findings, largest saving first (none counts as 0), ties in severity order (as the API orders
 * them: severity follows the saving's share of the step).
 * @param {Finding[]} findings
 * @returns {Finding[]}
 */
export function sortBySaving(findings) {
  const saving = (/** @type {Finding} */ f) => (Number.isFinite(f.saving_us) ? /** @type {number} */ (f.saving_us) : 0);
  const bySeverity = sortFindings(findings);
  return bySeverity
    .map((f, i) => ({ f, i }))
    .sort((a, b) => saving(b.f) - saving(a.f) || a.i - b.i)
    .map(({ f }) => f);
}

/**
 * What fixing a finding would save: "saves ~2.29 ms/step (32.0 % of the step)", or that it claims none.
 * @param {Finding} finding
 * @returns {string}
 */
export function savingText(finding) {
  if (!Number.isFinite(finding.saving_us)) return "No saving claimed";
  return `saves ~${formatUs(finding.saving_us)}/step (${formatRatio(finding.saving_ratio, 1)} of the step)`;
}

/**
 * A finding's saving as a line: the saving, how it was estimated, and the finding whose saving
 * includes it; null for a finding without saving keys.
 * @param {Finding} finding
 * @returns {HTMLElement|null}
 */
export function savingLine(finding) {
  if (finding.saving_us === undefined) return null;
  return el("p", { class: "rec-saving", testid: "saving" }, [
    el("strong", { class: "rec-saving-value", testid: "saving-value", text: savingText(finding) }),
    finding.saving_note ? el("span", { class: "rec-saving-note", testid: "saving-note", text: ` · ${finding.saving_note}` }) : null,
    finding.included_in ? el("span", { class: "rec-saving-included", testid: "included-in",
      text: ` · included in ${finding.included_in}'s saving, not to be added to it` }) : null,
  ]);
}

/**
 * Whether `text` holds `word` as a whole word ("step 5" holds "5", not "50").
 * @param {string} text
 * @param {string} word
 */
function namesWord(text, word) {
  if (!word) return false;
  const escaped = word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(^|[^\\w])${escaped}($|[^\\w])`).test(text);
}

/**
 * The fields of an evidence item worth a reader's eye, beyond its label: scalars other than where
 * it is, and not those its label already names (a step's `step`, a GPU's `device`, an `op` that
 * the label spells out).
 * @param {Evidence} evidence
 * @returns {[string, string|number|boolean][]}
 */
export function evidenceFields(evidence) {
  const label = typeof evidence.label === "string" ? evidence.label : "";
  return /** @type {[string, string|number|boolean][]} */ (Object.entries(evidence).filter(([key, value]) => {
    if (PLACE_KEYS.has(key) || value === null || value === undefined || typeof value === "object") return false;
    if (typeof value === "string") return !label.includes(value);
    return !(IDENTITY_KEYS.has(key) && namesWord(label, String(value)));
  }));
}

/**
 * A measured value as text: by its key's unit suffix, yes/no for a flag.
 * @param {string} key
 * @param {unknown} value
 * @returns {string}
 */
export function formatValue(key, value) {
  return typeof value === "boolean" ? (value ? "yes" : "no") : formatField(key, value);
}

/**
 * One line of readable evidence: its label (else its kind), then its other fields formatted by
 * their unit suffix: "step 5: dataloader 69.3 ms", "GPU 0: utilization 34.30 %", "pinned: no".
 * @param {Evidence} evidence
 * @returns {string}
 */
export function evidenceText(evidence) {
  const head = evidence.label ? String(evidence.label) : String(evidence.kind ?? "evidence");
  const extras = evidenceFields(evidence).map(([key, value]) =>
    `${fieldLabel(key)}${typeof value === "boolean" ? ":" : ""} ${formatValue(key, value)}`);
  return extras.length ? `${head}: ${extras.join(", ")}` : head;
}

/**
 * The lists an evidence item carries (call names, stack frames), for a closer look.
 * @param {Evidence} evidence
 * @returns {{key: string, label: string, items: string[]}[]}
 */
export function evidenceLists(evidence) {
  return Object.entries(evidence)
    .filter(([, value]) => Array.isArray(value) && value.length > 0 && value.every((v) => v === null || typeof v !== "object"))
    .map(([key, value]) => ({ key, label: fieldLabel(key), items: value.map((v) => formatValue(key, v)) }));
}

/** A time as the URL keeps it: to the nanosecond, without float noise. @param {number} us */
function urlTime(us) {
  return Math.round(us * 1000) / 1000;
}

/**
 * Where an evidence item opens the Trace view: its culprit event selected in a window around it
 * (the event takes part of the window, the rest is context), else its time range; null when it
 * has neither.
 * @param {Evidence} evidence
 * @returns {{start_us?: number, end_us?: number, select?: number}|null}
 */
export function evidenceTarget(evidence) {
  const { start_us: start, end_us: end, event_id: id } = evidence;
  const timed = Number.isFinite(start) && Number.isFinite(end) && end >= start;
  const event = Number.isInteger(id) && id >= 0;
  if (event && timed) {
    const win = windowAround(start, end - start, { start_us: -Infinity, end_us: Infinity });
    return { start_us: urlTime(win.start_us), end_us: urlTime(win.end_us), select: id };
  }
  if (event) return { select: id }; // the Trace view zooms to the event itself
  return timed ? { start_us: start, end_us: end } : null;
}

/**
 * A link into the Trace view on an item (an evidence item, or anything with `start_us`/`end_us`),
 * or null when it has no place there.
 * @param {Selection} selection
 * @param {Evidence|{start_us?: number, end_us?: number}} item
 * @param {string} text
 * @returns {HTMLElement|null}
 */
export function traceLink(selection, item, text) {
  const target = evidenceTarget(/** @type {Evidence} */ (item));
  if (!target) return null;
  const title = target.select !== undefined ? "Open the trace view on this event" : "Open this time range in the trace view";
  return el("a", { class: "trace-link", text, testid: "trace-link", title,
    attrs: { href: traceHref(selection, target) } });
}

/**
 * A link to the Operator view searching for the evidence's operator (`op`), or null without one.
 * @param {Selection} selection
 * @param {Evidence} evidence
 * @param {string} text
 * @returns {HTMLElement|null}
 */
export function operatorLink(selection, evidence, text) {
  if (typeof evidence.op !== "string" || !evidence.op) return null;
  const { run, worker, span } = selection;
  return el("a", { class: "operator-link", text, testid: "operator-link", title: `Find ${evidence.op} in the operator view`,
    attrs: { href: viewHref("operators", { run, worker, span, q: evidence.op }) } });
}

/**
 * A threshold key's part before the number key it qualifies: "high_share_ratio" qualifies
 * "share_ratio" as "high"; the same key qualifies it as "".
 * @param {string} thresholdKey
 * @param {string} numberKey
 * @returns {string|null} the qualifier, or null when the threshold is not about that number
 */
function qualifier(thresholdKey, numberKey) {
  if (thresholdKey === numberKey) return "";
  return thresholdKey.endsWith(`_${numberKey}`) ? thresholdKey.slice(0, -numberKey.length - 1).replace(/_/g, " ") : null;
}

/**
 * Rows of a finding's numbers beside the thresholds they were judged by. A threshold belongs to
 * the number whose key it equals or ends with ("high_share_ratio" to "share_ratio"); thresholds
 * about no number get rows of their own, without a value.
 * @param {Finding} finding
 * @returns {MeasureRow[]}
 */
export function measureRows(finding) {
  const numbers = finding.numbers || {};
  const thresholds = Object.entries(finding.thresholds || {});
  const used = new Set();
  /** @type {MeasureRow[]} */
  const rows = Object.entries(numbers).map(([key, value]) => {
    const own = [];
    for (const [tKey, tValue] of thresholds) {
      const q = qualifier(tKey, key);
      if (q === null || used.has(tKey)) continue;
      used.add(tKey);
      own.push({ label: q, value: formatValue(tKey, tValue) });
    }
    return { key, label: fieldLabel(key), value: formatValue(key, value), thresholds: own };
  });
  for (const [tKey, tValue] of thresholds) {
    if (!used.has(tKey)) rows.push({ key: tKey, label: fieldLabel(tKey), value: null, thresholds: [{ label: "", value: formatValue(tKey, tValue) }] });
  }
  return rows;
}

/**
 * A finding's severity as a coloured badge.
 * @param {string} severity
 * @returns {HTMLElement}
 */
export function severityBadge(severity) {
  return el("span", { class: `badge badge-${severity}`, text: severity, testid: "severity" });
}

/**
 * The evidence of a finding as a list: a line each, a link into the Trace view, optionally a link
 * to the Operator view for an `op` and the item's lists (frames, calls) folded under it.
 * @param {Selection} selection
 * @param {Evidence[]} evidence
 * @param {{full?: boolean}} [options] `full`: operator links and lists too (the Recommendations view)
 * @returns {HTMLElement|null}
 */
export function evidenceList(selection, evidence, { full = false } = {}) {
  if (!evidence || !evidence.length) return null;
  return el("ul", { class: "rec-evidence", testid: "evidence", attrs: { "aria-label": "Evidence" } }, evidence.map((e) => {
    const links = [traceLink(selection, e, full ? "Trace" : "in the trace"), full ? operatorLink(selection, e, "Operator") : null]
      .filter(Boolean);
    const lists = full ? evidenceLists(e) : [];
    return el("li", { class: "rec-evidence-item", testid: "evidence-item", attrs: { "data-kind": String(e.kind) } }, [
      el("span", { class: "rec-evidence-text", text: evidenceText(e) }),
      links.length ? el("span", { class: "rec-evidence-links" }, links) : null,
      ...lists.map((list) => el("details", { class: "rec-evidence-list" }, [
        el("summary", { text: `${list.label} (${list.items.length})` }),
        el("ol", {}, list.items.map((item) => el("li", { text: item }))),
      ])),
    ]);
  }));
}
