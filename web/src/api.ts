// How the app talks to the API (docs/api.md): JSON in the envelope
// {code, message, data}; the app branches on code, shows message to
// people, and never shows a raw body.
import type { components } from './api.gen';
import { appConfig, bearerToken, signOut } from './auth';
import { currentUser } from './user';

/** ApiError is every failure, already in words a person can act on. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly status: number,
    /** seconds, from Retry-After on 429 */
    readonly retryAfter?: number,
    /** the envelope's data: what a refusal refers to (a 409's request,
     * a 400's fields) */
    readonly data?: unknown,
  ) {
    super(message);
  }
}

export interface Result<T> {
  code: string;
  data: T;
  status: number;
}

// Words for codes whose server message is generic or missing.
const fallbackWords: Record<string, string> = {
  UNAUTHENTICATED: 'You are not signed in. Sign in (or, in the local run, pick a user) at the top of the page.',
  ACCESS_DENIED: 'Access denied. Your account may not do this.',
  NOT_FOUND: 'Nothing was found under that name. Check the ID, or it may belong to someone else.',
  RATE_LIMITED: 'Too many attempts. Please wait a moment and try again.',
  RETRY_LATER: 'The service is busy. Please try again in a moment.',
  INTERNAL_ERROR: 'Something went wrong on our side. Try again later; if it keeps happening, contact the maintainers.',
};

function wordsFor(code: string, message: string, status: number): string {
  if (code === 'INTERNAL_ERROR' || status >= 500) return fallbackWords[code] ?? fallbackWords.INTERNAL_ERROR;
  if (code === 'UNAUTHENTICATED') return fallbackWords.UNAUTHENTICATED;
  if (message) return message;
  return fallbackWords[code] ?? `The request was refused (HTTP ${status}).`;
}

/** identityHeaders name the caller: a signed-in person (OIDC) by their
 * token; the local run's picker header only without one, so the two never
 * disagree — and only where the server offers the picker (app config
 * userPicker: the local run): anywhere else no page ever sends it,
 * whatever localStorage holds. */
export async function identityHeaders(): Promise<Record<string, string>> {
  const token = bearerToken();
  if (token) return { Authorization: `Bearer ${token}` };
  const user = (await appConfig()).userPicker ? currentUser() : '';
  return user ? { 'X-Auth-Request-User': user } : {};
}

export async function call<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Result<T>> {
  const token = bearerToken();
  const h: Record<string, string> = { Accept: 'application/json', ...headers, ...(await identityHeaders()) };
  if (body !== undefined) h['Content-Type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    throw new ApiError('Cannot reach changeflow. Check your connection and try again.', 'NETWORK', 0);
  }
  let env: { code?: unknown; message?: unknown; data?: unknown } | null = null;
  try {
    env = await res.json();
  } catch {
    env = null;
  }
  if (!env || typeof env.code !== 'string') {
    throw new ApiError(`The server answered unexpectedly (HTTP ${res.status}). Try again in a moment.`, 'UNEXPECTED', res.status);
  }
  const code = env.code;
  const message = typeof env.message === 'string' ? env.message : '';
  if (!res.ok) {
    // The server no longer takes the token (expired, keys rotated): drop
    // it, so the page offers "Sign in" again.
    if (res.status === 401 && token) signOut();
    const ra = Number(res.headers.get('Retry-After'));
    throw new ApiError(wordsFor(code, message, res.status), code, res.status, Number.isFinite(ra) && ra > 0 ? ra : undefined, res.status < 500 ? env.data : undefined);
  }
  return { code, data: env.data as T, status: res.status };
}

export const get = <T>(path: string) => call<T>('GET', path);

// Shapes (docs/api.md), by the names the pages use. They are derived from
// api.gen.ts, which is generated from docs/openapi.yaml (`npm run gen:api`;
// make test fails when it is stale), so a field the server does not
// describe cannot be read here, and the Go tests hold every answer to that
// same description.
type Schemas = components['schemas'];

/** Target is one row of GET /api/targets. */
export type Target = Schemas['TargetListAnswer']['data']['items'][number];

/** Mine is a target's "mine" (docs/api.md, GET /api/targets): the
 * caller's access on it, or their request on its way. operationId is the
 * request to open and act on (give back, renew). */
export type Mine = Schemas['TargetMine'];

/** Step is the internal step, for troubleshooting. */
export type Step = Schemas['Step'];

/** RequestView is a request as its owner reads it (GET
 * /api/requests/{operationId}, and each row of GET /api/requests). */
export type RequestView = Schemas['Request'];

/** ProgressStep is one step of the step bar (docs/api.md, "The step
 * bar"). */
export type ProgressStep = Schemas['ProgressStep'];

/** Me is GET /api/me: who the server takes the caller to be, and whether
 * the Operations tab is theirs (the server decides; the API still checks
 * every operations call). */
export type Me = Schemas['MeAnswer']['data'];

/** FieldProblem is one entry of a 400's data.fields: which field, and
 * what is wrong with it in the server's words, completing the field's
 * name ("must be between 1 and 30 for this target"). */
export type FieldProblem = Schemas['FieldProblem'];

/** fieldProblems reads a 400's problems per field: data.fields when the
 * server sends them, else the message when it names a field ("reason must
 * be …", "days must be …"), so the form shows the server's words beside
 * the field either way. */
export function fieldProblems(err: ApiError, fields: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  if (err.code !== 'INVALID_ARGUMENT') return out;
  const listed = (err.data as { fields?: unknown } | null | undefined)?.fields;
  if (Array.isArray(listed)) {
    for (const f of listed as FieldProblem[]) {
      // Shown as the server's one-line message words it: "days must be …".
      if (f && typeof f.field === 'string' && typeof f.problem === 'string' && fields.includes(f.field)) out[f.field] = `${f.field} ${f.problem}.`;
    }
    if (Object.keys(out).length > 0) return out;
  }
  for (const f of fields) {
    if (err.message.startsWith(`${f} `)) out[f] = err.message;
  }
  return out;
}

/** download fetches path as the signed-in person (a plain link would go
 * without their login) and saves it as filename; a refusal throws an
 * ApiError in the server's words. */
export async function download(path: string, filename: string): Promise<void> {
  let res: Response;
  try {
    res = await fetch(path, { headers: await identityHeaders() });
  } catch {
    throw new ApiError('Cannot reach changeflow. Check your connection and try again.', 'NETWORK', 0);
  }
  if (!res.ok) {
    let message = `The server answered HTTP ${res.status}.`;
    try {
      const env = await res.json();
      if (typeof env?.message === 'string' && env.message) message = env.message;
    } catch {
      // not the envelope: keep the status
    }
    throw new ApiError(message, 'DOWNLOAD', res.status);
  }
  const url = URL.createObjectURL(await res.blob());
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  document.body.appendChild(a);
  a.click();
  a.remove();
  // Released after the click has handed the file to the browser.
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
