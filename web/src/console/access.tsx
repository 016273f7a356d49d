// The console's "Access" page: who has access to a target now, and the
// periods of access over a window as a timeline (GET /ops/access and
// GET /ops/access/history, docs/api.md "Access history"). The address
// holds the question (?target=KEY&days=N), so a request's page can link
// its period and an operator can share what they looked at.
import { useState } from 'preact/hooks';
import type { components } from '../api.gen';
import type { Target } from '../api';
import { ErrorNote, Stamp } from '../components';
import { useGet } from '../hooks';
import { navigate, useSearch } from '../router';
import { whenExact } from '../words';
import { opsLink } from './shared';

type Interval = components['schemas']['AccessInterval'];
type AtAnswer = components['schemas']['AccessAtAnswer']['data'];
type HistoryAnswer = components['schemas']['AccessHistoryAnswer']['data'];
type Discrepancy = components['schemas']['AccessDiscrepancy'];

/** The windows the timeline offers, in days back from now. */
const windows = [7, 30, 90, 365];
const DEFAULT_DAYS = 90;

/** sourceWords says where a period was learnt from. */
const sourceWords: Record<string, string> = {
  changeflow: 'changeflow’s request',
  repo: 'the binding file’s history (not written by changeflow)',
};

/** params reads the page's question from the address. */
function params(q: URLSearchParams): { target: string; days: number } {
  const days = Number(q.get('days'));
  return { target: q.get('target') ?? '', days: windows.includes(days) ? days : DEFAULT_DAYS };
}

/** accessLink is the Access page for one target (and window). */
export function accessLink(target: string, days = DEFAULT_DAYS): string {
  const q = new URLSearchParams({ target });
  if (days !== DEFAULT_DAYS) q.set('days', String(days));
  return `/console/access?${q}`;
}

export function Access() {
  const { target, days } = params(useSearch());
  const targets = useGet<{ items: Target[] }>('/api/targets');
  const [typed, setTyped] = useState(target);
  const choose = (e: Event) => {
    e.preventDefault();
    if (typed.trim()) navigate(accessLink(typed.trim(), days));
  };
  return (
    <div data-testid="access">
      <p>
        Who had access to a target, and when: an entry in the target’s binding file on the default branch, from the moment its change
        was in effect until its removal was in effect. Each period names the request and the approval behind it.
      </p>
      <form class="row tools" onSubmit={choose} data-testid="access-form">
        <label>
          Target{' '}
          <input name="target" list="access-targets" value={typed} onInput={(e) => setTyped((e.target as HTMLInputElement).value)} required />
        </label>
        <datalist id="access-targets">
          {(targets.data?.items ?? []).map((t) => (
            <option key={t.key} value={t.key}>
              {t.title}
            </option>
          ))}
        </datalist>
        <button type="submit">Show</button>
      </form>
      <ErrorNote>{targets.error}</ErrorNote>
      {target && <TargetAccess key={`${target}/${days}`} target={target} days={days} />}
    </div>
  );
}

function TargetAccess({ target, days }: { target: string; days: number }) {
  // "Now" and the window are fixed when the page opens (it opens again on
  // a new question), so a render never asks again.
  const [win] = useState(() => {
    const now = new Date();
    const to = new Date(now.getTime() + 1000);
    return { now: now.toISOString(), from: new Date(to.getTime() - days * 86400_000).toISOString(), to: to.toISOString() };
  });
  const q = encodeURIComponent(target);
  const now = useGet<AtAnswer>(`/ops/access?target=${q}&at=${encodeURIComponent(win.now)}`, 0, [target]);
  const hist = useGet<HistoryAnswer>(`/ops/access/history?target=${q}&from=${encodeURIComponent(win.from)}&to=${encodeURIComponent(win.to)}`, 0, [target]);
  return (
    <>
      <div class="card" data-testid="access-now">
        <h2>
          Who has access to <span class="mono">{target}</span> now
        </h2>
        <ErrorNote>{now.error}</ErrorNote>
        {now.loading && !now.data && <p>Loading…</p>}
        {now.data && now.data.items.length === 0 && <p data-testid="access-now-none">Nobody has access now.</p>}
        {now.data && now.data.items.length > 0 && <Periods items={now.data.items} open />}
        {now.data && (
          <p class="muted small">
            As of <Stamp iso={now.data.at} exact />.
          </p>
        )}
        {now.data && <Discrepancies items={now.data.discrepancies} problem={now.data.discrepanciesProblem} />}
      </div>
      <div class="card" data-testid="access-history">
        <h2>Timeline</h2>
        <nav class="row tools" aria-label="Window">
          {windows.map((d) => (
            <a key={d} href={accessLink(target, d)} class={d === days ? 'active' : ''} data-testid={`access-days-${d}`}>
              last {d} days
            </a>
          ))}
        </nav>
        <ErrorNote>{hist.error}</ErrorNote>
        {hist.loading && !hist.data && <p>Loading…</p>}
        {hist.data && hist.data.items.length === 0 && <p data-testid="access-history-none">Nobody had access in this window.</p>}
        {hist.data && hist.data.items.length > 0 && <Timeline data={hist.data} />}
        {hist.data?.more && (
          <p class="note" data-testid="access-history-more">
            More periods than this page shows fall in this window: choose a shorter one.
          </p>
        )}
      </div>
    </>
  );
}

