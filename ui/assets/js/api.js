// The REST API, as scripts use it (docs/rest.md): Basic credentials on every call, the Kylin
// envelope unwrapped. credentials:'omit' keeps the browser from prompting on a 401 and from
// sending credentials it cached itself: only the header below is sent.
const KEY = 'qilin.auth';
export const BASE = '/kylin/api';

export class ApiError extends Error {
  constructor(status, msg, code) {
    super(msg);
    this.status = status;
    this.code = code || '';
  }
}

function encode(user, password) {
  const bytes = new TextEncoder().encode(`${user}:${password}`);
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

export const auth = {
  get() { return sessionStorage.getItem(KEY); },
  set(user, password) { sessionStorage.setItem(KEY, encode(user, password)); },
  clear() { sessionStorage.removeItem(KEY); },
};

let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

export async function call(method, path, { query, body, token } = {}) {
  const url = new URL(BASE + path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v === undefined || v === null || v === '') continue;
    if (Array.isArray(v)) { if (v.length) url.searchParams.set(k, v.join(',')); } else url.searchParams.set(k, v);
  }
  const headers = { Accept: 'application/json' };
  const cred = token || auth.get();
  if (cred) headers.Authorization = `Basic ${cred}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json;charset=utf-8';
  let res;
  try {
    res = await fetch(url, { method, headers, credentials: 'omit', cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new ApiError(0, `the server cannot be reached (${e.message})`, '');
  }
  let env = null;
  try { env = await res.json(); } catch { /* not JSON */ }
  if (res.status === 401 && !token) onUnauthorized();
  if (!res.ok || !env || env.code !== '000') {
    const msg = env && env.msg ? env.msg : `${method} ${url.pathname}: HTTP ${res.status}`;
    throw new ApiError(res.status, msg, env && env.error_code);
  }
  return env.data;
}

export const get = (path, query) => call('GET', path, { query });
export const put = (path, body) => call('PUT', path, { body });
export const post = (path, body) => call('POST', path, { body });

// Every page of a listing (page_size at most the server's page-size-max, 1000 by default).
export async function getAll(path, query, pageSize = 1000) {
  const out = [];
  for (let page = 0; page < 10000; page++) {
    const d = await get(path, { ...query, page_offset: page, page_size: pageSize });
    out.push(...d.value);
    if (out.length >= d.total_size || d.value.length === 0) break;
  }
  return out;
}

export const enc = encodeURIComponent;
