// A session's transcript. Every message is rendered with text nodes only (see dom.js): an
// output holding `<script>` or `<img onerror=…>` shows those characters and runs nothing.
//
// Messages come from two sources that overlap (the event stream, replayed after a reconnect,
// and the recorded history of `/messages`), so each is added once, keyed by its JSON, and
// placed by its timestamp: the order is the session's whatever the order of arrival.
// A subagent's messages (`origin`) go into a box of their own, which their timestamps put
// under the call that started the subagent.

import { el } from './dom.js';

// Messages kept at most; past it the transcript says so (the trace has everything).
const MAX_MESSAGES = 20000;
// An output longer than this (characters or lines) is folded.
const FOLD_CHARS = 1500;
const FOLD_LINES = 20;
const STEER = /^\[user_steering\]\n?([\s\S]*?)\n?\[\/user_steering\]$/;

export class Transcript {
  constructor(root) {
    this.root = root;
    this.seen = new Set();
    this.boxes = new Map();
    this.full = false;
  }

  // Adds one message (a parsed OmniMessage) unless it was added before.
  add(msg) {
    if (!msg || typeof msg !== 'object') return;
    const key = JSON.stringify(msg);
    if (this.seen.has(key)) return;
    if (this.seen.size >= MAX_MESSAGES) {
      if (!this.full) {
        this.full = true;
        this.root.append(el('p', { class: 'note' },
          `Only the first ${MAX_MESSAGES} messages are shown; download the trace for the rest.`));
      }
      return;
    }
    this.seen.add(key);
    const item = render(msg);
    if (!item) return;
    const ts = typeof msg.timestamp === 'string' ? msg.timestamp : '';
    item.dataset.ts = ts;
    const origin = Array.isArray(msg.origin) ? msg.origin.map(String) : [];
    place(this.box(origin, ts), item);
  }

  // The element that holds messages of `origin` (outer → inner child ids).
  box(origin, ts) {
    let parent = this.root;
    for (let i = 0; i < origin.length; i++) {
      const key = origin.slice(0, i + 1).join('/');
      let body = this.boxes.get(key);
      if (!body) {
        body = el('div', { class: 'sub-body' });
        const box = el('details', { class: 'subagent', open: true, 'data-origin': key },
          el('summary', {}, 'Subagent ' + origin[i]), body);
        box.dataset.ts = ts;
        place(parent, box);
        this.boxes.set(key, body);
      }
      parent = body;
    }
    return parent;
  }
}

// Inserts `item` into `parent` after every child with a timestamp not later than its own.
function place(parent, item) {
  const ts = item.dataset.ts;
  let before = null;
  for (let c = parent.lastElementChild; c; c = c.previousElementSibling) {
    if (c.dataset.ts === undefined || c.dataset.ts <= ts) break;
    before = c;
  }
  parent.insertBefore(item, before);
}

// A message box: a label, the text, and the kind as a class.
function box(kind, label, ...content) {
  return el('div', { class: 'msg kind-' + kind }, el('div', { class: 'who' }, label), ...content);
}

function note(kind, text) {
  return el('div', { class: 'msg note kind-' + kind }, text);
}

// Text in a <pre>, folded into a <details> when long.
function textBlock(text, what) {
  const s = String(text ?? '');
  const lines = s.split('\n').length;
  const pre = el('pre', {}, s);
  if (s.length <= FOLD_CHARS && lines <= FOLD_LINES) return pre;
  return el('details', { class: 'fold' },
    el('summary', {}, `${what}: ${lines} lines, ${s.length} characters (show)`), pre);
}

function pretty(args) {
  if (typeof args !== 'string') return JSON.stringify(args, null, 2);
  try {
    return JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    return args;
  }
}

function status(p) {
  return p.stop_reason && p.stop_reason !== 'completed' ? ` (${p.stop_reason})` : '';
}

// The element of one message, or null for what the transcript does not show.
export function render(msg) {
  const p = msg.payload && typeof msg.payload === 'object' ? msg.payload : {};
  if (msg.type === 'session_meta') {
    return note('session_meta', `Session ${p.session_id || ''} opened (model ${p.model_id || '?'}, ` +
      `workspace ${p.workspace || '?'})`);
  }
  switch (p.type) {
    case 'text': {
      const steer = p.role === 'user' && typeof p.text === 'string' ? STEER.exec(p.text) : null;
      if (steer) return box('steer', 'Steer', el('div', { class: 'text' }, steer[1]));
      const who = p.role === 'user' ? (p.sender ? `User (${p.sender})` : 'User') : 'Assistant';
      return box(p.role === 'user' ? 'user' : 'assistant', who + status(p),
        el('div', { class: 'text' }, String(p.text ?? '')));
    }
    case 'thinking':
      return box('thinking', 'Thinking', textBlock(p.thinking, 'Thinking'));
    case 'tool_call':
      return box('tool_call', `Tool call ${p.name} · ${p.tool_call_id}`, textBlock(pretty(p.arguments), 'Arguments'));
    case 'tool_call_output': {
      const images = Array.isArray(p.images) && p.images.length ? ` · ${p.images.length} image(s)` : '';
      return box('tool_call_output', `Output of ${p.tool_call_id}${status(p)}${images}`,
        textBlock(p.output, 'Output'));
    }
    case 'image_url':
    case 'inline_data':
      return note(p.type, `[${p.role || ''} image]`);
    case 'approval_decision': {
      const by = [p.source, p.decided_by && 'by ' + p.decided_by].filter(Boolean).join(', ');
      return note('approval_decision', `Call ${p.tool_call_id}: ${p.decision}${by ? ' (' + by + ')' : ''}` +
        (p.reason ? ' · ' + p.reason : ''));
    }
    case 'compaction_begin':
      return note('compaction', `Compaction started (${p.reason}, ${p.mode})`);
    case 'compaction_end':
      return note('compaction', `Compaction ended: ${p.status}` + (p.error_message ? ' · ' + p.error_message : ''));
    case 'abort':
      return note('abort', 'Aborted' + (p.reason ? ': ' + p.reason : ''));
    case 'task_end':
      return note('task_end', `Task ended: ${p.status}`);
    case 'request_end':
      return p.status && p.status !== 'completed'
        ? note('request_end', `Model request ${p.status}: ${p.error_message || ''}` +
          (p.retry_in_ms ? ` (retry in ${p.retry_in_ms} ms)` : ''))
        : null;
    case 'approval_mode_changed':
      return note('approval_mode_changed', `Approval mode: ${p.mode}`);
    case 'api_action':
      return note('api_action', `${p.by}: ${p.action}` + (p.mode ? ' ' + p.mode : ''));
    case 'approval_grant':
      return note('approval_grant', `Granted for the session: ${p.rule}`);
    case 'rollback':
      return note('rollback', `Rolled back ${p.tasks} task(s)`);
    case 'session_hibernated':
      return note('hibernation', 'Session hibernated');
    case 'session_resumed':
      return note('hibernation', 'Session resumed');
    case 'session_moved':
      return note('hibernation', 'Session moved to node ' + String(p.node ?? ''));
    case 'task_queued':
      return note('queue', 'Queued: ' + String(p.text ?? ''));
    case 'task_dequeued':
      return note('queue', `Left the queue (${p.reason})`);
    case 'messages_dropped':
      return note('dropped', String(p.text ?? ''));
    case 'hook_decision':
      return note('hook', `Hook ${p.event}: ${p.decision}` + (p.reason ? ' · ' + p.reason : ''));
    case 'hook_error':
      return note('hook', `Hook failed: ${p.command}`);
    default:
      return null;
  }
}
