// The HTTP/JSON API client (README "HTTP API"). Every call resolves to the protobuf JSON
// mapping of the response, with int64 fields (steps, ids) still strings; failures reject
// with an ApiError carrying the server's message.

export class ApiError extends Error {
  constructor(status, message, path) {
    super(message);
    this.status = status;
    this.path = path;
  }
}

const BASE = new URL('api/v1/', window.location.href);

async function get(path, params = {}) {
  const url = new URL(path, BASE);
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(key, value);
  }
  let response;
  try {
    response = await fetch(url, { cache: 'no-store' });
  } catch (err) {
    throw new ApiError(0, `cannot reach the server (${err.message})`, path);
  }
  const text = await response.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : {};
  } catch {
    body = null;
  }
  if (!response.ok) {
    const message = body && body.error ? body.error.message : text.trim() || response.statusText;
    throw new ApiError(response.status, `${path}: ${message} (HTTP ${response.status})`, path);
  }
  if (body === null) throw new ApiError(response.status, `${path}: the answer is not JSON`, path);
  return body;
}

export const api = {
  runs: () => get('runs').then((r) => r.runs || []),
  series: (params) => get('series', params),
  trajectory: (params) => get('trajectory', params),
  jobs: (run, limit = 20) => get('jobs', { run, limit }).then((r) => r.jobs || []),
};
