// A history router for a handful of routes; a dependency would be larger
// than this file. Client routes never live under /api, /ops or /callbacks
// (the server's), and never end in an extension (the server would answer a
// reload of such a URL with a 404 instead of the app).
import { useEffect, useState } from 'preact/hooks';

const RELOAD_PARAM = '__reload';

/** navigate moves to an app path without a page load. */
export function navigate(to: string, replace = false): void {
  if (replace) window.history.replaceState(null, '', to);
  else window.history.pushState(null, '', to);
  window.dispatchEvent(new Event('changeflow:navigate'));
}

/** dropReloadParam removes release safety's cache-busting parameter once
 * the page has loaded, so it is not bookmarked or shared. */
export function dropReloadParam(): void {
  const url = new URL(window.location.href);
  if (!url.searchParams.has(RELOAD_PARAM)) return;
  url.searchParams.delete(RELOAD_PARAM);
  window.history.replaceState(null, '', url.pathname + url.search + url.hash);
}

/** useAddress is one part of the address (read), followed across
 * navigations: the back button's and navigate's. */
function useAddress(read: () => string): string {
  const [value, setValue] = useState(read);
  useEffect(() => {
    const update = () => setValue(read());
    window.addEventListener('popstate', update);
    window.addEventListener('changeflow:navigate', update);
    // A navigation between the first render and this effect fired no
    // listener yet: read the address again now that they listen.
    update();
    return () => {
      window.removeEventListener('popstate', update);
      window.removeEventListener('changeflow:navigate', update);
    };
  }, []);
  return value;
}

/** usePath is the address's path. */
export function usePath(): string {
  return useAddress(() => window.location.pathname);
}

/** useSearch is the address's query. */
export function useSearch(): URLSearchParams {
  return new URLSearchParams(useAddress(() => window.location.search));
}

/** match returns the decoded parameters of pattern ("/requests/:id") or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const ps = pattern.split('/');
  const xs = path.replace(/\/+$/, '').split('/');
  if (path === '/' && pattern === '/') return {};
  if (ps.length !== xs.length) return null;
  const out: Record<string, string> = {};
  for (let i = 0; i < ps.length; i++) {
    if (ps[i].startsWith(':')) {
      if (!xs[i]) return null;
      out[ps[i].slice(1)] = decodeURIComponent(xs[i]);
    } else if (ps[i] !== xs[i]) return null;
  }
  return out;
}

/** onLinkClick turns a plain left click on an <a href="/..."> into navigate. */
export function onLinkClick(e: MouseEvent): void {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = (e.target as Element | null)?.closest?.('a');
  if (!a || a.target || a.origin !== window.location.origin || a.hasAttribute('download')) return;
  e.preventDefault();
  navigate(a.pathname + a.search);
}
