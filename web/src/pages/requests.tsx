import type { RequestView } from '../api';
import { ErrorNote, Progress, Status } from '../components';
import { useAppConfig, useGet } from '../hooks';
import { useLive } from '../live';
import { hintWords, when } from '../words';

const POLL_MS = 3000;

export function MyRequestsPage({ user }: { user: string }) {
  const r = useGet<{ items: RequestView[]; nextCursor: string }>('/api/requests?limit=50', POLL_MS, [user]);
  return (
    <section>
      <h1>My requests</h1>
      <p class="lead">Newest first; the status updates by itself.</p>
      <ErrorNote>{r.error}</ErrorNote>
      {r.loading && !r.data && <p>Loading…</p>}
      {r.data && r.data.items.length === 0 && <p class="muted">You have not requested anything yet.</p>}
      {r.data && r.data.items.length > 0 && (
        <table class="list" data-testid="my-requests">
          <thead>
            <tr>
              <th>Target</th>
              <th>Status</th>
              <th>Step</th>
              <th>What to do</th>
              <th>Updated</th>
            </tr>
          </thead>
          <tbody>
            {r.data.items.map((x) => (
              <tr key={x.operationId} data-operation-id={x.operationId}>
                <td>
                  <a href={`/requests/${encodeURIComponent(x.operationId)}`}>{x.targetKey}</a>
                </td>
                <td>
                  <Status status={x.status} />
                </td>
                <td class="mono small">{x.step.name}</td>
                <td>{hintWords(x.hint) || <span class="muted">Nothing, it is on its way.</span>}</td>
                <td class="muted small">{when(x.updatedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** ApproveHere: in the local run the approval system is a simulator; a
 * request waiting for approval links to its control page, where a person
 * plays the approver (docs/simulators.md). */
function ApproveHere({ status }: { status: string }) {
  const cfg = useAppConfig();
  if (!cfg.simulators || (status !== 'APPROVAL_SENT' && status !== 'APPROVAL_SENDING')) return null;
  return (
    <p class="note" data-testid="approve-here">
      Local run: the approval system is simulated. Play the approver on the{' '}
      <a href={cfg.simulators.approval} target="_blank" rel="noopener noreferrer">
        approval simulator's page
      </a>{' '}
      — approve or reject this request there (out of the box it approves on its own after about 2 s). This page follows by itself.
    </p>
  );
}

export function RequestPage({ id, user }: { id: string; user: string }) {
  // Pushed over the request's event stream; polled while it is down.
  const r = useLive<RequestView>(`/api/requests/${encodeURIComponent(id)}`, POLL_MS, [user]);
  const x = r.data;
  return (
    <section data-live={r.live ? 'stream' : 'poll'}>
      <h1>Request</h1>
      <p class="lead mono">{id}</p>
      <ErrorNote>{r.error}</ErrorNote>
      {r.loading && !x && <p>Loading…</p>}
      {x && <ApproveHere status={x.status} />}
      {x && (
        <div class="card" data-testid="request-detail">
          <Progress status={x.status} />
          <dl class="facts">
            <dt>Target</dt>
            <dd>{x.targetKey}</dd>
            <dt>Status</dt>
            <dd>
              <Status status={x.status} />
            </dd>
            <dt>Step</dt>
            <dd class="mono">{x.step.name}</dd>
            {x.blocker && (
              <>
                <dt>Waiting for</dt>
                <dd>
                  {x.blocker.detail} <span class="muted small">(since {when(x.blocker.since)})</span>
                </dd>
              </>
            )}
            {hintWords(x.hint) && (
              <>
                <dt>What to do</dt>
                <dd class={x.hint === 'CONTACT_MAINTAINERS' ? 'bad' : ''}>{hintWords(x.hint)}</dd>
              </>
            )}
            {x.mr && (
              <>
                <dt>Merge request</dt>
                <dd>
                  <a href={x.mr.url} target="_blank" rel="noopener noreferrer">
                    !{x.mr.iid}
                  </a>
                </dd>
              </>
            )}
            {x.batchId !== undefined && (
              <>
                <dt>Batch</dt>
                <dd>#{x.batchId}</dd>
              </>
            )}
            {x.expiresAt && (
              <>
                <dt>Access until</dt>
                <dd>{when(x.expiresAt)}</dd>
              </>
            )}
            <dt>Last change</dt>
            <dd>{when(x.updatedAt)}</dd>
          </dl>
        </div>
      )}
    </section>
  );
}
