// OIDC login (docs/api.md, "Login": OIDC login when configured): the authorization
// code flow with PKCE, the flow for a single-page app — a public client
// with no secret. The server says whether an issuer is configured
// (GET /api/app-config); the app then offers "Sign in", sends the person
// to the issuer's login page, exchanges the code it gets back for an ID
// token, and sends that token as "Authorization: Bearer" on every API
// call — the server verifies it against the issuer's keys (docs/api.md).
//
// The token lives in sessionStorage: it lasts as long as the tab and is
// gone when it closes, a smaller window for a stolen token than
// localStorage's forever, at the cost of signing in again in a new tab.
// An expired token is dropped; a 401 to a call that carried one drops it
// as well, so the header offers "Sign in" again.
import type { components } from './api.gen';

/** AppConfig is GET /api/app-config; {} when it could not be read, so
 * every field may be absent (no login offered, no links, no picker). */
export type AppConfig = Partial<components['schemas']['AppConfigAnswer']['data']>;

let configPromise: Promise<AppConfig> | null = null;

/** appConfig is GET /api/app-config, fetched once per page load; a
 * failure is an empty config (no login offered, no links), tried again on
 * the next call. */
export function appConfig(): Promise<AppConfig> {
  if (!configPromise) {
    configPromise = fetch('/api/app-config', { headers: { Accept: 'application/json' } })
      .then((r) => r.json())
      .then((env) => (env && env.code === 'OK' && env.data ? (env.data as AppConfig) : {}))
      .catch(() => {
        configPromise = null;
        return {};
      });
  }
  return configPromise;
}

const TOKEN = 'changeflow.oidc.token';
const PENDING = 'changeflow.oidc.pending';
export const CALLBACK_PATH = '/login/callback';

interface Session {
  token: string;
  /** seconds since the epoch, from the token's exp */
  exp: number;
  name: string;
}

interface Pending {
  state: string;
  verifier: string;
  nonce: string;
  returnTo: string;
  tokenEndpoint: string;
  clientId: string;
  redirectUri: string;
}

function read<T>(key: string): T | null {
  try {
    const s = window.sessionStorage.getItem(key);
    return s ? (JSON.parse(s) as T) : null;
  } catch {
    return null;
  }
}

function changed(): void {
  window.dispatchEvent(new Event('changeflow:user'));
}

/** session is the signed-in person, or null (none, or expired). */
export function session(): Session | null {
  const s = read<Session>(TOKEN);
  if (!s || !s.token) return null;
  if (s.exp && s.exp * 1000 <= Date.now()) {
    signOut();
    return null;
  }
  return s;
}

export function bearerToken(): string {
  return session()?.token ?? '';
}

export function signOut(): void {
  try {
    window.sessionStorage.removeItem(TOKEN);
  } catch {
    // nothing stored
  }
  changed();
}

function b64url(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function random(n = 32): string {
  return b64url(crypto.getRandomValues(new Uint8Array(n)));
}

async function discover(issuer: string): Promise<{ authorization_endpoint: string; token_endpoint: string }> {
  const r = await fetch(`${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`);
  if (!r.ok) throw new Error(`discovery answered ${r.status}`);
  const d = await r.json();
  if (typeof d.authorization_endpoint !== 'string' || typeof d.token_endpoint !== 'string') throw new Error('discovery lacks endpoints');
  return d;
}

/** signIn sends the browser to the issuer's login page; it comes back to
 * CALLBACK_PATH. It throws (in words) when the issuer cannot be reached or
 * the page is not a secure context (no WebCrypto for the PKCE challenge). */
export async function signIn(returnTo: string): Promise<void> {
  const cfg = await appConfig();
  if (!cfg.oidc) throw new Error('Sign-in is not configured on this server.');
  if (!crypto.subtle) throw new Error('Sign-in needs a secure page (https or localhost).');
  let d;
  try {
    d = await discover(cfg.oidc.issuer);
  } catch {
    throw new Error('The sign-in service cannot be reached. Try again in a moment.');
  }
  const verifier = random(48);
  const challenge = b64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))));
  const p: Pending = {
    state: random(),
    verifier,
    nonce: random(),
    returnTo,
    tokenEndpoint: d.token_endpoint,
    clientId: cfg.oidc.clientId,
    redirectUri: window.location.origin + CALLBACK_PATH,
  };
  window.sessionStorage.setItem(PENDING, JSON.stringify(p));
  const u = new URL(d.authorization_endpoint);
  u.search = new URLSearchParams({
    response_type: 'code',
    client_id: p.clientId,
    redirect_uri: p.redirectUri,
    scope: 'openid email profile',
    state: p.state,
    nonce: p.nonce,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  }).toString();
  window.location.assign(u.toString());
}

function claimsOf(jwt: string): Record<string, unknown> {
  const part = jwt.split('.')[1] ?? '';
  const json = atob(part.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((part.length + 3) % 4));
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(json, (c) => c.charCodeAt(0))));
}

/** completeSignIn handles CALLBACK_PATH: checks the state, exchanges the
 * code for the token and returns where to go next. The token's signature
 * is the server's to verify (it does, on every call); the app checks the
 * nonce so a token minted for another login is not taken. */
export async function completeSignIn(search: string): Promise<string> {
  const q = new URLSearchParams(search);
  const p = read<Pending>(PENDING);
  try {
    window.sessionStorage.removeItem(PENDING);
  } catch {
    // nothing stored
  }
  if (q.get('error')) throw new Error(`The sign-in service refused: ${q.get('error_description') || q.get('error')}.`);
  if (!p || !q.get('code') || q.get('state') !== p.state) {
    throw new Error('This sign-in was not started here, or was already used. Sign in again.');
  }
  let r: Response;
  try {
    r = await fetch(p.tokenEndpoint, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code: q.get('code') ?? '',
        redirect_uri: p.redirectUri,
        client_id: p.clientId,
        code_verifier: p.verifier,
      }).toString(),
    });
  } catch {
    throw new Error('The sign-in service cannot be reached. Try again in a moment.');
  }
  const body = await r.json().catch(() => null);
  const token = body && typeof body.id_token === 'string' ? body.id_token : '';
  if (!r.ok || !token) throw new Error('The sign-in could not be completed. Sign in again.');
  let c: Record<string, unknown>;
  try {
    c = claimsOf(token);
  } catch {
    throw new Error('The sign-in service answered with an unreadable token.');
  }
  if (c.nonce !== p.nonce) throw new Error('The sign-in answer does not belong to this sign-in. Sign in again.');
  const name = String(c.email || c.preferred_username || c.sub || 'you');
  window.sessionStorage.setItem(TOKEN, JSON.stringify({ token, exp: Number(c.exp) || 0, name } satisfies Session));
  changed();
  return p.returnTo && p.returnTo.startsWith('/') && !p.returnTo.startsWith('//') ? p.returnTo : '/';
}
