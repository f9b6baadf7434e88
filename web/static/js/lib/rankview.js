/**
 * Several ranks on one timeline: the picked ranks' lanes, windows, events and search matches,
 * each asked of its own worker (`/api/trace/*` with `worker=`), put into one timeline's terms.
 * Pure functions.
 *
 * - Clock: rank r's timestamps are `offset_us` ahead of the reference rank's (/api/distributed's
 *   `clock`), so its times are drawn at `t - offset_us` (the common clock), and a window of the
 *   common clock is asked of its worker as `start + offset_us .. end + offset_us`.
 * - Ids: rank number k (in the picked order) keeps its lane and event ids apart from the others'
 *   as `k * ID_STRIDE + id` (well within a double's exact integers for thousands of ranks).
 * - Lanes: each rank's lanes come in its own order under headers naming the rank, its worker and
 *   its clock offset (the layout starts a header where the process label changes).
 * @module lib/rankview
 */

import { formatUs } from "./format.js";

/**
 * @typedef {import("./lanes.js").Lane} Lane
 * @typedef {{rank: number, offset_us: number|null, used: number, spread_us: number|null}} RankClock
 * @typedef {{reference: number|null, ranks: RankClock[], straggler: number|null, fastest: number|null}} Clock
 * @typedef {{rank: number, worker: string, offset_us: number, clock: RankClock|null}} Shown
 */

export const ID_STRIDE = 2 ** 32;
/** The most ranks shown together (what /api/trace/collective matches at once). */
export const MAX_RANKS = 64;

/**
 * The ranks of a `ranks` URL parameter ("1,0"), in order, each once; [] for "auto" or nothing.
 * @param {string|undefined|null} text
 * @returns {number[]}
 */
export function parseRanks(text) {
  /** @type {number[]} */ const out = [];
  for (const part of String(text || "").split(",")) {
    const value = part.trim();
    if (!/^\d+$/.test(value)) continue;
    const rank = Number(value);
    if (!out.includes(rank)) out.push(rank);
  }
  return out;
}

/**
 * The ranks to show: those asked for that the run holds (the first MAX_RANKS), else the straggler
 * and the fastest, else the first two ranks.
 * @param {number[]} asked
 * @param {{rank: number}[]} held the run's ranks (/api/distributed's `ranks`)
 * @param {Clock} clock
 * @returns {number[]}
 */
export function pickRanks(asked, held, clock) {
  const have = new Set(held.map((r) => r.rank));
  const known = asked.filter((r) => have.has(r));
  if (known.length) return known.slice(0, MAX_RANKS);
  const pair = [clock.straggler, clock.fastest].filter((r) => r !== null && have.has(/** @type {number} */ (r)));
  return /** @type {number[]} */ (pair.length ? pair : held.slice(0, 2).map((r) => r.rank));
}

/**
 * Each picked rank's worker and clock (an offset the server could not estimate counts as 0).
 * @param {number[]} ranks
 * @param {{rank: number, worker: string}[]} held
 * @param {Clock} clock
 * @returns {Shown[]}
 */
export function shownRanks(ranks, held, clock) {
  const worker = new Map(held.map((r) => [r.rank, r.worker]));
  const clocks = new Map((clock.ranks || []).map((c) => [c.rank, c]));
  return ranks.map((rank) => {
    const own = clocks.get(rank) || null;
    return { rank, worker: /** @type {string} */ (worker.get(rank)), offset_us: own && own.offset_us !== null ? own.offset_us : 0, clock: own };
  });
}

/**
 * A rank's clock against the reference, short: "+8.2 us", "reference", "clock unknown".
 * @param {Shown} shown
 * @param {number|null} reference
 */
export function clockText(shown, reference) {
  const c = shown.clock;
  if (shown.rank === reference) return "reference";
  if (!c || c.offset_us === null) return "clock unknown";
  return `${c.offset_us >= 0 ? "+" : "−"}${formatUs(Math.abs(c.offset_us))}`;
}

