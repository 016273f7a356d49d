import { useState } from 'preact/hooks';
import { ApiError, call, type RequestView } from '../api';
import { Confirmed, Done, ErrorNote, Progress, Status, Stamp } from '../components';
import { useAppConfig, useGet, useMe } from '../hooks';
import { useLive } from '../live';
import { isRevocationStatus, renewedTodo, revokeReasonWords, statusWord, stepWord, when, whatToDo } from '../words';

const POLL_MS = 3000;

/** carried: a later renewal in effect carries this request's access
 * (docs/api.md, "Renewing access"), so the request itself no longer does
 * — its expiry no longer applies, and giving back or renewing happens on
 * the carrier's page. */
function carried(x: RequestView): boolean {
  return x.kind !== 'REVOKE' && x.renewal?.status === 'VALIDATED';
}

/** Todo is "What to do" in words, with "Request again" once the request
 * is over (rejected, closed, expired). */
function Todo({ x }: { x: RequestView }) {
  const { contact } = useAppConfig();
  const t = carried(x) ? renewedTodo(x.renewal?.expiresAt) : whatToDo(x.status, x.step.name, x.hint, x.expiresAt, x.updatedAt, contact);
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
                  {x.kind === 'REVOKE' && <div class="small" data-testid="removal">removal of this access</div>}
                  {x.targetTitle && <div class="muted mono small">{x.targetKey}</div>}
                </td>
                <td>
                  <Status status={x.status} renewed={carried(x)} />
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

/** withdrawable: where a withdrawal applies (docs/api.md, "Withdraw a
 * request") — waiting for the approval, waiting in the batch set (no
 * batch has claimed it: no batchId yet), or its own merge request open.
 * The server decides: a claim that came first answers 409, shown in
 * words. */
function withdrawable(x: RequestView): boolean {
  // A renewal reads as its own progress (APPROVAL_SENT, MR_CREATED, …),
  // so it is withdrawable from the same places; withdrawn, the access it
  // would extend stays as it is.
  if (x.kind === 'REVOKE' || x.step.name === 'CLOSE_REQUESTER_WITHDRAWN') return false;
  if (x.status === 'APPROVAL_SENDING' || x.status === 'APPROVAL_SENT') return true;
  return (x.status === 'MR_CREATING' || x.status === 'MR_CREATED') && !x.batchId;
}

/** renewUnderWayWords is the server's refusal to give back an access
 * whose renewal is too far along (409 REQUEST_IN_PROGRESS), in words. */
function renewUnderWayWords(message: string): string {
  if (message.includes('/withdraw')) {
    return 'Its renewal already has its own change under way. Withdraw the renewal first (on its page, linked above), then give the access back here.';
  }
  if (message.includes('stopped on a failure')) {
    return 'Its renewal stopped on a failure and waits for an operator. Ask an operator to revoke the access; it ends at its expiry in any case.';
  }
  return 'Its renewal is being merged and can no longer be stopped. Once it is in effect, give the access back on the renewal’s page.';
}

/** Renew offers renewing an access in effect once its renewal window
 * has opened (renewFrom, docs/api.md "Renewing access"): a renewal is an
 * ordinary request for the same target, so the button opens the form,
 * filled in like this request; submitting it is the confirmation. Before
 * the window opens it says from when. */
function Renew({ x }: { x: RequestView }) {
  const from = Date.parse(x.renewFrom ?? '');
  if (Number.isNaN(from)) return null;
  if (from > Date.now()) {
    return (
      <p data-testid="renew-from">
        You can renew it from {when(x.renewFrom)}, before it ends.
      </p>
    );
  }
  return (
    <>
      <p>
        Your access ends on {when(x.expiresAt)}. Renew it to keep it longer: the renewal is asked for and approved like a request, and
        until it is in effect your access stays as it is.
      </p>
      <p>
        <a
          class="button"
          data-testid="renew"
          href={`/request/${encodeURIComponent(x.targetKey)}?renew=${encodeURIComponent(x.operationId)}`}
        >
          Renew
        </a>
      </p>
    </>
  );
}

/** Actions are what the owner may do to the request now: give an access
 * in effect back, withdraw a request not yet in effect. Each asks first
 * (Confirmed) and answers in words; the page then follows the request's
 * new state by itself. */
function Actions({ x }: { x: RequestView }) {
  const [done, setDone] = useState('');
  const title = x.targetTitle || x.targetKey;
  const path = `/api/requests/${encodeURIComponent(x.operationId)}`;
  // A grant whose renewal is in effect is acted on through the renewal
  // (it owns the access). While the renewal is under way the access can
  // still be given back here: ending it wins over extending it — the
  // server closes a renewal still waiting, and says what to do when the
  // renewal is too far along.
  const giveBack = x.status === 'VALIDATED' && x.kind !== 'REVOKE' && (!x.renewal || x.renewal.status !== 'VALIDATED');
  const renewing = !!x.renewal && x.renewal.status !== 'VALIDATED';
  const withdraw = withdrawable(x);
  if (carried(x) && x.renewal) {
    // Renewed: this request no longer carries the access, so nothing is
    // offered here (the server would refuse it); the carrier is one link
    // away.
    return (
      <div class="card actions" data-testid="carried-by">
        <p>
          Your access was renewed and continues under{' '}
          <a href={`/requests/${encodeURIComponent(x.renewal.operationId)}`}>a later request</a>
          {x.renewal.expiresAt ? <>, until {when(x.renewal.expiresAt)}</> : null}. To give it back or renew it again, open that request.
        </p>
      </div>
    );
  }
  const isRenewal = x.kind === 'RENEW';
  if (!giveBack && !withdraw) return <Done>{done}</Done>;
  return (
    <div class="card actions" data-testid="request-actions">
      <Done>{done}</Done>
      {giveBack && x.renewFrom && <Renew x={x} />}
      {giveBack && (
        <>
          <p>
            No longer need it? Give the access back: it is removed from the access file by a change like the one that granted it, with no
            approval needed.{renewing && ' Its renewal under way is closed with it.'}
          </p>
          <Confirmed
            testid="give-back"
            label="Give back access"
            question={
              renewing
                ? `Give back your access to ${title} now and drop its renewal? It ends once the removal is deployed; you can ask again later.`
                : `Give back your access to ${title} now? It ends once the removal is deployed; you can ask again later.`
            }
            onDone={setDone}
            run={async () => {
              try {
                const res = await call<{ created: boolean }>('POST', `${path}/revoke`);
                return res.data.created
                  ? 'Your access is being given back: it is being removed from the access file and ends once that change is deployed.'
                  : 'Your access was already being removed; nothing was sent twice.';
              } catch (e) {
                // The renewal is too far along: say what to do in words,
                // not with the API paths the message names.
                if (e instanceof ApiError && e.code === 'REQUEST_IN_PROGRESS' && renewing) {
                  throw new ApiError(renewUnderWayWords(e.message), e.code, e.status);
                }
                throw e;
              }
            }}
          />
        </>
      )}
      {withdraw && (
        <>
          <p>
            {isRenewal
              ? 'Changed your mind? You can withdraw this renewal while it has not taken effect; the access it renews stays exactly as it is.'
              : 'Changed your mind? You can withdraw this request while it has not taken effect.'}
          </p>
          <Confirmed
            testid="withdraw"
            label="Withdraw"
            question={
              isRenewal
                ? `Withdraw your renewal for ${title}? Your access stays as it is and still ends when it was going to; you can renew again later.`
                : `Withdraw your request for ${title}? It will not take effect; you can ask again later.`
            }
            onDone={setDone}
            run={async () => {
              try {
                const res = await call<RequestView>('POST', `${path}/withdraw`);
                if (res.code === 'ACCEPTED') return 'Withdrawn: the proposed change is being closed, and nothing of it takes effect.';
                if (res.data.step.name === 'CLOSE_REQUESTER_WITHDRAWN') {
                  return isRenewal
                    ? 'Withdrawn: your access stays as it was, until it ends as before.'
                    : 'Withdrawn: nothing of this request takes effect.';
                }
                return `It had already ended: ${statusWord(res.data.status).toLowerCase()}.`;
              } catch (e) {
                // The merge won the race: say what to do in words, not
                // with the API's path the message names.
                if (e instanceof ApiError && e.code === 'ALREADY_IN_EFFECT') {
                  throw new ApiError(
                    'It can no longer be withdrawn: the change was merged and takes effect. Once it is in effect, you can give the access back on this page.',
                    e.code,
                    e.status,
                  );
                }
                throw e;
              }
            }}
          />
        </>
      )}
    </div>
  );
}

export function RequestPage({ id, user }: { id: string; user: string }) {
  // Pushed over the request's event stream; polled while it is down.
  const r = useLive<RequestView>(`/api/requests/${encodeURIComponent(id)}`, POLL_MS, [user]);
  const me = useMe(user).data;
  const x = r.data;
  // A grant whose access is being removed (or was) is at its own last
  // step, "in effect": what happens now is its removal's, one link away.
  // So is one whose access a later renewal carries: what happens now is
  // the carrier's.
  const now = x && !(x.kind !== 'REVOKE' && isRevocationStatus(x.status)) && !carried(x) ? stepWord(x.step.name) : '';
  return (
    <section data-live={r.live ? 'stream' : 'poll'}>
      <h1>
        {x ? `${x.kind === 'REVOKE' ? 'Removing access to' : x.kind === 'RENEW' ? 'Renewing access to' : 'Access to'} ${x.targetTitle || x.targetKey}` : 'Request'}
      </h1>
      <p class="lead">
        Request <span class="mono wrap">{id}</span>
      </p>
      <ErrorNote>{r.error}</ErrorNote>
      {r.loading && !x && <p>Loading…</p>}
      {x && <ApproveHere status={x.status} />}
      {x && <Actions key={x.operationId} x={x} />}
      {x && (
        <div class="card" data-testid="request-detail" data-operation-id={x.operationId}>
          {x.kind !== 'REVOKE' && !isRevocationStatus(x.status) && !carried(x) && <Progress status={x.status} />}
          <dl class="facts">
            <dt>Target</dt>
            <dd>
              {x.targetTitle || x.targetKey} <span class="muted mono small">({x.targetKey})</span>
            </dd>
            {x.kind === 'REVOKE' && x.grantOperationId && (
              <>
                <dt>Ends the access of</dt>
                <dd>
                  <a href={`/requests/${encodeURIComponent(x.grantOperationId)}`} data-testid="grant-link">
                    your request
                  </a>{' '}
                  {revokeReasonWords(x.revokeReason)}
                </dd>
              </>
            )}
            {x.renews && (
              <>
                <dt>Renews</dt>
                <dd>
                  <a href={`/requests/${encodeURIComponent(x.renews)}`} data-testid="renews-link">
                    your access in effect
                  </a>
                  , which stays as it is until this renewal is in effect
                </dd>
              </>
            )}
            {x.renewal && carried(x) && (
              <>
                <dt>Renewed</dt>
                <dd data-testid="renewal">
                  your access continues under{' '}
                  <a href={`/requests/${encodeURIComponent(x.renewal.operationId)}`} data-testid="renewal-link">
                    the request that carries it now
                  </a>
                  ; give it back or renew it there
                </dd>
              </>
            )}
            {x.renewal && !carried(x) && (
              <>
                <dt>Renewal</dt>
                <dd data-testid="renewal">
                  <a href={`/requests/${encodeURIComponent(x.renewal.operationId)}`} data-testid="renewal-link">
                    follow the renewal of this access
                  </a>{' '}
                  <span class="muted small">({statusWord(x.renewal.status).toLowerCase()})</span>
                </dd>
              </>
            )}
            {x.revocationId && (
              <>
                <dt>Removal</dt>
                <dd>
                  <a href={`/requests/${encodeURIComponent(x.revocationId)}`} data-testid="revocation-link">
                    follow the removal of this access
                  </a>
                </dd>
              </>
            )}
            {x.status === 'REVOKED' && (
              <>
                <dt>Removed on</dt>
                <dd data-testid="removed-on">
                  <Stamp iso={x.updatedAt} />
                </dd>
              </>
            )}
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
              <Status status={x.status} renewed={carried(x)} />
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
            {x.status === 'VALIDATED' && (carried(x) ? x.renewal?.expiresAt : x.expiresAt) && (
              <>
                <dt>Access until</dt>
                <dd data-testid="access-until">
                  {/* The access's expiry now: the carrier's once renewed. */}
                  <Stamp iso={(carried(x) ? x.renewal?.expiresAt : x.expiresAt) as string} />
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
