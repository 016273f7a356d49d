// The console's batches pages: every batch, newest first, with Settle on a
// running or blocked one and the "run now" buttons (a round,
// reconciliation, the expiry scan); and one batch with its requests.
import { useState } from 'preact/hooks';
import { call } from '../api';
import type { components } from '../api.gen';
import { Confirmed, Done, ErrorNote, Stamp } from '../components';
import { useGet } from '../hooks';
import { when } from '../words';
import { type Batch, opsLink } from './shared';

type Schemas = components['schemas'];

/** RoundResult is one project's answer to POST /ops/rounds. */
type RoundResult = Schemas['RoundsAnswer']['data']['rounds'][number];

/** roundWords is one project's round answer (POST /ops/rounds) in words. */
function roundWords(x: RoundResult): string {
  const p = `Project ${x.projectId}: `;
  switch (x.outcome) {
    case 'CLAIMED':
      if (x.blocked) return `${p}batch #${x.batchId} was started and is blocked: it needs a person (see its failure below).`;
      return `${p}batch #${x.batchId} ${x.resumed ? 'was finished building' : `started with ${x.members ?? 0} request(s)`}${x.mrIid ? `, merge request !${x.mrIid}` : ''}.`;
    case 'SLOT_OCCUPIED':
      return `${p}batch #${x.batchId} is still in progress; a new one starts when it ends.`;
    case 'NOTHING_WAITING':
      return `${p}no approved request is waiting.`;
    case 'PREEMPTED':
      return `${p}another round took it first; nothing more to do.`;
    case 'BUSY':
      return `${p}busy right now; try again in a moment.`;
    default:
      return `${p}${x.outcome}.`;
  }
}

export function Batches() {
  const r = useGet<Schemas['BatchListAnswer']['data']>('/ops/batches?limit=50', 5000);
  const [done, setDone] = useState('');
  return (
    <>
      <Done>{done}</Done>
      <div class="row tools">
        <Confirmed
          testid="run-round"
          label="Run a round now"
          question="Start a batch round now for every project (safe beside the scheduled ones)?"
          onDone={setDone}
          run={async () => {
            const res = await call<Schemas['RoundsAnswer']['data']>('POST', '/ops/rounds', {});
            r.reload();
            return res.data.rounds.length ? res.data.rounds.map(roundWords).join(' ') : 'No project is configured.';
          }}
        />
        <Confirmed
          testid="run-reconcile"
          label="Run reconciliation now"
          question="Check every merged request against the deployment now (safe beside the scheduled runs)?"
          onDone={setDone}
          run={async () => {
            const res = await call<Schemas['ReconcileAnswer']['data']>('POST', '/ops/reconcile', {});
            const d = res.data;
            return `Reconciliation checked ${d.scanned} request(s): ${d.validated} now in effect, ${d.waiting} still waiting.`;
          }}
        />
        <Confirmed
          testid="run-expiry-scan"
          label="Run expiry scan now"
          question="Look for accesses whose time is up now, and start removing each (safe beside the scheduled scans)?"
          onDone={setDone}
          run={async () => {
            const res = await call<Schemas['ExpiryScanAnswer']['data']>('POST', '/ops/expiry/scan', {});
            r.reload();
            const d = res.data;
            if (d.scanned === 0) return 'The expiry scan found no access whose time is up.';
            const others = d.scanned - d.revoked;
            return `The expiry scan found ${d.scanned} expired access(es) and started removing ${d.revoked}${others > 0 ? `; ${others} were being removed already` : ''}.`;
          }}
        />
      </div>
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
              <th>Requests</th>
              <th>Failure</th>
              <th>Updated</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {r.data.items.map((b) => (
              <tr key={b.id} data-batch={b.id}>
                <td>
                  <a href={`/console/batches/${b.id}`}>#{b.id}</a>
                </td>
                <td>{b.projectId}</td>
                <td class="mono small">{b.status}</td>
                <td>{b.mr ? <a href={b.mr.url}>!{b.mr.iid}</a> : ''}</td>
                <td class="small">
                  <Members members={b.members} />
                </td>
                <td class="small">{b.failureMessage || b.failureCode || ''}</td>
                <td class="small">{when(b.updatedAt)}</td>
                <td>
                  {(b.status === 'RUNNING' || b.status === 'BLOCKED') && (
                    <Confirmed
                      testid={`settle-${b.id}`}
                      label="Settle"
                      onDone={setDone}
                      question={`Settle batch #${b.id}? Its MR is closed if still open and read again: merged wins, otherwise the batch fails and its requests wait for the next round.`}
                      run={async () => {
                        const res = await call<Schemas['SettleAnswer']['data']>(
                          'POST',
                          `/ops/batches/${b.id}/settle`,
                          {},
                        );
                        r.reload();
                        const d = res.data;
                        if (d.alreadySettled) return `Batch #${b.id} was already settled (${d.status}); nothing was done.`;
                        if (d.merged) return `Batch #${b.id} had merged: settled as ${d.status}.`;
                        return `Batch #${b.id} settled as ${d.status}; ${d.readmitted} request(s) wait for the next round.`;
                      }}
                    />
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

/** Members lists a batch's requests, each a link to its console page. */
function Members({ members }: { members?: { id: number; operationId: string; kind?: string }[] }) {
  if (!members || members.length === 0) return <span class="muted">none</span>;
  return (
    <ul class="members" data-testid="members">
      {members.map((m) => (
        <li key={m.id}>
          <a class="mono" href={opsLink(m.operationId)}>
            {m.operationId}
          </a>
          {m.kind === 'REVOKE' && <span class="muted small"> (removal)</span>}
        </li>
      ))}
    </ul>
  );
}

/** BatchDetail is one batch (GET /ops/batches/{id}) with its members. */
export function BatchDetail({ id }: { id: string }) {
  const r = useGet<Batch>(`/ops/batches/${encodeURIComponent(id)}`, 5000);
  const b = r.data;
  return (
    <div data-testid="batch-detail">
      <p>
        <a href="/console/batches">All batches</a>
      </p>
      <ErrorNote>{r.error}</ErrorNote>
      {r.loading && !b && <p>Loading…</p>}
      {b && (
        <div class="card">
          <h2>Batch #{b.id}</h2>
          <dl class="facts">
            <dt>Status</dt>
            <dd class="mono">{b.status}</dd>
            <dt>Project</dt>
            <dd>{b.projectId}</dd>
            {b.mr && (
              <>
                <dt>Merge request</dt>
                <dd>
                  <a href={b.mr.url} target="_blank" rel="noopener noreferrer">
                    !{b.mr.iid}
                  </a>
                </dd>
              </>
            )}
            {(b.failureCode || b.failureMessage) && (
              <>
                <dt>Failure</dt>
                <dd>
                  <span class="mono small">{b.failureCode}</span> {b.failureMessage}
                </dd>
              </>
            )}
            <dt>Requests</dt>
            <dd>
              <Members members={b.members} />
            </dd>
            <dt>Created</dt>
            <dd>
              <Stamp iso={b.createdAt} />
            </dd>
            <dt>Updated</dt>
            <dd>
              <Stamp iso={b.updatedAt} />
            </dd>
          </dl>
        </div>
      )}
    </div>
  );
}
