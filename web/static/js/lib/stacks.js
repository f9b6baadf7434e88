/**
 * The call-stack panel: an operator's distinct Python call stacks, each with its numbers and its
 * frames (editor links for absolute paths, a copy button for every `path:line`).
 * @module lib/stacks
 */

import { isAbort } from "./api.js";
import { byTestId, clear, el } from "./dom.js";
import { editorHref, frameCopyText, frameLocation, isLibraryFrame, serverPath } from "./frames.js";
import { formatCount, formatRatio, formatUs } from "./format.js";

/**
 * @typedef {import("./frames.js").Frame} Frame
 * @typedef {{calls: number, device_self_us: number, device_total_us: number, host_self_us: number,
 *            host_total_us: number, tc_self_ratio: number|null, tc_total_ratio: number|null,
 *            frames: Frame[]}} StackRow
 * @typedef {{name: string, input_shape: string|null, rows: StackRow[], warnings?: string[]}} Stacks
 * @typedef {{name: string, input_shape?: string}} Operator
 */

/**
 * The numbers shown above one call stack, as label/value pairs.
 * @param {StackRow} stack
 * @returns {[string, string][]}
 */
export function stackStats(stack) {
  /** @type {[string, string][]} */
  const out = [
    ["Calls", formatCount(stack.calls)],
    ["Device Self", formatUs(stack.device_self_us)],
    ["Device Total", formatUs(stack.device_total_us)],
    ["Host Self", formatUs(stack.host_self_us)],
    ["Host Total", formatUs(stack.host_total_us)],
  ];
  if (stack.tc_self_ratio !== null && stack.tc_self_ratio !== undefined) out.push(["Tensor Cores Self", formatRatio(stack.tc_self_ratio)]);
  if (stack.tc_total_ratio !== null && stack.tc_total_ratio !== undefined) out.push(["Tensor Cores Total", formatRatio(stack.tc_total_ratio)]);
  return out;
}

/**
 * How many frames of these stacks have a file with an absolute path (recorded so, or found by the
 * server under a --source-root), and how many a relative one only (no editor link possible).
 * @param {StackRow[]} stacks
 * @returns {{absolute: number, relative: number}}
 */
export function pathKinds(stacks) {
  const out = { absolute: 0, relative: 0 };
  for (const stack of stacks) {
    for (const frame of stack.frames || []) {
      if (frame.file) out[serverPath(frame) ? "absolute" : "relative"] += 1;
    }
  }
  return out;
}

/**
 * The panel's note on paths without editor links, or null when every path has one.
 * @param {{absolute: number, relative: number}} kinds from {@link pathKinds}
 * @returns {string|null}
 */
export function relativePathNote({ absolute, relative }) {
  if (!relative) return null;
  const how = "Start profboard with --source-root PATH (your checkout, a site-packages; repeatable) to link them; "
    + "the Copy buttons still give path:line.";
  return absolute
    ? `Some file paths here are relative (to the working directory, or to Python's sys.path as PyTorch 2.x records them) and were found under no source root. ${how}`
    : `File paths here are relative to Python's sys.path (PyTorch 2.x records them so) and were found under no source root. ${how}`;
}

const SOURCE_MAP_KEY = "profboard.sourceMap";

/**
 * The page's mapping of the server's paths to this computer's (kept in this browser), or null.
 * @returns {import("./frames.js").SourceMap|null}
 */
export function readSourceMap() {
  try {
    const map = JSON.parse(window.localStorage.getItem(SOURCE_MAP_KEY) || "null");
    return map && typeof map.from === "string" && typeof map.to === "string" && map.from ? map : null;
  } catch {
    return null; // storage disabled, or a value another version wrote
  }
}

/**
 * A form that sets {@link readSourceMap}'s mapping: for a server in a container or on another machine,
 * whose paths are not this computer's (e.g. /workspace -> /home/me/project).
 * @param {() => void} onChange told after the mapping was saved or cleared
 * @returns {HTMLElement}
 */
