// The operations console (SPEC §3.3), read-only: loaded lazily, because
// most people never open it. Its routes live under /console, not /ops,
// which is the API's.
import { useState } from 'preact/hooks';
import type { Step } from '../api';
import { ErrorNote, Progress, Status } from '../components';
import { useGet } from '../hooks';
import { match, navigate } from '../router';
import { hintWords, when } from '../words';

interface OpsRequest {
  operation: Record<string, unknown> & { operationId: string; subject: string; targetKey: string; mr?: { iid: number; url: string } };
  status: string;
  step: Step;
  hint: string;
  binding: { status: string; operationId: string; expiresAt?: string; expired: boolean; version: number; updatedAt: string } | null;
  steps: { from: Step; to: Step; fromBinding?: string; toBinding?: string; actor: string; note?: string; at: string }[];
  batch?: Batch;
  queue?: { projectId: number; batchId?: number; position?: number; admittedAt: string };
  audit: { actor: string; action: string; params: string; outcome: string; at: string }[];
}
interface Batch {
  id: number;
  projectId: number;
  status: string;
  mr?: { iid: number; url: string };
  failureCode?: string;
  failureMessage?: string;
  createdAt: string;
  updatedAt: string;
  members?: { id: number; operationId: string }[];
}
interface ConfigItem {
  key: string;
  value: unknown;
  source: string;
  fellBack: boolean;
  reason?: string;
}

declare const __RELEASE__: string;

export default function Console({ path }: { path: string }) {
  const req = match('/console/requests/:id', path);
  return (
    <section data-release={__RELEASE__ || undefined}>
      <h1>Operations console</h1>
      <nav class="tabs">
        <a href="/console" class={path === '/console' || req ? 'active' : ''}>
          Look up a request
        </a>
        <a href="/console/batches" class={path === '/console/batches' ? 'active' : ''}>
          Batches
        </a>
        <a href="/console/config" class={path === '/console/config' ? 'active' : ''}>
          Configuration
        </a>
      </nav>
      {path === '/console/batches' ? <Batches /> : path === '/console/config' ? <Config /> : <Lookup id={req?.id ?? ''} />}
    </section>
  );
}

function Lookup({ id }: { id: string }) {
  const [draft, setDraft] = useState(id);
  return (
    <>
      <form
        class="row"
        onSubmit={(e) => {
          e.preventDefault();
          if (draft.trim()) navigate(`/console/requests/${encodeURIComponent(draft.trim())}`);
        }}
      >
        <input name="operationId" placeholder="operationId" value={draft} onInput={(e) => setDraft((e.target as HTMLInputElement).value)} />
        <button type="submit">Look up</button>
      </form>
      {id && <OpsRequestView key={id} id={id} />}
    </>
  );
}

