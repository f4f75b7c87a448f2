// Every request the console makes to the API. The bearer token lives in sessionStorage (gone
// when the tab closes; never in a URL or a cookie) and goes in the Authorization header. A 401
// signs the console out.

const KEY = 'rookery.token';

export const token = () => sessionStorage.getItem(KEY);
export const setToken = (t) => sessionStorage.setItem(KEY, t);
export const clearToken = () => sessionStorage.removeItem(KEY);
export const enc = encodeURIComponent;

// A failed request: the HTTP status (0 when the server could not be reached) and the API's
// error code and message.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// `method path` with an optional JSON body; the parsed answer (null when it has none).
export async function call(method, path, body) {
  const headers = { authorization: 'Bearer ' + (token() || '') };
  const init = { method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, 'unreachable', 'The server cannot be reached (' + e.message + ').');
  }
  const text = await resp.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!resp.ok) {
    const err = (data && data.error) || {};
    if (resp.status === 401) window.dispatchEvent(new CustomEvent('rookery:unauthorized'));
    throw new ApiError(resp.status, err.code || 'http_' + resp.status,
      (err.message || 'HTTP ' + resp.status) + (err.code ? ' (' + err.code + ')' : ''));
  }
  return data;
}

// The body of `GET path` as a Blob (a download), with the same errors as `call`.
export async function fetchBlob(path) {
  let resp;
  try {
    resp = await fetch(path, { headers: { authorization: 'Bearer ' + (token() || '') }, cache: 'no-store' });
  } catch (e) {
    throw new ApiError(0, 'unreachable', 'The server cannot be reached (' + e.message + ').');
  }
  if (!resp.ok) {
    let err = {};
    try {
      err = (await resp.json()).error || {};
    } catch {
      err = {};
    }
    if (resp.status === 401) window.dispatchEvent(new CustomEvent('rookery:unauthorized'));
    throw new ApiError(resp.status, err.code || 'http_' + resp.status,
      (err.message || 'HTTP ' + resp.status) + (err.code ? ' (' + err.code + ')' : ''));
  }
  return resp.blob();
}

// Every page of a paged list route (`key` is the list's field), at most `maxPages` pages.
export async function allPages(path, key, maxPages) {
  const out = [];
  let cursor = null;
  for (let i = 0; i < maxPages; i++) {
    const sep = path.includes('?') ? '&' : '?';
    const page = await call('GET', path + sep + 'limit=1000' + (cursor ? '&cursor=' + enc(cursor) : ''));
    out.push(...(page[key] || []));
    cursor = page.next_cursor;
    if (!cursor) break;
  }
  return out;
}