export function sourceMapForm(onChange) {
  const map = readSourceMap();
  const from = /** @type {HTMLInputElement} */ (el("input", { testid: "source-map-from",
    attrs: { type: "text", placeholder: "/workspace", "aria-label": "Server path prefix", value: map ? map.from : "" } }));
  const to = /** @type {HTMLInputElement} */ (el("input", { testid: "source-map-to",
    attrs: { type: "text", placeholder: "/home/me/project", "aria-label": "Path on this computer", value: map ? map.to : "" } }));
  const save = el("button", { class: "nav-button", text: "Save", testid: "source-map-save", attrs: { type: "button" } });
  save.addEventListener("click", () => {
    try {
      if (from.value.trim()) {
        window.localStorage.setItem(SOURCE_MAP_KEY, JSON.stringify({ from: from.value.trim(), to: to.value.trim() }));
      } else {
        window.localStorage.removeItem(SOURCE_MAP_KEY);
      }
    } catch {
      // storage disabled: the links stay as the server gives them
    }
    onChange();
  });
  return el("details", { class: "source-map", testid: "source-map" }, [
    el("summary", { text: map ? `Editor links: ${map.from} opens as ${map.to}` : "Editor links open the server's paths: map them" }),
    el("div", { class: "source-map-fields" }, [
      el("label", {}, ["Server path starting with ", from]),
      el("label", {}, ["is on this computer at ", to]),
      save,
    ]),
  ]);
}

/**
 * Copies `text`: the Clipboard API where the page may use it, else a hidden textarea and the copy
 * command, else selects `fallback` so that Ctrl+C copies what is shown.
 * @param {string} text
 * @param {HTMLElement} fallback
 * @returns {Promise<boolean>} whether the text reached the clipboard
 */
async function copyText(text, fallback) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // denied or unavailable: try the older ways
  }
  const area = /** @type {HTMLTextAreaElement} */ (el("textarea", { class: "visually-hidden", attrs: { readonly: "" } }));
  area.value = text;
  document.body.append(area);
  area.select();
  let copied = false;
  try {
    copied = document.execCommand("copy");
  } catch {
    copied = false;
  }
  area.remove();
  if (!copied) {
    const selection = window.getSelection();
    if (selection) selection.selectAllChildren(fallback);
  }
  return copied;
}

/**
 * One frame: location (a VS Code link for absolute paths), function, and a copy button.
 * @param {Frame} frame
 */
export function frameItem(frame) {
  const location = frameLocation(frame);
  const href = editorHref(frame, readSourceMap());
  const copy = frameCopyText(frame);
  /** @type {HTMLElement|null} */ let where = null;
  if (location) {
    where = href
      ? el("a", { class: "frame-loc", text: location, title: "Open in VS Code", testid: "frame-link", attrs: { href } })
      : el("span", { class: "frame-loc", text: location });
  }
  /** @type {HTMLElement|null} */ let button = null;
  if (copy && where) {
    const target = where;
    const copyButton = el("button", {
      class: "copy-button", text: "Copy", title: `Copy ${copy}`, testid: "copy-frame",
      attrs: { type: "button", "aria-label": `Copy ${copy}`, "data-copy": copy },
    });
    copyButton.addEventListener("click", async () => {
      const ok = await copyText(copy, target);
      copyButton.textContent = ok ? "Copied" : "Selected";
      copyButton.classList.add("copy-done");
      window.setTimeout(() => {
        copyButton.textContent = "Copy";
        copyButton.classList.remove("copy-done");
      }, 1500);
    });
    button = copyButton;
  }
  return el("li", { class: `frame${isLibraryFrame(frame) ? " frame-lib" : ""}`, testid: "frame" }, [
    el("span", { class: "frame-text" }, [
      where,
      where ? el("span", { class: "frame-sep", text: ": " }) : null,
      el("span", { class: "frame-fn", text: frame.function }),
    ]),
    button,
  ]);
}

