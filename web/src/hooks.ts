import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, get, type Me } from './api';
import { type AppConfig, appConfig } from './auth';

/** useAppConfig is GET /api/app-config ({} until it arrives or when it
 * fails; loaded once it has answered). */
export function useAppConfig(): AppConfig & { loaded?: boolean } {
  const [cfg, setCfg] = useState<AppConfig & { loaded?: boolean }>({});
  useEffect(() => {
    let live = true;
    void appConfig().then((c) => live && setCfg({ ...c, loaded: true }));
    return () => {
      live = false;
    };
  }, []);
  return cfg;
}

export interface Loaded<T> {
  data?: T;
  error?: string;
  /** the failure's code (UNAUTHENTICATED, NETWORK, …) */
  code?: string;
  loading: boolean;
}

/** useGet loads path, and again every pollMs while the tab is visible
 * (live status without reloading). A failed poll keeps the last data and
 * shows the error next to it. */
export function useGet<T>(path: string | null, pollMs = 0, deps: unknown[] = []): Loaded<T> & { reload: () => void } {
  const [state, setState] = useState<Loaded<T>>({ loading: true });
  const [tick, setTick] = useState(0);
  const alive = useRef(true);
  const shown = useRef('');
  useEffect(() => {
    alive.current = true;
    return () => {
      alive.current = false;
    };
  }, []);
  useEffect(() => {
    if (!path) return;
    let stopped = false;
    let timer: number | undefined;
    const load = async () => {
      try {
        const r = await get<T>(path);
        if (!stopped) setState({ data: r.data, loading: false });
      } catch (e) {
        if (!stopped) {
          setState((s) => ({
            data: s.data,
            loading: false,
            error: e instanceof ApiError ? e.message : 'Something went wrong.',
            code: e instanceof ApiError ? e.code : undefined,
          }));
        }
      }
      if (!stopped && pollMs > 0) timer = window.setTimeout(tickIfVisible, pollMs);
    };
    const tickIfVisible = () => {
      if (document.visibilityState === 'hidden') timer = window.setTimeout(tickIfVisible, pollMs);
      else void load();
    };
    // Another path (or user) is another resource: never show the last
    // one's data under the new heading. A reload of the same one keeps
    // it on screen until the new answer replaces it.
    const key = JSON.stringify([path, ...deps]);
    if (key !== shown.current) setState({ loading: true });
    shown.current = key;
    void load();
    return () => {
      stopped = true;
      window.clearTimeout(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [path, pollMs, tick, ...deps]);
  return { ...state, reload: () => setTick((t) => t + 1) };
}

/** useMe is GET /api/me for the person acting now, asked again when the
 * person changes: the server says who is signed in (an auth proxy in
 * front names people the app knows nothing of) and whether the
 * Operations tab is theirs. */
export function useMe(user: string): Loaded<Me> {
  return useGet<Me>('/api/me', 0, [user]);
}