/**
 * The header over a rank's lanes (one per process of the rank): rank and clock offset, short
 * enough to stay whole in the label column.
 * @param {Shown} shown
 * @param {number|null} reference
 */
export function rankHeader(shown, reference) {
  return `Rank ${shown.rank} · ${clockText(shown, reference)}`;
}

/**
 * What the headers leave out, per shown rank: its worker and how sure its offset is.
 * @param {Shown} shown
 * @param {number|null} reference
 */
export function rankNote(shown, reference) {
  const c = shown.clock;
  const sure = shown.rank === reference || !c || c.offset_us === null
    ? (shown.rank === reference ? "" : ": no collective shared with the other ranks, drawn on its own clock")
    : ` ±${formatUs(c.spread_us ?? 0)} from ${c.used} collective${c.used === 1 ? "" : "s"}`;
  const clock = shown.rank === reference ? "the reference clock" : clockText(shown, reference);
  return `Rank ${shown.rank} (${shown.worker}): ${clock}${sure}`;
}

/**
 * The lanes folded when no folds are asked for: the host's (threads), so that every rank's GPU
 * streams, where the collectives run, come on screen together.
 * @param {Lane[]} lanes
 * @returns {number[]}
 */
export function hostLanes(lanes) {
  return lanes.filter((l) => l.kind !== "gpu").map((l) => l.id);
}

/** @param {number} k @param {number} id */
export const globalId = (k, id) => k * ID_STRIDE + id;

/**
 * A global id's rank number (in the picked order) and its own id.
 * @param {number} id
 * @returns {{k: number, id: number}}
 */
export function localId(id) {
  const k = Math.floor(id / ID_STRIDE);
  return { k, id: id - k * ID_STRIDE };
}

/**
 * One timeline's lanes answer from each shown rank's: lanes renumbered and under their rank's
 * headers, the extent and steps on the common clock (the steps of the first rank).
 * @param {{shown: Shown, info: any}[]} parts in the picked order
 * @param {number|null} reference
 */
export function mergeLanes(parts, reference) {
  /** @type {Lane[]} */ const lanes = [];
  let start = Infinity;
  let end = -Infinity;
  parts.forEach(({ shown, info }, k) => {
    const off = shown.offset_us;
    const head = rankHeader(shown, reference);
    for (const lane of info.lanes || []) lanes.push({ ...lane, id: globalId(k, lane.id), process: `${head} · ${lane.process}` });
    if ((info.lanes || []).length) {
      start = Math.min(start, info.start_us - off);
      end = Math.max(end, info.end_us - off);
    }
  });
  const first = parts[0];
  const times = ["start_us", "end_us", "host_start_us", "host_end_us"];
  const steps = first ? (first.info.steps || []).map((/** @type {any} */ s) => Object.fromEntries(
    Object.entries(s).map(([k, v]) => [k, times.includes(k) ? v - first.shown.offset_us : v]))) : [];
  const flowTypes = new Set(parts.flatMap(({ info }) => info.flow_types || []));
  return {
    start_us: Number.isFinite(start) ? start : 0, end_us: Number.isFinite(end) ? end : 0, lanes, steps,
    kinds: first ? first.info.kinds || [] : [],
    flow_types: [...flowTypes],
    warnings: parts.flatMap(({ shown, info }) => (info.warnings || []).map((/** @type {string} */ w) => `Rank ${shown.rank}: ${w}`)),
  };
}

/**
 * A window of the common clock as asked of one rank's worker (its own clock).
 * @template {{start_us: number, end_us: number}} W
 * @param {W} req
 * @param {number} offset
 * @returns {W}
 */
export function ownWindow(req, offset) {
  return { ...req, start_us: req.start_us + offset, end_us: req.end_us + offset };
}

/** @param {number[]} values @param {number} offset */
const shifted = (values, offset) => values.map((t) => t - offset);

/**
 * One `/api/trace/window` answer from each shown rank's (same request on its own clock): names
 * concatenated, ids and lanes renumbered, times on the common clock; flow arrows kept within a rank.
 * @param {{shown: Shown, body: any}[]} parts
 * @param {{start_us: number, end_us: number, width_px: number}} req the common clock's request
 */