/** @param {StackRow} stack @param {number} index @param {number} count */
function stackSection(stack, index, count) {
  const frames = stack.frames || [];
  return el("section", { class: "stack", testid: "stack" }, [
    el("div", { class: "stack-head" }, [
      el("span", { class: "stack-title", text: count > 1 ? `Stack ${index + 1} of ${count}` : "Stack" }),
      el("span", { class: "stack-sub", text: frames.length ? `${frames.length} frame${frames.length === 1 ? "" : "s"}, innermost first` : "" }),
    ]),
    el("dl", { class: "stack-stats" }, stackStats(stack).map(([label, value]) =>
      el("div", { class: "stat" }, [el("dt", { text: label }), el("dd", { text: value })]))),
    frames.length
      ? el("ol", { class: "frames" }, frames.map(frameItem))
      : el("p", { class: "empty", text: "No Python frames were recorded for these calls (called from C++, or profiled without with_stack=True)." }),
  ]);
}

/**
 * The call-stack panel of one view instance: open for an operator, fetch, show, close.
 * @param {HTMLElement} panel the `stack-panel` element
 * @param {(op: Operator, signal: AbortSignal) => Promise<Stacks>} load fetches an operator's stacks
 * @param {AbortSignal|undefined} mountSignal fires when the view is remounted
 * @param {(op: Operator|null) => void} onSelect told which operator the panel shows (null: closed)
 */
export function stackPanel(panel, load, mountSignal, onSelect) {
  const title = byTestId(panel, "stack-title");
  const subtitle = byTestId(panel, "stack-subtitle");
  const body = byTestId(panel, "stack-body");
  const closeButton = byTestId(panel, "stack-close");
  /** @type {AbortController|null} */ let controller = null;
  /** @type {HTMLElement|null} */ let opener = null;

  function close() {
    if (controller) controller.abort();
    controller = null;
    panel.hidden = true;
    clear(body);
    onSelect(null);
    if (opener && opener.isConnected) opener.focus();
    opener = null;
  }

  /** @param {Operator} row @param {HTMLElement} button */
  async function open(row, button) {
    if (controller) controller.abort();
    const local = new AbortController();
    controller = local;
    opener = button;
    onSelect(row);
    title.textContent = row.name;
    title.title = row.name;
    subtitle.textContent = row.input_shape ? `Input shape ${row.input_shape}` : "";
    subtitle.hidden = !row.input_shape;
    body.replaceChildren(el("p", { class: "empty", testid: "stack-loading", text: "Loading call stacks…" }));
    panel.hidden = false;
    panel.setAttribute("aria-busy", "true");
    closeButton.focus();
    try {
      const data = await load(row, local.signal);
      if (local.signal.aborted) return;
      const stacks = data.rows || [];
      if (!stacks.length) {
        body.replaceChildren(
          ...(data.warnings || []).map((w) => el("p", { class: "note note-warn", testid: "stack-warning", text: w })),
          el("p", { class: "empty", text: "No call stacks were recorded for this operator." }),
        );
        return;
      }
      const kinds = pathKinds(stacks);
      const note = relativePathNote(kinds);
      const render = () => {
        const notes = (data.warnings || []).map((w) => el("p", { class: "note note-warn", testid: "stack-warning", text: w }));
        if (note) notes.push(el("p", { class: "note note-info", testid: "stack-note", text: note }));
        // Links exist: they may need moving to this computer's paths (a server in a container, say).
        if (kinds.absolute) notes.push(sourceMapForm(render));
        body.replaceChildren(...notes, ...stacks.map((stack, i) => stackSection(stack, i, stacks.length)));
      };
      render();
    } catch (err) {
      if (local.signal.aborted || isAbort(err)) return;
      body.replaceChildren(el("div", { class: "error-box", testid: "stack-error" }, [
        el("div", { class: "error-title", text: "The call stacks could not be loaded" }),
        el("div", { class: "error-message", text: err instanceof Error ? err.message : String(err) }),
      ]));
    } finally {
      if (controller === local) panel.removeAttribute("aria-busy");
    }
  }

  closeButton.addEventListener("click", close, { signal: mountSignal });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !panel.hidden) close();
  }, { signal: mountSignal });
  if (mountSignal) mountSignal.addEventListener("abort", () => { if (controller) controller.abort(); });
  // A remount (new run, span or grouping) starts with the panel closed.
  panel.hidden = true;
  clear(body);
  return { open, close };
}
