import type { FunctionComponent } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { MyRequestsPage, RequestPage } from './pages/requests';
import { ReviewsPage } from './pages/reviews';
import { NotificationsPage } from './pages/notifications';
import { SubmitPage } from './pages/submit';
import { TargetsPage } from './pages/targets';
import { CALLBACK_PATH, completeSignIn, session, signIn, signOut } from './auth';
import { ErrorNote } from './components';
import { useAppConfig, useMe } from './hooks';
import { match, navigate, onLinkClick, usePath } from './router';
import { currentUser, isLocalRun, localUsers, setCurrentUser } from './user';

declare global {
  interface Window {
    __changeflowRecover?: () => void;
  }
}
/** __RELEASE__ labels a test build (vite.config.ts); '' in real builds. */
declare const __RELEASE__: string;

/** who is acting: the signed-in person (OIDC), else the local run's pick;
 * pages key their data by it, so a change of person reloads them. */
function who(): string {
  const s = session();
  return s ? `oidc:${s.name}` : currentUser();
}

function useUser(): string {
  // who() is read on every render, not kept in state: a sign-in that
  // completes before this component's listener is registered (the
  // callback page's effect runs first) would otherwise leave the page on
  // the person from before — seen as "Signed in" never showing after the
  // issuer sent the person back. The event only asks for a render.
  const [, rerender] = useState(0);
  useEffect(() => {
    const update = () => rerender((n) => n + 1);
    window.addEventListener('changeflow:user', update);
    return () => window.removeEventListener('changeflow:user', update);
  }, []);
  return who();
}

/** Login is the header's right end: "Signed in as … / Sign out" after an
 * OIDC login, naming the account the server resolved from the token
 * (GET /api/me), the token's own name only until that answer; otherwise "Sign in" when the server has an issuer, and the
 * local run's user picker on a loopback page. */
function Login({ user, account }: { user: string; account?: string }) {
  const cfg = useAppConfig();
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const s = user.startsWith('oidc:') ? session() : null;
  if (s) {
    return (
      <span class="login" data-testid="signed-in">
        Signed in as <strong data-testid="account">{account || s.name}</strong>{' '}
        <button type="button" class="secondary small" onClick={() => signOut()}>
          Sign out
        </button>
      </span>
    );
  }
  return (
    <span class="login">
      <UserPicker user={user} />
      {cfg.oidc && (
        <button
          type="button"
          class="small"
          disabled={busy}
          onClick={() => {
            setBusy(true);
            setError('');
            signIn(window.location.pathname + window.location.search).catch((e: Error) => {
              setBusy(false);
              setError(e.message);
            });
          }}
        >
          Sign in
        </button>
      )}
      {error && (
        <span class="login-error" role="alert">
          {error}
        </span>
      )}
    </span>
  );
}

/** SimulatorLinks: in the local run, the simulated external systems'
 * pages, so a newcomer can play their part from the UI. */
function SimulatorLinks() {
  const cfg = useAppConfig();
  if (!cfg.simulators) return null;
  return (
    <footer class="sims" data-testid="simulators">
      Local run — the external systems are simulated:{' '}
      <a href={cfg.simulators.approval} target="_blank" rel="noopener noreferrer">
        approval system (approve or reject)
      </a>{' '}
      ·{' '}
      <a href={cfg.simulators.index} target="_blank" rel="noopener noreferrer">
        all simulators
      </a>
    </footer>
  );
}

/** Welcome is the one first-visit banner: nobody acts yet, so it says
 * how to become someone — the local run's picker, or "Sign in". */
function Welcome({ picker, oidc }: { picker: boolean; oidc: boolean }) {
  let how = 'Sign in at the top to see your requests and ask for access.';
  if (picker && oidc) how = 'Pick a user at the top to act as someone of the local directory, or sign in.';
  else if (picker) how = 'Pick a user at the top to act as someone of the local directory.';
  else if (!oidc) how = 'Your organisation\'s sign-in in front of changeflow names you; open changeflow through it.';
  return (
    <p class="note error welcome" role="alert" data-testid="welcome">
      You are not signed in. {how}
    </p>
  );
}

/** LoginCallback finishes an OIDC login (CALLBACK_PATH) and moves on to
 * where the person was, replacing the callback URL (its code is spent). */
function LoginCallback() {
  const [error, setError] = useState('');
  useEffect(() => {
    completeSignIn(window.location.search).then(
      (to) => navigate(to, true),
      (e: Error) => setError(e.message),
    );
  }, []);
  return (
    <section>
      <h1>Signing in</h1>
      {error ? (
        <>
          <ErrorNote>{error}</ErrorNote>
          <p>
            Back to the <a href="/">targets</a>.
          </p>
        </>
      ) : (
        <p>One moment…</p>
      )}
    </section>
  );
}

/** UserPicker is offered only when the server says so (app config
 * userPicker: the local run, loopback trusted) and the page is on a
 * loopback host; a production configuration never shows it. */
function UserPicker({ user }: { user: string }) {
  const cfg = useAppConfig();
  if (!cfg.userPicker || !isLocalRun()) return null;
  return (
    <label class="picker" title="The local run trusts this header from loopback (docs/webapp.md)">
      Local run, acting as{' '}
      <select name="user" value={user} onChange={(e) => setCurrentUser((e.target as HTMLSelectElement).value)}>
        <option value="">nobody</option>
        {localUsers.map((u) => (
          <option key={u.account} value={u.account}>
            {u.account} ({u.role})
          </option>
        ))}
      </select>
    </label>
  );
}

