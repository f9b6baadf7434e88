/**
 * The timeline's mouse, wheel and key gestures, as chrome://tracing has them: W/S zoom around the
 * pointer, A/D pan, the wheel zooms (Shift+wheel and sideways scrolling pan), a plain drag pans
 * (and scrolls the lanes), Shift/Alt/Ctrl+drag or a drag on the ruler selects a range to zoom
 * into. What a gesture does to the window is a pure function (`wheelWindow`, `keyWindow`); the
 * rest wires DOM events to the view's callbacks.
 * @module lib/gestures
 */

import { panBy, timeOf, zoomAt } from "./viewport.js";

/**
 * @typedef {import("./viewport.js").TimeWindow} TimeWindow
 * @typedef {{deltaX: number, deltaY: number, deltaMode: number, shiftKey: boolean, ctrlKey: boolean}} WheelLike
 * @typedef {object} GestureTarget what the gestures act on
 * @property {() => TimeWindow} view the window on screen
 * @property {() => {width: number, height: number}} size the plot's size, CSS px
 * @property {TimeWindow} bounds the trace
 * @property {(win: TimeWindow) => void} setView
 * @property {(range: [number, number]|null) => void} setRange a range being selected (null: none)
 * @property {(event: PointerEvent) => void} click a press and release without moving, on the lanes
 * @property {(event: MouseEvent) => void} dblclick
 * @property {(event: PointerEvent|null) => void} hover the pointer over the lanes (null: gone or dragging)
 * @property {(key: string) => boolean} key other keys (f, Escape); true when handled
 * @property {() => boolean} active whether the timeline is on screen
 */

/** One W or S press zooms by this factor; one A or D press pans by this share of the window. */
export const KEY_ZOOM = 0.8;
export const KEY_PAN = 0.15;
/** A press that moves less than this (px) is a click, not a drag. */
const DRAG_PX = 4;

/**
 * The window after a wheel event over x = `anchor` (0..1 across the plot): vertical wheel zooms
 * (pinch, reported with ctrlKey, faster), Shift+wheel or a sideways scroll pans.
 * @param {TimeWindow} view
 * @param {WheelLike} wheel
 * @param {number} anchor
 * @param {{width: number, height: number}} size
 * @param {TimeWindow} bounds
 * @returns {TimeWindow}
 */
export function wheelWindow(view, wheel, anchor, size, bounds) {
  const scale = wheel.deltaMode === 1 ? 16 : wheel.deltaMode === 2 ? size.height : 1;
  const dx = wheel.deltaX * scale;
  const dy = wheel.deltaY * scale;
  const perPx = (view.end_us - view.start_us) / size.width;
  if (wheel.shiftKey || Math.abs(dx) > Math.abs(dy)) {
    return panBy(view, (Math.abs(dx) > Math.abs(dy) ? dx : dy) * perPx, bounds);
  }
  return zoomAt(view, Math.exp(dy * (wheel.ctrlKey ? 0.01 : 0.0015)), anchor, bounds);
}

/**
 * The window after a key press (w, s, a, d, 0), or null for other keys.
 * @param {string} key `KeyboardEvent.key`
 * @param {TimeWindow} view
 * @param {number} anchor where W and S zoom around, 0..1 across the plot
 * @param {TimeWindow} bounds
 * @returns {TimeWindow|null}
 */
export function keyWindow(key, view, anchor, bounds) {
  const span = view.end_us - view.start_us;
  switch (key.toLowerCase()) {
    case "w": return zoomAt(view, KEY_ZOOM, anchor, bounds);
    case "s": return zoomAt(view, 1 / KEY_ZOOM, anchor, bounds);
    case "a": return panBy(view, -KEY_PAN * span, bounds);
    case "d": return panBy(view, KEY_PAN * span, bounds);
    case "0": return { ...bounds };
    default: return null;
  }
}

/**
 * Whether keys pressed in `target` are typing (text fields, selects), not timeline commands.
 * @param {HTMLElement|null} target
 */
export function isTyping(target) {
  if (!target) return false;
  if (target.isContentEditable || target.tagName === "TEXTAREA" || target.tagName === "SELECT") return true;
  return target.tagName === "INPUT" && !["checkbox", "radio", "button", "submit", "reset"].includes(/** @type {HTMLInputElement} */ (target).type);
}

