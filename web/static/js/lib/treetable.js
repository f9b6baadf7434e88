/**
 * A tree as a table: rows in preorder, each indented by its depth with a toggle button that
 * expands or collapses its children. The table itself is lib/table.js's; this module adds the
 * tree (which rows are shown) on top. Used by the Module view's module and operator trees.
 *
 * Nodes are plain objects with an `id` and a `parent_id` (null for a root), listed in preorder
 * (a parent before its children, siblings in order), as /api/modules and /api/modules/optree give them.
 * @module lib/treetable
 */

import { el } from "./dom.js";
import { buildTable } from "./table.js";

/**
 * @typedef {string|number} NodeId
 * @typedef {{id: NodeId, parent_id: NodeId|null}} TreeNode
 * @typedef {object} TreeIndex
 * @property {NodeId[]} order every id, in preorder
 * @property {NodeId[]} roots
 * @property {Map<NodeId, NodeId[]>} children ids of each node's children (only nodes that have some)
 * @property {Map<NodeId, NodeId|null>} parent
 * @property {Map<NodeId, number>} depth 0 for a root
 */

/** Rows shown at first when the caller does not say: levels open while they fit. */
export const AUTO_ROWS = 50;

/**
 * Indexes a preorder node list. A node whose parent is not in the list is treated as a root.
 * @param {TreeNode[]} nodes
 * @returns {TreeIndex}
 */
export function treeIndex(nodes) {
  /** @type {TreeIndex} */
  const index = { order: [], roots: [], children: new Map(), parent: new Map(), depth: new Map() };
  for (const node of nodes) {
    const up = node.parent_id;
    const known = up !== null && up !== undefined && index.depth.has(up);
    index.order.push(node.id);
    index.parent.set(node.id, known ? up : null);
    index.depth.set(node.id, known ? /** @type {number} */ (index.depth.get(up)) + 1 : 0);
    if (!known) index.roots.push(node.id);
    else {
      const list = index.children.get(up);
      if (list) list.push(node.id);
      else index.children.set(up, [node.id]);
    }
  }
  return index;
}

/**
 * The ids that have children and sit above `depth` (a root is at 0): opening them shows levels 0..depth.
 * @param {TreeIndex} index
 * @param {number} depth
 * @returns {Set<NodeId>}
 */
export function expandedToDepth(index, depth) {
  return new Set([...index.children.keys()].filter((id) => /** @type {number} */ (index.depth.get(id)) < depth));
}

/**
 * Every id that has children ("expand all").
 * @param {TreeIndex} index
 * @returns {Set<NodeId>}
 */
export function expandableIds(index) {
  return new Set(index.children.keys());
}

/**
 * The ids on screen, in preorder: roots, and nodes whose ancestors are all expanded.
 * @param {TreeIndex} index
 * @param {Set<NodeId>} expanded
 * @returns {NodeId[]}
 */
export function visibleIds(index, expanded) {
  /** @type {Set<NodeId>} */ const shown = new Set();
  for (const id of index.order) {
    const up = index.parent.get(id);
    if (up === null || up === undefined || (shown.has(up) && expanded.has(up))) shown.add(id);
  }
  return index.order.filter((id) => shown.has(id));
}

/**
 * The deepest level to open at first such that at most `maxRows` rows show (0: roots only).
 * @param {TreeIndex} index
 * @param {number} [maxRows]
 * @returns {number}
 */
export function autoDepth(index, maxRows = AUTO_ROWS) {
  /** @type {number[]} */ const perLevel = [];
  for (const d of index.depth.values()) perLevel[d] = (perLevel[d] || 0) + 1;
  let rows = perLevel[0] || 0;
  let depth = 0;
  while (depth + 1 < perLevel.length && rows + perLevel[depth + 1] <= maxRows) {
    depth += 1;
    rows += perLevel[depth];
  }
  return depth;
}

/**
 * A node and its ancestors' ids, from the root down.
 * @param {TreeIndex} index
 * @param {NodeId} id
 * @returns {NodeId[]}
 */
export function pathTo(index, id) {
  /** @type {NodeId[]} */ const path = [];
  for (let at = /** @type {NodeId|null|undefined} */ (id); at !== null && at !== undefined; at = index.parent.get(at)) {
    path.unshift(at);
  }
  return path;
}

/**
 * A node's id and every id under it.
 * @param {TreeIndex} index
 * @param {NodeId} id
 * @returns {NodeId[]}
 */
export function subtreeIds(index, id) {
  const out = [id];
  for (let i = 0; i < out.length; i += 1) out.push(...(index.children.get(out[i]) || []));
  return out;
}

/**
 * @typedef {object} TreeTable
 * @property {HTMLElement} element the table (lib/table.js's wrapper)
 * @property {() => void} expandAll
 * @property {() => void} collapseAll
 * @property {(id: NodeId) => void} reveal opens a node's ancestors, marks its row selected and scrolls the
 *   table's own box (not the page) to it
 * @property {() => Set<NodeId>} expanded a copy of the open ids
 */

