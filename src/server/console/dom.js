// Building elements. Text always goes in as text nodes (`append` of a string, `textContent`),
// never as markup: nothing here parses HTML, so no model or tool text can become an element.

// `el('button', {type: 'button', onclick: f}, 'Allow')`: props are attributes, except `class`,
// `text` (the textContent) and `on…` (listeners); children are nodes or strings (as text).
export function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = String(v);
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) {
    if (c !== null && c !== undefined && c !== false) e.append(c);
  }
  return e;
}

// A time as the reader's local date and time, or '' for none.
export function when(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
}

// The approval modes a session can have.
export const MODES = ['always-ask', 'read-only', 'allow-all', 'deny-all'];