export function mergeWindows(parts, req) {
  /** @type {string[]} */ const names = [];
  /** @type {any[]} */ const lanes = [];
  const flows = { total: 0, cat: [], from_id: [], from_lane: [], from_row: [], from_us: [], to_id: [], to_lane: [], to_row: [], to_us: [] };
  parts.forEach(({ shown, body }, k) => {
    const off = shown.offset_us;
    const base = names.length;
    names.push(...(body.names || []));
    for (const lane of body.lanes || []) {
      const b = lane.boxes;
      const m = lane.merged;
      lanes.push({
        id: globalId(k, lane.id),
        boxes: { ...b, id: b.id.map((/** @type {number} */ id) => globalId(k, id)), start_us: shifted(b.start_us, off),
          name: b.name.map((/** @type {number} */ n) => base + n) },
        merged: { ...m, start_us: shifted(m.start_us, off), end_us: shifted(m.end_us, off) },
      });
    }
    const f = body.flows;
    if (!f) return;
    flows.total = flows.total === null || f.total === null ? null : flows.total + f.total;
    for (const side of ["from", "to"]) {
      /** @type {any} */ (flows)[`${side}_id`].push(...f[`${side}_id`].map((/** @type {number} */ id) => globalId(k, id)));
      /** @type {any} */ (flows)[`${side}_lane`].push(...f[`${side}_lane`].map((/** @type {number} */ id) => globalId(k, id)));
      /** @type {any} */ (flows)[`${side}_row`].push(...f[`${side}_row`]);
      /** @type {any} */ (flows)[`${side}_us`].push(...shifted(f[`${side}_us`], off));
    }
    /** @type {any} */ (flows).cat.push(...f.cat);
  });
  return { ...req, names, lanes, flows, warnings: [] };
}

/**
 * An event answer (or a search match, or a link) of rank number k, in the timeline's terms.
 * @template {{id: number, lane: number, start_us: number}} E
 * @param {E} event
 * @param {number} k
 * @param {number} offset
 * @returns {E}
 */
export function placeEvent(event, k, offset) {
  /** @type {any} */ const out = { ...event, id: globalId(k, event.id), lane: globalId(k, event.lane), start_us: event.start_us - offset };
  if (Array.isArray(/** @type {any} */ (event).links)) {
    out.links = /** @type {any} */ (event).links.map((/** @type {any} */ l) => placeEvent(l, k, offset));
  }
  return out;
}

/**
 * The search matches of every shown rank, on the common clock, by start time; the total summed.
 * @param {{q: string, total: number, matches: any[], warnings: string[]}[]} answers one per shown rank
 * @param {Shown[]} shown
 */
export function mergeSearches(answers, shown) {
  const matches = answers.flatMap((a, k) => a.matches.map((m) => placeEvent(m, k, shown[k].offset_us)));
  matches.sort((a, b) => a.start_us - b.start_us || a.id - b.id);
  return {
    q: answers.length ? answers[0].q : "", total: answers.reduce((n, a) => n + a.total, 0), matches,
    warnings: answers.flatMap((a) => a.warnings),
  };
}

/**
 * Whether an event can pick a collective across ranks: a communication kernel, a collective op
 * or annotation (the server decides for sure: /api/trace/collective).
 * @param {string} name
 */
export function isCollectiveEvent(name) {
  return /^(nccl|rccl)(Dev)?Kernel_/i.test(name) || name === "record_param_comms" || /^(nccl|gloo):/.test(name);
}

/**
 * The global ids of `/api/trace/collective`'s events, one per shown rank that has the collective.
 * @param {{calls: {worker: string, id: number|null}[]}} answer
 * @param {Shown[]} shown
 * @returns {number[]}
 */
export function collectiveIds(answer, shown) {
  const number = new Map(shown.map((s, k) => [s.worker, k]));
  return answer.calls
    .filter((c) => c.id !== null && number.has(c.worker))
    .map((c) => globalId(/** @type {number} */ (number.get(c.worker)), /** @type {number} */ (c.id)));
}
