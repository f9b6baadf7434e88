/**
 * The Recommendations view: every finding about the trace as a card, largest saving first, with
 * what fixing it would save per step, its suggestion, the numbers beside the thresholds they were
 * judged by, its evidence (links into the Trace and Operator views) and its stable id; a severity
 * filter kept in the URL (`severity`).
 * Reads `/api/recommendations`.
 *
 * Three layers: fetch (`fetchRecommendations`), shape (pure functions, here and in
 * lib/findings.js) and draw (`mount` and the `draw*` helpers).
 * @module recommendations
 */

import { getJSON } from "./lib/api.js";
import { byTestId, el, inlineCode, showWarnings } from "./lib/dom.js";
import { SEVERITIES, evidenceList, measureRows, savingLine, severityBadge, sortBySaving } from "./lib/findings.js";
import { formatCount } from "./lib/format.js";
import { updateQuery } from "./lib/url.js";

/**
 * @typedef {import("./lib/findings.js").Finding} Finding
 * @typedef {import("./lib/findings.js").Severity} Severity
 * @typedef {import("./lib/findings.js").Selection} Selection
 * @typedef {{recommendations: Finding[], warnings: string[]}} Recommendations
 */

/** The `severity` parameter's value when every severity is unticked. */
const NONE = "none";

// ---------------------------------------------------------------- fetch

/**
 * @param {Selection} params
 * @param {AbortSignal} [signal]
 * @returns {Promise<Recommendations>}
 */
export function fetchRecommendations({ run, worker, span }, signal) {
  return getJSON("/api/recommendations", { run, worker, span }, signal);
}

// ---------------------------------------------------------------- shape

/**
 * The severities the `severity` parameter shows: every one when absent (or naming none we know),
 * none for "none", else those it lists ("high,medium").
 * @param {string|undefined} text
 * @returns {Set<Severity>}
 */
export function parseSeverityFilter(text) {
  if (text === NONE) return new Set();
  const named = SEVERITIES.filter((s) => (text || "").split(",").map((w) => w.trim()).includes(s));
  return new Set(named.length ? named : SEVERITIES);
}

/**
 * The `severity` parameter for a set of shown severities: null (left out) when all are shown.
 * @param {Set<string>} shown
 * @returns {string|null}
 */
export function severityFilterParam(shown) {
  const listed = SEVERITIES.filter((s) => shown.has(s));
  if (listed.length === SEVERITIES.length) return null;
  return listed.length ? listed.join(",") : NONE;
}

/**
 * How many findings each severity has.
 * @param {Finding[]} findings
 * @returns {Record<Severity, number>}
 */
export function severityCounts(findings) {
  const counts = /** @type {Record<Severity, number>} */ (Object.fromEntries(SEVERITIES.map((s) => [s, 0])));
  for (const f of findings) if (f.severity in counts) counts[f.severity] += 1;
  return counts;
}

/**
 * The findings the filter shows, largest saving first (a severity we do not know is always shown).
 * @param {Finding[]} findings
 * @param {Set<string>} shown
 * @returns {Finding[]}
 */
export function visibleFindings(findings, shown) {
  return sortBySaving(findings).filter((f) => shown.has(f.severity) || !SEVERITIES.includes(f.severity));
}

/**
 * The line above the cards: "2 findings", "1 of 3 findings shown".
 * @param {number} shown
 * @param {number} total
 * @returns {string}
 */
export function countText(shown, total) {
  const noun = `finding${total === 1 ? "" : "s"}`;
  return shown === total ? `${formatCount(total)} ${noun}` : `${formatCount(shown)} of ${formatCount(total)} ${noun} shown`;
}

// ---------------------------------------------------------------- draw

/**
 * The numbers of a finding beside its thresholds, as a small table; null when it has neither.
 * @param {Finding} finding
 * @returns {HTMLElement|null}
 */
function measureTable(finding) {
  const rows = measureRows(finding);
  if (!rows.length) return null;
  return el("table", { class: "data-table rec-measures", testid: "numbers" }, [
    el("caption", { class: "visually-hidden", text: "Measured values and the thresholds they were judged by" }),
    el("thead", {}, [el("tr", {}, [
      el("th", { text: "Measure", attrs: { scope: "col" } }),
      el("th", { class: "num", text: "Value", attrs: { scope: "col" } }),
      el("th", { class: "num", text: "Threshold", attrs: { scope: "col" } }),
    ])]),
    el("tbody", {}, rows.map((row) => el("tr", { attrs: { "data-key": row.key } }, [
      el("th", { text: row.label, attrs: { scope: "row" } }),
      el("td", { class: row.value === null ? "num muted" : "num", testid: "number-value", text: row.value ?? "—" }),
      el("td", { class: "num", testid: "number-threshold" }, row.thresholds.length
        ? row.thresholds.map((t) => el("div", { text: t.label ? `${t.label}: ${t.value}` : t.value }))
        : [el("span", { class: "muted", text: "—" })]),
    ]))),
  ]);
}