function OpsRequestView({ id }: { id: string }) {
  const r = useGet<OpsRequest>(`/ops/requests/${encodeURIComponent(id)}`, 5000);
  const x = r.data;
  return (
    <div data-testid="ops-request">
      <ErrorNote>{r.error}</ErrorNote>
      {r.loading && !x && <p>Loading…</p>}
      {x && (
        <>
          <div class="card">
            <Progress status={x.status} />
            <dl class="facts">
              <dt>Requested by</dt>
              <dd>{x.operation.subject}</dd>
              <dt>Target</dt>
              <dd>{x.operation.targetKey}</dd>
              <dt>Step (operation)</dt>
              <dd class="mono">
                {x.step.name} ({x.step.code})
              </dd>
              <dt>Binding</dt>
              <dd>
                {x.binding ? (
                  <>
                    <Status status={x.binding.status} />{' '}
                    {x.binding.operationId !== id && <span class="muted small">now held by {x.binding.operationId}</span>}
                    {x.binding.expired && <span class="muted small"> expired</span>}
                  </>
                ) : (
                  <span class="muted">none</span>
                )}
              </dd>
              <dt>This request's status</dt>
              <dd>
                <Status status={x.status} />
              </dd>
              {hintWords(x.hint) && (
                <>
                  <dt>Hint</dt>
                  <dd>{hintWords(x.hint)}</dd>
                </>
              )}
              {x.operation.mr && (
                <>
                  <dt>Merge request</dt>
                  <dd>
                    <a href={x.operation.mr.url} target="_blank" rel="noopener noreferrer">
                      !{x.operation.mr.iid}
                    </a>
                  </dd>
                </>
              )}
              {x.batch && (
                <>
                  <dt>Batch</dt>
                  <dd>
                    #{x.batch.id} {x.batch.status}
                  </dd>
                </>
              )}
              {x.queue && (
                <>
                  <dt>Queue</dt>
                  <dd>
                    project {x.queue.projectId}
                    {x.queue.position ? `, position ${x.queue.position}` : ''} since {when(x.queue.admittedAt)}
                  </dd>
                </>
              )}
              {['nextAction', 'dueAt', 'attempts', 'leaseOwner', 'lastError'].map((k) =>
                x.operation[k] !== undefined && x.operation[k] !== '' ? (
                  <>
                    <dt>{k}</dt>
                    <dd class="mono small">{String(x.operation[k])}</dd>
                  </>
                ) : null,
              )}
            </dl>
          </div>
          <h2>Step history</h2>
          <table class="list" data-testid="step-history">
            <thead>
              <tr>
                <th>When</th>
                <th>Step</th>
                <th>Binding</th>
                <th>By</th>
                <th>Note</th>
              </tr>
            </thead>
            <tbody>
              {x.steps.map((s, i) => (
                <tr key={i}>
                  <td class="small">{when(s.at)}</td>
                  <td class="mono small">
                    {s.from.name} → {s.to.name}
                  </td>
                  <td class="mono small">{s.fromBinding || s.toBinding ? `${s.fromBinding ?? '—'} → ${s.toBinding ?? '—'}` : ''}</td>
                  <td>{s.actor}</td>
                  <td class="small">{s.note}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {x.audit.length > 0 && (
            <>
              <h2>Audit</h2>
              <table class="list">
                <tbody>
                  {x.audit.map((a, i) => (
                    <tr key={i}>
                      <td class="small">{when(a.at)}</td>
                      <td>{a.actor}</td>
                      <td class="mono small">{a.action}</td>
                      <td class="mono small">{a.outcome}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </>
          )}
        </>
      )}
    </div>
  );
}

function Batches() {
  const r = useGet<{ items: Batch[] }>('/ops/batches?limit=50', 5000);
  return (
    <>
      <ErrorNote>{r.error}</ErrorNote>
      {r.data && r.data.items.length === 0 && <p class="muted">No batches yet.</p>}
      {r.data && r.data.items.length > 0 && (
        <table class="list" data-testid="batches">
          <thead>
            <tr>
              <th>Batch</th>
              <th>Project</th>
              <th>Status</th>
              <th>MR</th>
              <th>Failure</th>
              <th>Updated</th>
            </tr>
          </thead>
          <tbody>
            {r.data.items.map((b) => (
              <tr key={b.id}>
                <td>#{b.id}</td>
                <td>{b.projectId}</td>
                <td class="mono small">{b.status}</td>
                <td>{b.mr ? <a href={b.mr.url}>!{b.mr.iid}</a> : ''}</td>
                <td class="small">{b.failureMessage || b.failureCode || ''}</td>
                <td class="small">{when(b.updatedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

function Config() {
  const r = useGet<{ version: number; loadedAt: string; fellBack: number; unknownKeys: string[] | null; items: ConfigItem[] }>('/ops/config');
  const [onlyFallbacks, setOnlyFallbacks] = useState(false);
  const c = r.data;
  return (
    <>
      <ErrorNote>{r.error}</ErrorNote>
      {c && (
        <>
          <p>
            Version {c.version}, loaded {when(c.loadedAt)}. <strong>{c.fellBack}</strong> item(s) fell back to a default.
            {c.unknownKeys && c.unknownKeys.length > 0 && <> Unknown keys ignored: {c.unknownKeys.join(', ')}.</>}
          </p>
          <label class="inline">
            <input type="checkbox" checked={onlyFallbacks} onChange={(e) => setOnlyFallbacks((e.target as HTMLInputElement).checked)} /> only
            items that fell back
          </label>
          <table class="list" data-testid="config">
            <thead>
              <tr>
                <th>Key</th>
                <th>Value</th>
                <th>Source</th>
                <th>Fell back because</th>
              </tr>
            </thead>
            <tbody>
              {c.items
                .filter((i) => !onlyFallbacks || i.fellBack)
                .map((i) => (
                  <tr key={i.key} class={i.fellBack ? 'warn' : ''}>
                    <td class="mono small">{i.key}</td>
                    <td class="mono small">{typeof i.value === 'string' ? i.value : JSON.stringify(i.value)}</td>
                    <td class="small">{i.source}</td>
                    <td class="small">{i.fellBack ? i.reason || 'yes' : ''}</td>
                  </tr>
                ))}
            </tbody>
          </table>
        </>
      )}
    </>
  );
}
