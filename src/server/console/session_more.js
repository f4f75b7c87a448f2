// The rest of a session's page: Fork (a new session with this one's history, opened at once),
// Roll back (drop the last task from the context; files are not reverted), the queued tasks
// with Cancel, and the schedules with Add schedule and Delete. Every text goes in as text.

import { call, enc } from './api.js';
import { el } from './dom.js';

// The panel of session `id`; `act(what, fn)` runs an action and reports it on the page.
// `update(view)` takes each polled `GET /v1/sessions/{id}` answer.
export function sessionMore(id, act) {
  const base = '/v1/sessions/' + enc(id);
  const queue = el('ul', { class: 'queue-list' });
  const queueBox = el('section', { class: 'queue', 'aria-label': 'Queued tasks', hidden: true },
    el('h2', {}, 'Queued tasks'), queue);
  const schedules = el('ul', { class: 'schedule-list' });
  const cron = el('input', { type: 'text', 'aria-label': 'Cron pattern', placeholder: '*/5 * * * *', size: 14 });
  const schedText = el('input', { type: 'text', 'aria-label': 'Scheduled task text', placeholder: 'Task text' });
  const zone = el('input', { type: 'text', 'aria-label': 'Time zone', placeholder: 'UTC', size: 12 });
  let shownQueue = '';

  async function loadSchedules() {
    try {
      const answer = await call('GET', base + '/schedules');
      schedules.replaceChildren(...(answer.schedules || []).map((s) =>
        el('li', { 'data-schedule': s.schedule_id },
          el('code', {}, s.cron), ' ', s.timezone, ' · ', s.text, ' · if busy: ', s.if_busy, ' ',
          el('button', {
            type: 'button', 'aria-label': 'Delete schedule ' + s.schedule_id,
            onclick: () => act('Delete schedule', async () => {
              await call('DELETE', `${base}/schedules/${enc(s.schedule_id)}`);
              await loadSchedules();
              return { status: s.schedule_id };
            }),
          }, 'Delete'))));
    } catch (e) {
      schedules.replaceChildren(el('li', {}, 'Schedules cannot be read: ' + e.message));
    }
  }

  async function addSchedule(ev) {
    ev.preventDefault();
    const body = { cron: cron.value, text: schedText.value };
    if (zone.value.trim()) body.timezone = zone.value.trim();
    if (await act('Add schedule', async () => {
      const made = await call('POST', base + '/schedules', body);
      return { status: made.schedule_id };
    })) {
      cron.value = '';
      schedText.value = '';
    }
    await loadSchedules();
  }

  const panel = el('div', { class: 'more' },
    el('div', { class: 'controls' },
      el('button', {
        type: 'button',
        onclick: () => act('Fork', async () => {
          const made = await call('POST', base + '/fork', {});
          location.hash = '#/sessions/' + enc(made.session_id);
          return { status: made.session_id };
        }),
      }, 'Fork'),
      el('button', {
        type: 'button',
        onclick: () => act('Roll back', async () => {
          const r = await call('POST', base + '/rollback', { tasks: 1 });
          return { status: `dropped ${r.dropped_tasks} task(s); files ${r.files_reverted ? '' : 'not '}reverted` };
        }),
      }, 'Roll back last task')),
    queueBox,
    el('section', { class: 'schedules', 'aria-label': 'Schedules' },
      el('h2', {}, 'Schedules'), schedules,
      el('form', { class: 'schedule-form', onsubmit: addSchedule },
        cron, ' ', schedText, ' ', zone, ' ', el('button', { type: 'submit' }, 'Add schedule'))));

  function update(view) {
    const list = view.queue || [];
    const key = list.map((q) => q.entry_id).join(' ');
    if (key === shownQueue) return;
    shownQueue = key;
    queueBox.hidden = list.length === 0;
    queue.replaceChildren(...list.map((q) =>
      el('li', { 'data-entry': q.entry_id }, q.text, ' ',
        el('button', {
          type: 'button', 'aria-label': 'Cancel queued task ' + q.entry_id,
          onclick: () => act('Cancel queued task', () =>
            call('DELETE', `${base}/queue/${enc(q.entry_id)}`)),
        }, 'Cancel'))));
  }

  loadSchedules();
  return { panel, update };
}
