// The sessions list: every session the signed-in principal may see, with its live status
// (polled), owner (when there are several), workspace and last activity; filter by status,
// search, and a form to create a session.

import { allPages, call, enc } from './api.js';
import { el, MODES, when } from './dom.js';

const STATUSES = ['running', 'idle', 'hibernated', 'failed', 'closed'];
const POLL_MS = 2000;

export function showList(root) {
  const error = el('p', { class: 'error', role: 'alert' });
  const search = el('input', { type: 'search', 'aria-label': 'Search sessions',
    placeholder: 'Search id, owner, workspace' });
  const filter = el('select', { 'aria-label': 'Filter by status' },
    el('option', { value: '' }, 'any status'),
    ...STATUSES.map((s) => el('option', { value: s }, s)));
  const workspace = el('input', { type: 'text', 'aria-label': 'Workspace',
    placeholder: "workspace (default: the server's)" });
  const mode = el('select', { 'aria-label': 'Approval mode of the new session' },
    el('option', { value: '' }, "server's approval mode"),
    ...MODES.map((m) => el('option', { value: m }, m)));
  const create = el('form', { class: 'create', onsubmit: async (ev) => {
    ev.preventDefault();
    const body = {};
    if (workspace.value.trim()) body.workspace = workspace.value.trim();
    if (mode.value) body.approval_mode = mode.value;
    try {
      const made = await call('POST', '/v1/sessions', body);
      location.hash = '#/sessions/' + enc(made.session_id);
    } catch (e) {
      error.textContent = e.message;
    }
  } }, workspace, mode, el('button', { type: 'submit' }, 'Create session'));
  const head = el('thead');
  const body = el('tbody');
  const count = el('p', { class: 'count' });
  root.append(el('h1', {}, 'Sessions'), create,
    el('div', { class: 'filters' }, search, filter), error, count,
    el('table', { class: 'sessions' }, head, body));

  let sessions = [];
  let stopped = false;
  let timer = null;

  function render() {
    const owners = new Set(sessions.map((s) => s.owner || ''));
    const showOwner = owners.size > 1;
    const cols = ['Session', 'Status', ...(showOwner ? ['Owner'] : []), 'Workspace',
      'Last activity', 'Approvals'];
    head.replaceChildren(el('tr', {}, ...cols.map((c) => el('th', { scope: 'col' }, c))));
    const q = search.value.trim().toLowerCase();
    const shown = sessions.filter((s) => (!filter.value || s.status === filter.value) &&
      (!q || [s.session_id, s.owner, s.workspace].some((f) => String(f || '').toLowerCase().includes(q))));
    body.replaceChildren(...shown.map((s) => el('tr', { 'data-session': s.session_id },
      el('td', {}, el('a', { href: '#/sessions/' + enc(s.session_id) }, s.session_id)),
      el('td', {}, el('span', { class: 'badge ' + String(s.status) }, String(s.status))),
      showOwner ? el('td', {}, s.owner || '') : null,
      el('td', { class: 'path' }, String(s.workspace || '')),
      el('td', {}, when(s.last_activity || s.created_at)),
      el('td', {}, String(s.pending_approvals || 0)))));
    count.textContent = `${shown.length} of ${sessions.length} sessions`;
  }

  async function load() {
    try {
      sessions = await allPages('/v1/sessions', 'sessions', 10);
      error.textContent = '';
      render();
    } catch (e) {
      error.textContent = e.message;
    } finally {
      if (!stopped) timer = setTimeout(load, POLL_MS);
    }
  }

  search.addEventListener('input', render);
  filter.addEventListener('change', render);
  load();
  return { stop() { stopped = true; clearTimeout(timer); } };
}
