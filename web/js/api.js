// The HTTP/JSON API client (docs/api.md "HTTP API"). Every call resolves to the protobuf JSON
// mapping of the response, with int64 fields (steps, ids) still strings; failures reject
// with an ApiError carrying the server's message. A server with tokens (docs/deploy.md
// "Team setup") answers 401 without one: the page then asks for a token once, keeps it in the
// browser's localStorage and sends it as `Authorization: Bearer TOKEN`.

export class ApiError extends Error {
  constructor(status, message, path) {
    super(message);
    this.status = status;
    this.path = path;
  }
}

const BASE = new URL('api/v1/', window.location.href);
const TOKEN_KEY = 'anisoscope.token';

const storedToken = () => window.localStorage.getItem(TOKEN_KEY) || '';
let asking = null;  // the prompt in progress, shared by every request refused meanwhile

// Resolves true when a token other than `refused` is now stored (asking for it if needed).
function askForToken(refused) {
  if (storedToken() !== refused) return Promise.resolve(true);
  if (!asking) {
    asking = new Promise((resolve) => setTimeout(() => {
      const entered = (window.prompt(
        'This anisoscope server wants a token (your admin makes one with ' +
        '"anisoscope-server tokens create --role reader"). Token:') || '').trim();
      if (entered) window.localStorage.setItem(TOKEN_KEY, entered);
      asking = null;
      resolve(entered !== '');
    }, 0));
  }
  return asking;
}

async function fetchWithToken(url, path) {
  for (let attempt = 0; ; attempt++) {
    const token = storedToken();
    let response;
    try {
      response = await fetch(url, {
        cache: 'no-cache',  // revalidate: the server answers 304 when nothing changed (ETag)
        headers: token ? { Authorization: `Bearer ${token}` } : {},
      });
    } catch (err) {
      throw new ApiError(0, `cannot reach the server (${err.message})`, path);
    }
    if (response.status !== 401 || attempt > 0 || !(await askForToken(token))) return response;
  }
}

async function get(path, params = {}) {
  const url = new URL(path, BASE);
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(key, value);
  }
  const response = await fetchWithToken(url, path);
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
  vectors: (params) => get('vectors', params),
  trajectory: (params) => get('trajectory', params),
  tokenCloud: (params) => get('token_cloud', params),
  correlation: (params) => get('correlation', params),
  isotropicBaseline: (dimension) => get('isotropic_baseline', { dimension }),
  metricsCatalog: () => get('metrics-catalog').then((r) => r.metrics || []),
  jobs: (run, limit = 20) => get('jobs', { run, limit }).then((r) => r.jobs || []),
  alarms: (run) => get('alarms', { run }).then((r) => r.alarms || []),
};