/** NoConsole stands in for the operations console for someone who holds
 * no operations rule: what the console is for, what it needs, and where
 * their own pages are. */
function NoConsole({ account }: { account: string }) {
  const { contact } = useAppConfig();
  return (
    <section data-testid="no-console">
      <h1>Operations console</h1>
      <p class="note">
        The operations console is for the people who run changeflow. It needs an operations permission, and your account{' '}
        <strong>{account}</strong> has none. If you need it, ask {contact || 'the team that runs changeflow'}.
      </p>
      <p>
        Your own pages: the <a href="/targets">targets</a>, to ask for access or see what you hold, and{' '}
        <a href="/requests">my requests</a>, to follow what you asked for.
      </p>
    </section>
  );
}

/** LazyConsole loads the operations console's chunk on first use. A chunk
 * that fails to load is the release-safety guard's to handle (it reloads
 * once, or offers "Refresh page"); Vite reports it as vite:preloadError,
 * and a bare rejection is passed on here. */
function LazyConsole({ path }: { path: string }) {
  const [mod, setMod] = useState<{ C: FunctionComponent<{ path: string }> } | null>(null);
  const [failed, setFailed] = useState(false);
  useEffect(() => {
    import('./console/console').then(
      (m) => (m?.default ? setMod({ C: m.default }) : setFailed(true)),
      () => {
        setFailed(true);
        window.__changeflowRecover?.();
      },
    );
  }, []);
  if (failed) return <p class="muted">The operations console could not be loaded.</p>;
  if (!mod) return <p>Loading…</p>;
  return <mod.C path={path} />;
}

export function App() {
  // "/requests/" is "/requests"; "/" stays "/".
  const path = usePath().replace(/(.)\/+$/, '$1');
  const cfg = useAppConfig();
  // The picker's choice counts only where the server offers the picker:
  // under a production configuration a stale localStorage entry names
  // nobody (and api.ts never sends it).
  const picked = useUser();
  const user = picked.startsWith('oidc:') || (cfg.userPicker && isLocalRun()) ? picked : '';
  const meR = useMe(user);
  const me = meR.data;
  // Nobody acts: the server says so (401 to /api/me). One banner then
  // says how to become someone, instead of each page's own 401 beside a
  // welcome.
  const nobody = !me && meR.code === 'UNAUTHENTICATED';
  // Signed in, but not as anyone of the directory: the server refuses
  // every page, and /api/me says why and who to ask — its words stand in
  // for the pages.
  const unknown = !me && meR.code === 'UNKNOWN_ACCOUNT';
  let page;
  let p: Record<string, string> | null;
  if (path === CALLBACK_PATH) page = <LoginCallback />;
  else if (path === '/' || path === '/targets') page = <TargetsPage user={user} />;
  else if ((p = match('/request/:key', path))) page = <SubmitPage key={p.key + user} targetKey={p.key} account={me?.account} />;
  else if (path === '/requests') page = <MyRequestsPage user={user} />;
  else if (path === '/reviews') page = <ReviewsPage user={user} />;
  else if (path === '/notifications') page = <NotificationsPage user={user} />;
  else if ((p = match('/requests/:id', path))) page = <RequestPage id={p.id} user={user} />;
  else if (path === '/console' || path.startsWith('/console/')) {
    // The console is for holders of an operations rule (GET /api/me);
    // anyone else — a person an OIDC sign-in sent back to a console link,
    // say — reads what it is for and where their own pages are, not the
    // operations API's bare refusal.
    if (me && !me.operations) page = <NoConsole account={me.account} />;
    else if (!me && meR.loading) page = <p>Loading…</p>;
    else page = <LazyConsole path={path.replace(/\/+$/, '')} />;
  }
  else
    page = (
      <section>
        <h1>Not found</h1>
        <p>
          There is no page here. Go to the <a href="/">targets</a>.
        </p>
      </section>
    );
  const nav = (href: string, label: string, active: boolean) => (
    <a href={href} class={active ? 'active' : ''}>
      {label}
    </a>
  );
  return (
    <div onClick={(e) => onLinkClick(e as unknown as MouseEvent)}>
      <header class="top">
        <span class="brand" data-release={__RELEASE__ || undefined}>
          changeflow
        </span>
        <nav>
          {nav('/', 'Targets', path === '/' || path === '/targets' || path.startsWith('/request/'))}
          {nav('/requests', 'My requests', path.startsWith('/requests'))}
          {nav('/reviews', 'Reviews', path === '/reviews')}
          {nav('/notifications', 'Notifications', path === '/notifications')}
          {/* Only for holders of an operations rule (GET /api/me, the
              server's decision); the /ops/ routes refuse everyone else
              whether the tab shows or not. */}
          {me?.operations && nav('/console', 'Operations', path.startsWith('/console'))}
        </nav>
        <Login user={user} account={me?.account} />
      </header>
      <main>
        {nobody && path !== CALLBACK_PATH ? (
          <Welcome picker={!!cfg.userPicker && isLocalRun()} oidc={!!cfg.oidc} />
        ) : unknown && path !== CALLBACK_PATH ? (
          <p class="note error welcome" role="alert" data-testid="unknown-account">
            {meR.error}
          </p>
        ) : (
          page
        )}
      </main>
      <SimulatorLinks />
    </div>
  );
}
