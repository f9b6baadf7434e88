/**
 * The Trace view's event details: what a selected event is (facts, recorded fields, call stack)
 * and the events it is tied to, as buttons that select them. Pure text helpers and one draw function.
 * @module lib/eventpanel
 */

import { el } from "./dom.js";
import { NA, formatOffset, formatUs } from "./format.js";
import { kindLabel } from "./lanes.js";
import { frameItem } from "./stacks.js";

/**
 * @typedef {import("./timeline.js").Lane} Lane
 * @typedef {{relation: string, id: number, name: string, start_us: number, dur_us: number, lane: number, row?: number}} Link
 * @typedef {{id: number, name: string, cat: string, kind: string, lane: number, row: number, start_us: number,
 *            dur_us: number, step: string|null, fields: Record<string, any>, frames: import("./frames.js").Frame[],
 *            links: Link[], warnings: string[]}} EventDetail
 */

/** "launched by" -> "Launched by". @param {string} relation */
export function relationLabel(relation) {
  const text = String(relation || "linked");
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/**
 * A field value as text: strings as they are, everything else as compact JSON.
 * @param {unknown} value
 */
export function fieldText(value) {
  if (value === null || value === undefined) return NA;
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}

/**
 * The label/value pairs at the top of the details panel.
 * @param {EventDetail} event
 * @param {number} origin trace start, us
 * @param {Lane|undefined} lane
 * @returns {[string, string][]}
 */
export function eventFacts(event, origin, lane) {
  return [
    ["Duration", formatUs(event.dur_us)],
    ["Start", formatOffset(event.start_us - origin)],
    ["Step", event.step || NA],
    ["Category", event.cat || NA],
    ["Lane", lane ? `${lane.process} · ${lane.name}` : NA],
  ];
}

/**
 * The details panel: facts, linked events (buttons that select them), fields, call stack.
 * @param {{panel: HTMLElement, kind: HTMLElement, title: HTMLElement, body: HTMLElement}} ui
 * @param {EventDetail} event
 * @param {number} origin
 * @param {Map<number, Lane>} lanes
 * @param {(link: Link) => void} follow
 */
export function drawDetails(ui, event, origin, lanes, follow) {
  ui.kind.textContent = kindLabel(event.kind);
  ui.title.textContent = event.name;
  ui.title.title = event.name;
  const facts = el("dl", { class: "details-facts", testid: "event-facts" }, eventFacts(event, origin, lanes.get(event.lane))
    .map(([label, value]) => el("div", { class: "stat" }, [el("dt", { text: label }), el("dd", { text: value, title: value })])));
  const parts = [...(event.warnings || []).map((w) => el("p", { class: "note note-warn", text: w })), facts];

  const links = event.links || [];
  if (links.length) {
    parts.push(el("section", { class: "details-section" }, [
      el("h3", { class: "details-heading", text: "Linked events" }),
      el("ul", { class: "details-links" }, links.map((link) => {
        const button = el("button", {
          class: "link-button", testid: "event-link", title: `${relationLabel(link.relation)}: ${link.name}`,
          attrs: { type: "button", "data-relation": link.relation, "data-id": String(link.id) },
        }, [
          el("span", { class: "link-relation", text: relationLabel(link.relation) }),
          el("span", { class: "link-name", text: link.name }),
          el("span", { class: "link-dur", text: formatUs(link.dur_us) }),
        ]);
        button.addEventListener("click", () => follow(link));
        return el("li", {}, [button]);
      })),
    ]));
  }
  const fields = Object.entries(event.fields || {});
  if (fields.length) {
    parts.push(el("section", { class: "details-section" }, [
      el("h3", { class: "details-heading", text: "Fields" }),
      el("dl", { class: "kv details-fields", testid: "event-fields" }, fields.flatMap(([key, value]) => [
        el("dt", { text: key }), el("dd", { text: fieldText(value) }),
      ])),
    ]));
  }
  const frames = event.frames || [];
  if (frames.length) {
    parts.push(el("section", { class: "details-section" }, [
      el("h3", { class: "details-heading", text: `Call stack (${frames.length} frame${frames.length === 1 ? "" : "s"}, innermost first)` }),
      el("ol", { class: "frames", testid: "event-frames" }, frames.map(frameItem)),
    ]));
  }
  ui.body.replaceChildren(...parts);
}