/**
 * Builds a tree table. The first column holds the tree: indentation, the toggle (a button with
 * `aria-expanded`; Alt+click opens or closes the whole branch) and the name, which `render` may
 * replace (e.g. by a button). Columns do not sort: a flat sort would tear the tree apart.
 * @param {object} options
 * @param {TreeNode[]} options.nodes in preorder
 * @param {import("./table.js").Column} options.nameColumn the tree column (`render` optional)
 * @param {import("./table.js").Column[]} options.columns the other columns
 * @param {number} [options.depth] levels open at first (default: {@link autoDepth})
 * @param {string} [options.caption]
 * @param {string} [options.testid]
 * @param {(node: any) => string} [options.rowClass]
 * @param {(expanded: Set<NodeId>) => void} [options.onToggle]
 * @returns {TreeTable}
 */
export function buildTreeTable({ nodes, nameColumn, columns, depth, caption, testid, rowClass, onToggle }) {
  const index = treeIndex(nodes);
  let expanded = expandedToDepth(index, depth === undefined ? autoDepth(index) : depth);
  /** @type {Map<NodeId, HTMLButtonElement>} */ const toggles = new Map();
  /** @type {Map<NodeId, HTMLElement>} */ const rows = new Map();
  // Row data attributes hold ids as text; this finds the id (number or string) again.
  const idOfText = new Map(index.order.map((id) => [String(id), id]));

  /** @param {any} node @returns {Node} */
  const treeCell = (node) => {
    const kids = index.children.get(node.id);
    const name = nameColumn.render ? nameColumn.render(node) : String(node[nameColumn.key] ?? "");
    let toggle;
    if (kids) {
      const label = String(node[nameColumn.key] ?? node.id);
      toggle = /** @type {HTMLButtonElement} */ (el("button", {
        class: "mod-toggle", testid: "tree-toggle",
        title: `Show or hide the ${kids.length} row${kids.length === 1 ? "" : "s"} under it (Alt+click: the whole branch)`,
        attrs: { type: "button", "aria-label": `Expand ${label}`, "aria-expanded": "false" },
      }));
      toggles.set(node.id, toggle);
    } else {
      toggle = el("span", { class: "mod-toggle mod-toggle-leaf", attrs: { "aria-hidden": "true" } });
    }
    const cell = el("span", { class: "mod-tree-cell" }, [
      toggle, typeof name === "string" ? el("span", { class: "mod-tree-name", text: name, title: name }) : name,
    ]);
    cell.style.setProperty("--mod-depth", String(index.depth.get(node.id) || 0));
    return cell;
  };

  const element = buildTable({
    caption, testid, rowClass,
    columns: [
      { ...nameColumn, render: treeCell, sortable: false, cellClass: `cell-name mod-tree-col ${nameColumn.cellClass || ""}`.trim() },
      ...columns.map((c) => ({ ...c, sortable: false })),
    ],
    rows: nodes,
  });
  // buildTable keeps the given order when unsorted: the body's rows are the nodes, one for one.
  const trs = element.querySelectorAll("tbody tr");
  nodes.forEach((node, i) => {
    const tr = /** @type {HTMLElement} */ (trs[i]);
    tr.dataset.nodeId = String(node.id);
    tr.dataset.depth = String(index.depth.get(node.id) || 0);
    rows.set(node.id, tr);
  });

  function apply() {
    const shown = new Set(visibleIds(index, expanded));
    for (const [id, tr] of rows) tr.hidden = !shown.has(id);
    for (const [id, button] of toggles) {
      const open = expanded.has(id);
      button.setAttribute("aria-expanded", String(open));
      const label = button.getAttribute("aria-label") || "";
      button.setAttribute("aria-label", label.replace(/^(Expand|Collapse) /, open ? "Collapse " : "Expand "));
    }
  }

  /** @param {Set<NodeId>} next */
  function set(next) {
    expanded = next;
    apply();
    if (onToggle) onToggle(new Set(expanded));
  }

  element.addEventListener("click", (event) => {
    const button = /** @type {Element} */ (event.target).closest(".mod-toggle");
    if (!button || !(button instanceof HTMLButtonElement)) return;
    const tr = button.closest("tr");
    if (!tr || tr.dataset.nodeId === undefined) return;
    const id = idOfText.get(tr.dataset.nodeId);
    if (id === undefined) return;
    const next = new Set(expanded);
    const open = !expanded.has(id);
    const affected = /** @type {MouseEvent} */ (event).altKey ? subtreeIds(index, id).filter((n) => index.children.has(n)) : [id];
    for (const n of affected) {
      if (open) next.add(n);
      else next.delete(n);
    }
    set(next);
  });

  apply();
  return {
    element,
    expandAll: () => set(expandableIds(index)),
    collapseAll: () => set(new Set()),
    reveal(id) {
      const tr = rows.get(id);
      if (!tr) return;
      const next = new Set(expanded);
      for (const up of pathTo(index, id).slice(0, -1)) next.add(up);
      set(next);
      for (const other of rows.values()) other.classList.toggle("row-selected", other === tr);
      // Scrolling the page would move what was clicked (a chart above) out of sight.
      const box = tr.closest(".table-wrap");
      if (box && box.scrollHeight > box.clientHeight) {
        const offset = tr.getBoundingClientRect().top - box.getBoundingClientRect().top;
        box.scrollTop += offset - box.clientHeight / 2;
      }
    },
    expanded: () => new Set(expanded),
  };
}
