import type { FunctionComponent } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { MyRequestsPage, RequestPage } from './pages/requests';
import { SubmitPage } from './pages/submit';
import { TargetsPage } from './pages/targets';
import { match, onLinkClick, usePath } from './router';
import { currentUser, isLocalRun, localUsers, setCurrentUser } from './user';

declare global {
  interface Window {
    __changeflowRecover?: () => void;
  }
}
/** __RELEASE__ labels a test build (vite.config.ts); '' in real builds. */
declare const __RELEASE__: string;

function useUser(): string {
  const [user, setUser] = useState(currentUser());
  useEffect(() => {
    const update = () => setUser(currentUser());
    window.addEventListener('changeflow:user', update);
    return () => window.removeEventListener('changeflow:user', update);
  }, []);
  return user;
}

function UserPicker({ user }: { user: string }) {
  if (!isLocalRun()) return null;
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
  const user = useUser();
  let page;
  let p: Record<string, string> | null;
  if (path === '/' || path === '/targets') page = <TargetsPage user={user} />;
  else if ((p = match('/request/:key', path))) page = <SubmitPage key={p.key + user} targetKey={p.key} />;
  else if (path === '/requests') page = <MyRequestsPage user={user} />;
  else if ((p = match('/requests/:id', path))) page = <RequestPage id={p.id} user={user} />;
  else if (path === '/console' || path.startsWith('/console/')) page = <LazyConsole path={path.replace(/\/+$/, '')} />;
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
          {nav('/console', 'Operations', path.startsWith('/console'))}
        </nav>
        <UserPicker user={user} />
      </header>
      <main>
        {isLocalRun() && !user && <p class="note">Pick a user at the top right to act as someone of the local directory.</p>}
        {page}
      </main>
    </div>
  );
}
