import { useEffect, useState } from 'preact/hooks';
import { identityHeaders } from './api';
import { type Loaded, useGet } from './hooks';

/** How long to wait before opening the stream again after it failed or
 * dropped: doubled per failure up to the maximum, reset once it delivers. */
const RETRY_MIN_MS = 2000;
const RETRY_MAX_MS = 30000;

/** One server-sent event. */
interface SSE {
  event: string;
  id: string;
  data: string;
}

/** parseEvents takes the complete events off the front of buf and returns
 * them with what is left (an event in progress). Comment lines (the
 * heartbeat) and unknown fields are ignored, as the format says. */
export function parseEvents(buf: string): { events: SSE[]; rest: string } {
  const events: SSE[] = [];
  let at = buf.indexOf('\n\n');
  while (at >= 0) {
    const block = buf.slice(0, at);
    buf = buf.slice(at + 2);
    const ev: SSE = { event: 'message', id: '', data: '' };
    let any = false;
    for (const line of block.split('\n')) {
      if (line === '' || line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') ev.event = value;
      else if (field === 'id') ev.id = value;
      else if (field === 'data') ev.data = ev.data ? `${ev.data}\n${value}` : value;
      else continue;
      any = true;
    }
    if (any) events.push(ev);
    at = buf.indexOf('\n\n');
  }
  return { events, rest: buf };
}

/** useLive shows path (a request's status read) live: it reads the
 * request's event stream (path + '/events', docs/api.md "Live status")
 * and shows every "request" event the moment it arrives. While the stream
 * is not open — refused, dropped, not yet connected — it polls path every
 * pollMs instead (useGet), and opens the stream again after a back-off,
 * resuming after the last event it saw (Last-Event-ID), so nothing is
 * missed either way.
 *
 * The stream is read with fetch rather than EventSource: EventSource can
 * send no header, and the caller is named by one (the bearer token, or
 * the local run's picker header). */
export function useLive<T>(path: string | null, pollMs: number, deps: unknown[] = []): Loaded<T> & { live: boolean } {
  const [streamed, setStreamed] = useState<{ key: string; data: T } | null>(null);
  const [live, setLive] = useState(false);
  const key = JSON.stringify([path, ...deps]);
  // Polling runs only while the stream is not delivering.
  const polled = useGet<T>(path, live ? 0 : pollMs, deps);

  useEffect(() => {
    if (!path) return;
    const abort = new AbortController();
    let lastId = '';
    let delay = RETRY_MIN_MS;
    let timer: number | undefined;
    const dropped = () => {
      if (abort.signal.aborted) return;
      setLive(false);
      timer = window.setTimeout(() => void open(), delay);
      delay = Math.min(delay * 2, RETRY_MAX_MS);
    };
    const open = async () => {
      const h: Record<string, string> = { Accept: 'text/event-stream', ...(await identityHeaders()) };
      if (lastId) h['Last-Event-ID'] = lastId;
      let res: Response;
      try {
        res = await fetch(`${path}/events`, { headers: h, signal: abort.signal, cache: 'no-store' });
      } catch {
        dropped();
        return;
      }
      if (!res.ok || !res.body) {
        dropped();
        return;
      }
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          const parsed = parseEvents(buf + value.replace(/\r\n?/g, '\n'));
          buf = parsed.rest;
          for (const ev of parsed.events) {
            if (ev.id) lastId = ev.id;
            if (ev.event !== 'request') continue;
            try {
              setStreamed({ key, data: JSON.parse(ev.data) as T });
              setLive(true);
              delay = RETRY_MIN_MS;
            } catch {
              // An unreadable event is skipped; the next one carries the
              // whole state again.
            }
          }
        }
      } catch {
        // aborted, or the connection broke: handled below
      }
      dropped();
    };
    void open();
    return () => {
      abort.abort();
      window.clearTimeout(timer);
      setLive(false);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key]);

  const last = streamed && streamed.key === key ? streamed.data : undefined;
  if (live && last !== undefined) return { data: last, loading: false, live: true };
  // Dropped: the last streamed state stays on screen until a poll answers.
  return { ...polled, data: polled.data ?? last, live: false };
}
