/**
 * Tiny DOM helpers. Text goes in through `textContent` only: kernel and operator names
 * contain `<` and `>`, and trace files are untrusted input.
 * @module lib/dom
 */

/**
 * Creates an element.
 * @param {string} tag
 * @param {{class?: string, text?: string, title?: string, testid?: string, attrs?: Record<string, string>}} [props]
 * @param {(Node|string|null|undefined|false)[]} [children] strings become text nodes
 * @returns {HTMLElement}
 */
export function el(tag, props = {}, children = []) {
  const node = document.createElement(tag);
  if (props.class) node.className = props.class;
  if (props.text !== undefined) node.textContent = props.text;
  if (props.title) node.title = props.title;
  if (props.testid) node.dataset.testid = props.testid;
  for (const [name, value] of Object.entries(props.attrs || {})) node.setAttribute(name, value);
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

/**
 * Removes every child of `node`.
 * @param {Element} node
 */
export function clear(node) {
  node.replaceChildren();
}

/**
 * Finds a required element by `data-testid` inside `root`.
 * @param {ParentNode} root
 * @param {string} testid
 * @returns {HTMLElement}
 */
export function byTestId(root, testid) {
  const node = root.querySelector(`[data-testid="${testid}"]`);
  if (!node) throw new Error(`The page template lacks the "${testid}" element.`);
  return /** @type {HTMLElement} */ (node);
}

/**
 * Text with `backtick` spans rendered as <code>, as DOM nodes.
 * @param {string} text
 * @returns {Node[]}
 */
export function inlineCode(text) {
  return text.split(/(`[^`]+`)/).filter(Boolean).map((part) =>
    part.startsWith("`") && part.endsWith("`") && part.length > 1
      ? el("code", { text: part.slice(1, -1) })
      : document.createTextNode(part));
}

/**
 * Renders a plain-text note (a view's "how computed" text) as paragraphs and lists.
 * Paragraphs are separated by blank lines; lines starting with "- " are bullets, "1. " numbered
 * items; indented lines continue the item above; other wrapped lines continue their paragraph.
 * @param {string} text
 * @returns {DocumentFragment}
 */
export function renderNote(text) {
  const fragment = document.createDocumentFragment();
  for (const block of text.replace(/\r\n/g, "\n").split(/\n\s*\n/)) {
    /** @type {HTMLElement|null} */ let list = null;
    /** @type {string[]|null} */ let current = null;
    /** @type {{node: HTMLElement, lines: string[]}[]} */ const pending = [];
    for (const raw of block.split("\n")) {
      if (!raw.trim()) continue;
      const bullet = raw.match(/^\s*[-*]\s+(.*)$/);
      const numbered = raw.match(/^\s*\d+[.)]\s+(.*)$/);
      if (bullet || numbered) {
        const tag = bullet ? "ul" : "ol";
        if (!list || list.tagName.toLowerCase() !== tag) {
          list = el(tag);
          fragment.append(list);
        }
        const item = el("li");
        list.append(item);
        current = [(bullet || numbered)[1]];
        pending.push({ node: item, lines: current });
      } else if (/^\s/.test(raw) && current) {
        current.push(raw.trim());
      } else if (list || !current) {
        list = null;
        const para = el("p");
        fragment.append(para);
        current = [raw.trim()];
        pending.push({ node: para, lines: current });
      } else {
        current.push(raw.trim());
      }
    }
    for (const { node, lines } of pending) node.append(...inlineCode(lines.join(" ")));
  }
  return fragment;
}

/**
 * Fills a view's warnings note (a yellow box) from an API's `warnings`; hides it when there are none.
 * @param {HTMLElement} node
 * @param {string[]} warnings
 */
export function showWarnings(node, warnings) {
  if (!warnings.length) {
    node.hidden = true;
    clear(node);
    return;
  }
  node.replaceChildren(
    el("div", { class: "note-title", text: warnings.length === 1 ? "Warning" : `${warnings.length} warnings` }),
    el("ul", {}, warnings.map((w) => el("li", { text: w }))),
  );
  node.hidden = false;
}