/**
 * One finding's card.
 * @param {Finding} finding
 * @param {Selection} selection
 * @returns {HTMLElement}
 */
function findingCard(finding, selection) {
  const table = measureTable(finding);
  const evidence = evidenceList(selection, finding.evidence || [], { full: true });
  return el("article", { class: `card rec-card rec-${finding.severity}`, testid: "finding",
    attrs: { "data-id": finding.id, "data-severity": finding.severity } }, [
    el("div", { class: "rec-head" }, [
      severityBadge(finding.severity),
      el("h2", { class: "rec-title", testid: "finding-title", text: finding.title }),
      el("code", { class: "rec-id", testid: "finding-id", text: finding.id, title: "This finding's stable id" }),
    ]),
    savingLine(finding),
    finding.detail ? el("p", { class: "rec-detail", testid: "finding-detail" }, inlineCode(finding.detail)) : null,
    table || evidence ? el("div", { class: "rec-body" }, [
      table ? el("section", { class: "rec-section rec-section-numbers" }, [el("h3", { class: "rec-subtitle", text: "Numbers" }), table]) : null,
      evidence ? el("section", { class: "rec-section" }, [el("h3", { class: "rec-subtitle", text: "Evidence" }), evidence]) : null,
    ]) : null,
  ]);
}

/**
 * The cards the filter shows, or why there are none.
 * @param {HTMLElement} node
 * @param {Finding[]} findings
 * @param {Set<string>} shown
 * @param {Selection} selection
 * @param {HTMLElement} count where the "N findings" line goes
 */
function drawFindings(node, findings, shown, selection, count) {
  const visible = visibleFindings(findings, shown);
  count.textContent = findings.length ? countText(visible.length, findings.length) : "";
  if (!findings.length) {
    const about = /** @type {HTMLDetailsElement|null} */ (document.querySelector('[data-testid="about"]'));
    const open = el("button", { class: "text-button", text: "How these numbers are computed", testid: "open-about",
      attrs: { type: "button" } });
    open.addEventListener("click", () => {
      if (!about) return;
      about.open = true;
      about.scrollIntoView({ behavior: "smooth", block: "start" });
    });
    node.replaceChildren(el("div", { class: "card rec-empty", testid: "empty" }, [
      el("p", { class: "rec-empty-title", text: "Nothing stood out in this trace." }),
      el("p", { class: "muted" }, ["Every rule ran and none fired. The rules and the thresholds they apply are listed under ",
        about ? open : "How these numbers are computed", "."]),
    ]));
    return;
  }
  if (!visible.length) {
    node.replaceChildren(el("p", { class: "empty", testid: "filtered-out",
      text: `No finding of the ticked severities: the filter hides all ${formatCount(findings.length)}.` }));
    return;
  }
  node.replaceChildren(...visible.map((f) => findingCard(f, selection)));
}

/**
 * Fetches and draws the findings of one worker's span.
 * @param {HTMLElement} root the `[data-view="recommendations"]` section
 * @param {Selection & {severity?: string}} params
 * @param {{signal?: AbortSignal}} [context]
 */
export async function mount(root, params, { signal } = {}) {
  const data = await fetchRecommendations(params, signal);
  if (signal && signal.aborted) return;
  const findings = data.recommendations || [];
  const selection = { run: params.run, worker: params.worker, span: params.span };
  const shown = parseSeverityFilter(params.severity);
  const counts = severityCounts(findings);
  const cards = byTestId(root, "findings");
  const count = byTestId(root, "finding-count");
  showWarnings(byTestId(root, "warnings"), data.warnings || []);
  for (const severity of SEVERITIES) {
    const box = /** @type {HTMLInputElement} */ (byTestId(root, `severity-${severity}`));
    box.checked = shown.has(severity);
    byTestId(root, `severity-${severity}-count`).textContent = String(counts[severity]);
    box.addEventListener("change", () => {
      if (box.checked) shown.add(severity);
      else shown.delete(severity);
      updateQuery({ severity: severityFilterParam(shown) });
      drawFindings(cards, findings, shown, selection, count);
    }, { signal });
  }
  drawFindings(cards, findings, shown, selection, count);
}
