// A session's live event stream over EventSource, authenticated by a stream token (an
// EventSource cannot send Authorization).
//
// A blip the browser recovers from itself reconnects with `Last-Event-ID` (the browser sends
// it). When the stream fails for good (the server restarted, so its stream token and its
// numbering are gone, or the token expired), a new token is fetched and the stream reopened
// from the start of the server's log: everything it still holds is replayed, and the caller
// (told by `opened`) reads the recorded history again. The transcript adds each message once,
// so nothing is shown twice and nothing recorded meanwhile is missed.

import { call, enc } from './api.js';

// Every event name the server sends (the payload types), partials left out: the transcript
// shows complete messages only.
const NAMES = ['message', 'session_meta', 'text', 'image_url', 'inline_data', 'thinking',
  'inline_thinking', 'tool_call', 'tool_call_output', 'request_begin', 'request_end',
  'approval_decision', 'abort', 'token_usage', 'compaction_begin', 'compaction_end', 'subagent',
  'tool_list_ready', 'mcp_connect_begin', 'mcp_connect_end', 'goal_finished', 'command_evicted',
  'task_end', 'api_action', 'approval_mode_changed', 'approval_grant', 'approval_grant_revoked',
  'forked_history', 'model_switched', 'hook_rewrite', 'hook_decision', 'hook_error', 'rollback',
  'session_hibernated', 'session_resumed', 'session_moved', 'task_queued', 'task_dequeued',
  'messages_dropped'];

const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 5000;

// Opens session `id`'s stream. `on.message(msg)` for each message, `on.state(text)` for the
// connection's state, `on.opened()` each time a new stream (not a browser retry) is open.
export function openStream(id, on) {
  let source = null;
  let stopped = false;
  let timer = null;
  let delay = FIRST_DELAY_MS;

  function retry(why) {
    on.state('reconnecting (' + why + ')');
    clearTimeout(timer);
    timer = setTimeout(connect, delay);
    delay = Math.min(delay * 2, MAX_DELAY_MS);
  }

  async function connect() {
    if (stopped) return;
    on.state('connecting');
    let token;
    try {
      token = (await call('POST', `/v1/sessions/${enc(id)}/stream_token`)).stream_token;
    } catch (e) {
      if (stopped || e.status === 401) return;
      if (e.status === 404) on.state('closed: ' + e.message);
      else retry(e.message);
      return;
    }
    if (stopped) return;
    const es = new EventSource(`/v1/sessions/${enc(id)}/events?stream_token=${enc(token)}` +
      '&last_event_id=0');
    source = es;
    let fresh = true;
    es.onopen = () => {
      delay = FIRST_DELAY_MS;
      on.state('live');
      if (fresh) on.opened();
      fresh = false;
    };
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) {
        es.close();
        if (source === es) source = null;
        retry('stream closed');
      } else {
        on.state('reconnecting');
      }
    };
    const handle = (ev) => {
      let msg;
      try {
        msg = JSON.parse(ev.data);
      } catch {
        return;
      }
      on.message(msg);
    };
    for (const name of NAMES) es.addEventListener(name, handle);
  }

  connect();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
      if (source) source.close();
    },
  };
}