/**
 * Wires the gestures. Listeners go away when `signal` fires.
 * @param {{stage: HTMLElement, ruler: HTMLElement, wheelTargets: HTMLElement[], body: HTMLElement, signal?: AbortSignal}} elements
 *   stage: the lanes' canvases; ruler: the time ruler; body: the lanes' scroll container
 * @param {GestureTarget} target
 */
export function wireGestures({ stage, ruler, wheelTargets, body, signal }, target) {
  const listen = { signal };
  /** @type {number|null} */ let pointerX = null;
  /** @type {{mode: "pan"|"range", x0: number, y0: number, t0: number, view0: TimeWindow, scroll0: number,
   *          moved: boolean, id: number, on: HTMLElement}|null} */
  let drag = null;
  /** @type {[number, number]|null} */ let range = null;

  /** @param {MouseEvent} event */
  const plotX = (event) => event.clientX - stage.getBoundingClientRect().left;

  /** @param {PointerEvent} event @param {"pan"|"range"} mode @param {HTMLElement} on */
  function start(event, mode, on) {
    if (event.button !== 0) return;
    event.preventDefault();
    on.setPointerCapture(event.pointerId);
    const { width } = target.size();
    drag = { mode, x0: event.clientX, y0: event.clientY, t0: timeOf(plotX(event), target.view(), width),
      view0: target.view(), scroll0: body.scrollTop, moved: false, id: event.pointerId, on };
    target.hover(null);
  }

  /** @param {PointerEvent} event @returns {boolean} whether a drag took the move */
  function move(event) {
    if (!drag) return false;
    const dx = event.clientX - drag.x0;
    const dy = event.clientY - drag.y0;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < DRAG_PX) return true;
    drag.moved = true;
    const { width } = target.size();
    if (drag.mode === "pan") {
      const perPx = (drag.view0.end_us - drag.view0.start_us) / width;
      target.setView(panBy(drag.view0, -dx * perPx, target.bounds));
      body.scrollTop = drag.scroll0 - dy;
      stage.style.cursor = "grabbing";
    } else {
      range = [drag.t0, timeOf(Math.max(0, Math.min(width, plotX(event))), target.view(), width)];
      target.setRange(range);
    }
    return true;
  }

  /** @param {PointerEvent} event */
  function end(event) {
    if (!drag) return;
    const done = drag;
    drag = null;
    stage.style.cursor = "";
    if (done.on.hasPointerCapture(done.id)) done.on.releasePointerCapture(done.id);
    if (done.mode === "range" && range) {
      const [a, b] = range;
      range = null;
      target.setRange(null);
      const view = target.view();
      const perPx = (view.end_us - view.start_us) / target.size().width;
      if (Math.abs(b - a) >= 3 * perPx) target.setView({ start_us: Math.min(a, b), end_us: Math.max(a, b) });
      return;
    }
    if (!done.moved && done.on === stage) target.click(event);
  }

  stage.addEventListener("pointerdown", (event) => {
    start(event, event.shiftKey || event.altKey || event.ctrlKey || event.metaKey ? "range" : "pan", stage);
  }, listen);
  ruler.addEventListener("pointerdown", (event) => start(event, "range", ruler), listen);
  for (const on of [stage, ruler]) {
    on.addEventListener("pointermove", (event) => {
      pointerX = plotX(event);
      if (move(event)) return;
      if (on === stage) target.hover(event);
    }, listen);
    on.addEventListener("pointerup", end, listen);
    on.addEventListener("pointercancel", () => {
      drag = null;
      range = null;
      target.setRange(null);
    }, listen);
  }
  stage.addEventListener("pointerleave", () => {
    pointerX = null;
    if (!drag) target.hover(null);
  }, listen);
  stage.addEventListener("dblclick", (event) => target.dblclick(event), listen);

  for (const on of wheelTargets) {
    on.addEventListener("wheel", (event) => {
      event.preventDefault();
      const size = target.size();
      target.setView(wheelWindow(target.view(), event, plotX(event) / size.width, size, target.bounds));
    }, { passive: false, signal });
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (isTyping(/** @type {HTMLElement|null} */ (event.target)) || !target.active()) return;
    const anchor = pointerX === null ? 0.5 : pointerX / target.size().width;
    const next = keyWindow(event.key, target.view(), anchor, target.bounds);
    if (next) target.setView(next);
    else if (!target.key(event.key)) return;
    event.preventDefault();
  }, listen);
}
