// The local run's login (docs/api.md, "Login"): the auth-proxy adapter trusts
// X-Auth-Request-User from loopback, so on a loopback host the app offers a
// picker and sends the chosen account in that header. Anywhere else the
// header is not sent: a real auth proxy or OIDC sets the identity, and the
// server answers 401 to proxy headers from a peer it does not trust.

/** Accounts of the local directory (cmd/changeflow/local/directory.yaml). */
export const localUsers = [
  { account: 'alice', role: 'user' },
  { account: 'bob', role: 'user' },
  { account: 'olivia', role: 'operator' },
  { account: 'adam', role: 'admin' },
] as const;

const KEY = 'changeflow.user';

/** isLocalRun: the page was served from a loopback address. */
export function isLocalRun(): boolean {
  const h = window.location.hostname;
  return h === '127.0.0.1' || h === 'localhost' || h === '[::1]' || h === '::1';
}

export function currentUser(): string {
  if (!isLocalRun()) return '';
  try {
    return window.localStorage.getItem(KEY) ?? '';
  } catch {
    return '';
  }
}

export function setCurrentUser(account: string): void {
  try {
    if (account) window.localStorage.setItem(KEY, account);
    else window.localStorage.removeItem(KEY);
  } catch {
    // private mode: the choice lasts until the page is reloaded
  }
  window.dispatchEvent(new Event('changeflow:user'));
}
