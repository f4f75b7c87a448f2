// The console's entry: sign-in with the bearer token, and the hash router between the sessions
// list (`#/`) and a session's page (`#/sessions/<id>`).

import { ApiError, call, clearToken, setToken, token } from './api.js';
import { el } from './dom.js';
import { showList } from './list.js';
import { showSession } from './session.js';

const main = document.getElementById('main');
const signout = document.getElementById('signout');
let current = null;

function signIn(message) {
  const input = el('input', { id: 'token', type: 'password', autocomplete: 'off', required: true });
  const error = el('p', { class: 'error', role: 'alert' }, message || '');
  const form = el('form', { class: 'signin', onsubmit: async (ev) => {
    ev.preventDefault();
    setToken(input.value.trim());
    try {
      await call('GET', '/v1/sessions?limit=1');
      route();
    } catch (e) {
      clearToken();
      error.textContent = e instanceof ApiError && e.status === 401
        ? 'The server refused this token.' : e.message;
    }
  } },
  el('h1', {}, 'Sign in'),
  el('p', {}, 'The bearer token of this server (rookery serve prints where it is kept). ' +
    'It stays in this tab only.'),
  el('label', { for: 'token' }, 'Bearer token'), input,
  el('button', { type: 'submit' }, 'Sign in'), error);
  main.append(form);
  input.focus();
}

function route() {
  if (current) current.stop();
  current = null;
  main.replaceChildren();
  signout.hidden = !token();
  if (!token()) {
    signIn();
    return;
  }
  const m = location.hash.match(/^#\/sessions\/([^/]+)$/);
  current = m ? showSession(main, decodeURIComponent(m[1])) : showList(main);
}

signout.addEventListener('click', () => {
  clearToken();
  route();
});
window.addEventListener('hashchange', route);
window.addEventListener('rookery:unauthorized', () => {
  if (!token()) return;
  clearToken();
  if (current) current.stop();
  current = null;
  main.replaceChildren();
  signout.hidden = true;
  signIn('Signed out: the server refused the token.');
});
route();
