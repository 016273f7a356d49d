import type { RequestView } from '../api';
import { ErrorNote, Progress, Status, Stamp } from '../components';
import { useAppConfig, useGet, useMe } from '../hooks';
import { useLive } from '../live';
import { stepWord, whatToDo } from '../words';

const POLL_MS = 3000;

/** Todo is "What to do" in words, with "Request again" once the request
 * is over (rejected, closed, expired). */
function Todo({ x }: { x: RequestView }) {
  const t = whatToDo(x.status, x.step.name, x.hint, x.expiresAt);
  return (
    <span class={t.bad ? 'bad' : ''} data-testid="todo">
      {t.words}
      {t.again && (
        <>
          {' '}
          <a href={`/request/${encodeURIComponent(x.targetKey)}`} data-testid="request-again">
            Request again
          </a>
        </>
      )}
    </span>
  );
}

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
        <table class="list stack" data-testid="my-requests">
          <thead>
            <tr>
              <th>Target</th>
              <th>Status</th>
              <th>What to do</th>
              <th>Updated</th>
            </tr>
          </thead>
          <tbody>
            {r.data.items.map((x) => (
              <tr key={x.operationId} data-operation-id={x.operationId}>
                <td>
                  <a href={`/requests/${encodeURIComponent(x.operationId)}`}>{x.targetTitle || x.targetKey}</a>
                  {x.targetTitle && <div class="muted mono small">{x.targetKey}</div>}
                </td>
                <td>
                  <Status status={x.status} />
                </td>
                <td>
                  <Todo x={x} />
                </td>
                <td class="muted small">
                  <Stamp iso={x.updatedAt} />
                </td>
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
  const me = useMe(user).data;
  const x = r.data;
  const now = x ? stepWord(x.step.name) : '';
  return (
    <section data-live={r.live ? 'stream' : 'poll'}>
      <h1>{x ? `Access to ${x.targetTitle || x.targetKey}` : 'Request'}</h1>
      <p class="lead">
        Request <span class="mono wrap">{id}</span>
      </p>
      <ErrorNote>{r.error}</ErrorNote>
      {r.loading && !x && <p>Loading…</p>}
      {x && <ApproveHere status={x.status} />}
      {x && (
        <div class="card" data-testid="request-detail" data-operation-id={x.operationId}>
          <Progress status={x.status} />
          <dl class="facts">
            <dt>Target</dt>
            <dd>
              {x.targetTitle || x.targetKey} <span class="muted mono small">({x.targetKey})</span>
            </dd>
            {x.reason && (
              <>
                <dt>Reason</dt>
                <dd data-testid="reason">{x.reason}</dd>
              </>
            )}
            {x.days !== undefined && x.days > 0 && (
              <>
                <dt>Days asked for</dt>
                <dd data-testid="days">{x.days}</dd>
              </>
            )}
            <dt>Status</dt>
            <dd>
              <Status status={x.status} />
            </dd>
            {x.status === 'REJECTED' && x.approverComment && (
              <>
                <dt>The approver wrote</dt>
                <dd data-testid="approver-comment">“{x.approverComment}”</dd>
              </>
            )}
            {now && (
              <>
                <dt>Now</dt>
                <dd data-testid="step">{now}</dd>
              </>
            )}
            {x.blocker && (
              <>
                <dt>Waiting for</dt>
                <dd>
                  {x.blocker.detail}{' '}
                  <span class="muted small">
                    (since <Stamp iso={x.blocker.since} />)
                  </span>
                </dd>
              </>
            )}
            <dt>What to do</dt>
            <dd>
              <Todo x={x} />
            </dd>
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
            {x.batchId !== undefined && x.batchId > 0 && (
              <>
                <dt>Batch</dt>
                <dd>
                  {me?.operations ? (
                    <a href={`/console/batches/${x.batchId}`} data-testid="batch-link">
                      #{x.batchId}
                    </a>
                  ) : (
                    <>#{x.batchId}</>
                  )}
                </dd>
              </>
            )}
            {x.status === 'VALIDATED' && x.expiresAt && (
              <>
                <dt>Access until</dt>
                <dd data-testid="access-until">
                  <Stamp iso={x.expiresAt} />
                </dd>
              </>
            )}
            <dt>Last change</dt>
            <dd>
              <Stamp iso={x.updatedAt} />
            </dd>
          </dl>
        </div>
      )}
    </section>
  );
}