/**
 * Discrepancies lists, to resolve, where changeflow's records and the
 * target's file on the default branch disagree now; nothing when they
 * agree (or when the server does not compare).
 */
function Discrepancies({ items, problem }: { items?: Discrepancy[]; problem?: string }) {
  if (problem) {
    return (
      <p class="note" data-testid="access-discrepancies-problem">
        {problem}
      </p>
    );
  }
  if (!items || items.length === 0) return null;
  return (
    <div class="note" data-testid="access-discrepancies">
      <p>
        <strong>To resolve:</strong> changeflow’s records and the binding file on the default branch disagree.
      </p>
      <ul>
        {items.map((d) => (
          <li key={`${d.subject}/${d.kind}`} data-testid="access-discrepancy">
            {d.message} <a href={opsLink(d.operationId)}>The request</a>.
          </li>
        ))}
      </ul>
    </div>
  );
}

/** Periods is the table of periods: who, from, until, and what is behind each. */
function Periods({ items, open }: { items: Interval[]; open?: boolean }) {
  return (
    <table class="list stack">
      <thead>
        <tr>
          <th>Subject</th>
          <th>{open ? 'Since' : 'From'}</th>
          {!open && <th>Until</th>}
          <th>Request</th>
          <th>Approval</th>
          <th>Merge request</th>
          <th>Source</th>
        </tr>
      </thead>
      <tbody>
        {items.map((p) => (
          <tr key={`${p.subject}/${p.from}`} data-subject={p.subject} data-operation={p.operationId ?? ''}>
            <td class="mono">{p.subject}</td>
            <td class="small">
              <Stamp iso={p.from} exact />
            </td>
            {!open && <td class="small">{p.until ? <Stamp iso={p.until} exact /> : 'still has access'}</td>}
            <td class="small">{p.operationId ? <a class="mono" href={opsLink(p.operationId)}>{p.operationId}</a> : '(none)'}</td>
            <td class="mono small">{p.approvalId ?? '(none known)'}</td>
            <td class="small">{p.mrIid != null ? `!${p.mrIid}` : '(none known)'}</td>
            <td class="small">{sourceWords[p.source] ?? p.source}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** Timeline draws each subject's periods as bars across the window, then
 * lists them. A bar's title says its exact times, with the zone. */
function Timeline({ data }: { data: HistoryAnswer }) {
  const from = new Date(data.from).getTime();
  const to = new Date(data.to).getTime();
  const span = Math.max(1, to - from);
  const bySubject = new Map<string, Interval[]>();
  for (const p of data.items) bySubject.set(p.subject, [...(bySubject.get(p.subject) ?? []), p]);
  const pct = (t: number) => `${(Math.min(Math.max(t - from, 0), span) / span) * 100}%`;
  return (
    <>
      <p class="muted small">
        From <Stamp iso={data.from} exact /> to <Stamp iso={data.to} exact />.
      </p>
      <div class="timeline" data-testid="access-timeline">
        {[...bySubject.entries()].map(([subject, ps]) => (
          <div class="timeline-row" key={subject} data-subject={subject}>
            <span class="mono small timeline-label">{subject}</span>
            <span class="timeline-track">
              {ps.map((p) => {
                const start = new Date(p.from).getTime();
                const end = p.until ? new Date(p.until).getTime() : to;
                return (
                  <span
                    key={p.from}
                    class={`timeline-bar ${p.source === 'repo' ? 'repo' : ''}`}
                    style={{ left: pct(start), width: `max(2px, calc(${pct(end)} - ${pct(start)}))` }}
                    title={`${whenExact(p.from)} – ${p.until ? whenExact(p.until) : 'still has access'}`}
                  />
                );
              })}
            </span>
          </div>
        ))}
      </div>
      <Periods items={data.items} />
    </>
  );
}
