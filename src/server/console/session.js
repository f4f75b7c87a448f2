// A session's page: its status, owner, workspace and approval mode (polled), the pending
// approvals with Allow / Deny (by approval_id), the live transcript, a box to start a task or
// steer the running one, and Abort, Compact now, Download trace; fork, roll back, the queue and
// the schedules are in `session_more.js`.

import { allPages, call, enc, fetchBlob } from './api.js';
import { el, MODES, when } from './dom.js';
import { sessionMore } from './session_more.js';
import { openStream } from './stream.js';
import { Transcript } from './transcript.js';

const POLL_MS = 1000;
// History pages read at most (1000 messages each).
const MAX_PAGES = 100;

export function showSession(root, id) {
  const base = '/v1/sessions/' + enc(id);
  const error = el('p', { class: 'error', role: 'alert' });
  const info = el('p', { class: 'info', role: 'status' });
  const badge = el('span', { class: 'badge' });
  const meta = el('span', { class: 'meta' });
  const conn = el('span', { class: 'conn', 'aria-label': 'Event stream' });
  const mode = el('select', { 'aria-label': 'Approval mode' },
    ...MODES.map((m) => el('option', { value: m }, m)));
  const approvals = el('div', { class: 'approval-list' });
  const approvalBox = el('section', { class: 'approvals', 'aria-label': 'Pending approvals', hidden: true },
    el('h2', {}, 'Pending approvals'), approvals);
  const transcriptEl = el('section', { class: 'transcript', 'aria-label': 'Transcript' });
  const text = el('textarea', { rows: 3, 'aria-label': 'Task or steer text',
    placeholder: 'A task to start, or a steer for the running one' });
  const transcript = new Transcript(transcriptEl);

  // Runs an action, shows its error or `done`, refreshes the status.
  async function act(what, fn) {
    error.textContent = '';
    try {
      const answer = await fn();
      info.textContent = what + (answer && answer.status ? ': ' + answer.status : '') +
        (answer && answer.steer ? ': ' + answer.steer : '');
      refresh();
      return true;
    } catch (e) {
      error.textContent = what + ' failed: ' + e.message;
      return false;
    }
  }
  const more = sessionMore(id, act);


  async function send(path, what) {
    const t = text.value;
    if (!t.trim()) {
      error.textContent = 'Write the text first.';
      return;
    }
    if (await act(what, () => call('POST', base + path, { text: t }))) text.value = '';
  }

  // The whole trace as the server recorded it (every record, events included), as a file.
  async function download() {
    await act('Download', async () => {
      const blob = await fetchBlob(base + '/trace');
      const url = URL.createObjectURL(blob);
      const a = el('a', { href: url, download: id + '.jsonl' });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
      return { status: `${blob.size} bytes` };
    });
  }

  mode.addEventListener('change', () =>
    act('Approval mode', () => call('PUT', base + '/approval_mode', { mode: mode.value })));

  root.append(
    el('p', { class: 'crumbs' }, el('a', { href: '#/' }, '← Sessions')),
    el('h1', { class: 'session-id' }, id),
    el('div', { class: 'session-head' }, badge, meta, conn),
    el('div', { class: 'controls' },
      el('label', {}, 'Approval mode ', mode),
      el('button', { type: 'button', onclick: () => act('Abort', () => call('POST', base + '/abort')) }, 'Abort'),
      el('button', { type: 'button', onclick: () => act('Compact', () => call('POST', base + '/compact')) }, 'Compact now'),
      el('button', { type: 'button', onclick: download }, 'Download trace')),
    more.panel, error, info, approvalBox, transcriptEl,
    el('form', { class: 'composer', onsubmit: (ev) => { ev.preventDefault(); send('/tasks', 'Start task'); } },
      text,
      el('div', { class: 'buttons' },
        el('button', { type: 'submit' }, 'Start task'),
        el('button', { type: 'button', onclick: () => send('/steer', 'Steer') }, 'Steer'))));

  let stopped = false;
  let timer = null;
  let shownApprovals = '';

  function renderApprovals(list) {
    const key = list.map((a) => a.approval_id).join(' ');
    if (key === shownApprovals) return;
    shownApprovals = key;
    approvalBox.hidden = list.length === 0;
    approvals.replaceChildren(...list.map((a) => {
      const decide = (decision) => act(decision === 'allow' ? 'Allowed' : 'Denied', () =>
        call('POST', `${base}/approvals/${enc(a.approval_id)}`, { decision }));
      const origin = Array.isArray(a.origin) && a.origin.length ? ' in subagent ' + a.origin.join(' › ') : '';
      return el('div', { class: 'approval', 'data-approval': a.approval_id },
        el('div', { class: 'who' }, `${a.name} · ${a.tool_call_id}${origin}`),
        el('pre', {}, typeof a.arguments === 'string' ? a.arguments : JSON.stringify(a.arguments)),
        el('div', { class: 'buttons' },
          el('button', { type: 'button', class: 'allow', onclick: () => decide('allow') }, 'Allow'),
          el('button', { type: 'button', class: 'deny', onclick: () => decide('deny') }, 'Deny')));
    }));
  }

  async function refresh() {
    try {
      const [s, a] = await Promise.all([call('GET', base), call('GET', base + '/approvals')]);
      badge.textContent = s.status;
      badge.className = 'badge ' + s.status;
      meta.textContent = [s.owner && 'owner ' + s.owner, 'workspace ' + s.workspace,
        'last activity ' + when(s.last_activity)].filter(Boolean).join(' · ');
      if (document.activeElement !== mode) mode.value = s.approval_mode;
      renderApprovals(a.approvals || []);
      more.update(s);
    } catch (e) {
      badge.textContent = e.status === 0 ? 'unreachable' : 'error';
      badge.className = 'badge failed';
    }
  }

  async function poll() {
    await refresh();
    if (!stopped) timer = setTimeout(poll, POLL_MS);
  }

  async function history() {
    try {
      for (const m of await allPages(base + '/messages', 'messages', MAX_PAGES)) transcript.add(m);
    } catch (e) {
      error.textContent = 'Cannot read the history: ' + e.message;
    }
  }

  const stream = openStream(id, {
    message: (m) => transcript.add(m),
    state: (s) => { conn.textContent = 'stream ' + s; conn.dataset.state = s.split(' ')[0]; },
    opened: history,
  });
  poll();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
      stream.stop();
    },
  };
}
