import { useState } from 'preact/hooks';
import { ApiError, call, type RequestView } from '../api';
import { Confirmed, Done, ErrorNote, Progress, Status, Stamp } from '../components';
import { useAppConfig, useGet, useMe } from '../hooks';
import { useLive } from '../live';
import { isRevocationStatus, renewedTodo, renewsWords, revokeReasonWords, statusWord, stepWord, when, whatToDo } from '../words';

const POLL_MS = 3000;

/** carried: a later renewal in effect carries this request's access
 * (docs/api.md, "Renewing access"), so the request itself no longer does
 * — its expiry no longer applies, and giving back or renewing happens on
 * the carrier's page. */
export function carried(x: RequestView): boolean {
  return x.kind !== 'REVOKE' && x.renewal?.status === 'VALIDATED';
}

/** todoOf is "What to do" for x (words.ts whatToDo, or the renewed
 * request's). */
function todoOf(x: RequestView, contact?: string) {
  return carried(x) ? renewedTodo(x.renewal?.expiresAt) : whatToDo(x.status, x.step.name, x.hint, x.expiresAt, x.updatedAt, contact);
}

/** againHref opens the target's form filled in like x (its reason and
 * days, SubmitForm's ?again=): asking again is most often asking for the
 * same thing. */
export function againHref(x: RequestView): string {
  return `/request/${encodeURIComponent(x.targetKey)}?again=${encodeURIComponent(x.operationId)}`;
}

/** RequestAgain is the link that asks again, filled in like x. */
function RequestAgain({ x }: { x: RequestView }) {
  return (
    <a href={againHref(x)} data-testid="request-again">
      Request again
    </a>
  );
}

/** Todo is "What to do" in words, with "Request again" once the request
 * is over (rejected, closed, expired) unless the caller shows it
 * elsewhere (my requests' actions column). */
function Todo({ x, again = true }: { x: RequestView; again?: boolean }) {
  const { contact } = useAppConfig();
  const t = todoOf(x, contact);
  return (
    <span class={t.bad ? 'bad' : ''} data-testid="todo">
      {t.words}
      {again && t.again && (
        <>
          {' '}
          <RequestAgain x={x} />
        </>
      )}
    </span>
  );
}

/** Until is "Access until" of a row of my requests: when the access ends
 * (or ended), or how long it was asked for while it is not in effect. */
function Until({ x }: { x: RequestView }) {
  if (x.kind === 'REVOKE') return <span class="muted">—</span>;
  if (carried(x)) return <Stamp iso={x.renewal?.expiresAt} />;
  if (x.status === 'VALIDATED' || x.status === 'REVOKING' || x.status === 'REVOKE_FAILED') {
    return x.expiresAt ? <Stamp iso={x.expiresAt} /> : <span>no end</span>;
  }
  if (x.status === 'REVOKED') {
    return (
      <span>
        ended <Stamp iso={x.updatedAt} />
      </span>
    );
  }
  if (x.status === 'CLOSED' && x.step.name === 'CLOSE_EXPIRED') {
    return (
      <span>
        ended <Stamp iso={x.expiresAt} />
      </span>
    );
  }
  if (x.status === 'REJECTED' || x.status === 'CLOSED') return <span class="muted">—</span>;
  return x.days ? (
    <span class="muted">
      {x.days} day{x.days === 1 ? '' : 's'} asked for
    </span>
  ) : (
    <span class="muted">—</span>
  );
}

/** RowActions are what a row of my requests allows, by the request
 * page's own rules (Actions): Renew and Give back on an access in effect,
 * Withdraw where a withdrawal applies, Request again once it is over. A
 * write answers in words in the row; the list's next poll shows the new
 * state. */
function RowActions({ x, onChange }: { x: RequestView; onChange: () => void }) {
  const { contact } = useAppConfig();
  const [done, setDone] = useState('');
  const title = x.targetTitle || x.targetKey;
  const after = (m: string) => {
    setDone(m);
    onChange();
  };
  const again = todoOf(x, contact).again;
  const giveBack = giveBackable(x);
  const withdraw = withdrawable(x);
  if (!again && !giveBack && !withdraw) return <Done>{done}</Done>;
  return (
    <div class="row-actions" data-testid="row-actions">
      <Done>{done}</Done>
      {giveBack && <RenewButton x={x} compact />}
      {giveBack && <GiveBack operationId={x.operationId} title={title} renewing={!!x.renewal && x.renewal.status !== 'VALIDATED'} onDone={after} />}
      {withdraw && <Withdraw x={x} title={title} onDone={after} />}
      {again && <RequestAgain x={x} />}
    </div>
  );
}

export function MyRequestsPage({ user }: { user: string }) {
  const r = useGet<{ items: RequestView[]; nextCursor: string }>('/api/requests?limit=50', POLL_MS, [user]);
  const reload = r.reload;
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
              <th>Access until</th>
              <th>What to do</th>
              <th>Updated</th>
              <th></th>
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
                  <Status status={x.status} renewed={carried(x)} step={x.step.name} />
                </td>
                <td class="small" data-testid="row-until">
                  <Until x={x} />
                </td>
                <td>
                  <Todo x={x} again={false} />
                </td>
                <td class="muted small">
                  <Stamp iso={x.updatedAt} />
                </td>
                <td>
                  <RowActions key={`${x.operationId}:${x.status}`} x={x} onChange={reload} />
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
 * batch has claimed it: no batchId yet), its own merge request open, or
 * stopped on a failure (alone or in a batch: a batch that waits for a
 * person lets its members go). The server decides: a claim that came
 * first, or a batch still running, answers 409, shown in words. */
export function withdrawable(x: RequestView): boolean {
  // A renewal reads as its own progress (APPROVAL_SENT, MR_CREATED, …),
  // so it is withdrawable from the same places; withdrawn, the access it
  // would extend stays as it is.
  if (x.kind === 'REVOKE' || x.step.name === 'CLOSE_REQUESTER_WITHDRAWN') return false;
  if (x.status === 'APPROVAL_SENDING' || x.status === 'APPROVAL_SENT' || failed(x)) return true;
  return (x.status === 'MR_CREATING' || x.status === 'MR_CREATED') && !x.batchId;
}

/** failed: the request stopped on a failure, or follows a batch that
 * stopped (blocker BLOCKED_BATCH), and waits for an operator; its owner
 * may give up on it instead, and ask again at once. */
function failed(x: RequestView): boolean {
  return x.kind !== 'REVOKE' && (x.status === 'CREATE_FAILED' || x.status === 'HANDLE_FAILED' || x.blocker?.kind === 'BLOCKED_BATCH');
}

/** refusalReason is a refusal's data.reason (docs/api.md, "Refusal
 * reasons"), or '' when it names none: the words are chosen from it,
 * never from the server's message, which may be reworded. */
function refusalReason(e: ApiError): string {
  const reason = (e.data as { reason?: unknown } | null | undefined)?.reason;
  return typeof reason === 'string' ? reason : '';
}

/** renewUnderWayWords is the server's refusal to give back an access
 * whose renewal is too far along (409 REQUEST_IN_PROGRESS), in words by
 * its reason; a reason this app does not know reads as the renewal being
 * merged, the case in which waiting helps. */
function renewUnderWayWords(reason: string): string {
  switch (reason) {
    case 'renewal_has_change':
      return 'Its renewal already has its own change under way. Withdraw the renewal first (on its page), then give the access back.';
    case 'renewal_stopped':
      return 'Its renewal stopped on a failure and waits for an operator. Ask an operator to revoke the access; it ends at its expiry in any case.';
    case 'renewal_expired':
      // Waiting does not help here, and nothing is being merged: the
      // access is over and its renewal is being closed.
      return 'Your access has already expired, and its renewal is being closed. The access is removed on its own once that is done; there is nothing to give back.';
    default:
      return 'Its renewal is being merged and can no longer be stopped. Once it is in effect, give the access back on the renewal’s page.';
  }
}

/** giveBackable: x carries an access in effect its owner may give back
 * — a grant or renewal in effect that no later renewal carries on (that
 * one is acted on instead). While a renewal of it is under way it can
 * still be given back: ending the access wins over extending it — the
 * server closes a renewal still waiting, and says what to do when the
 * renewal is too far along. */
export function giveBackable(x: RequestView): boolean {
  return x.status === 'VALIDATED' && x.kind !== 'REVOKE' && (!x.renewal || x.renewal.status !== 'VALIDATED');
}

/** GiveBack gives the access operationId carries back, after asking
 * (POST /api/requests/{operationId}/revoke); renewing says a renewal of
 * it is under way, which is dropped with it. The request page, a row of
 * my requests and a row of the targets offer the same button. */
export function GiveBack({
  operationId,
  title,
  renewing,
  onDone,
}: {
  operationId: string;
  title: string;
  renewing?: boolean;
  onDone: (message: string) => void;
}) {
  return (
    <Confirmed
      testid="give-back"
      label="Give back access"
      question={
        renewing
          ? `Give back your access to ${title} now and drop its renewal? It ends once the removal is deployed; you can ask again later.`
          : `Give back your access to ${title} now? It ends once the removal is deployed; you can ask again later.`
      }
      onDone={onDone}
      run={async () => {
        try {
          const res = await call<{ created: boolean }>('POST', `/api/requests/${encodeURIComponent(operationId)}/revoke`);
          return res.data.created
            ? 'Your access is being given back: it is being removed from the access file and ends once that change is deployed.'
            : 'Your access was already being removed; nothing was sent twice.';
        } catch (e) {
          // The renewal is too far along: say what to do in words,
          // not with the API paths the message names.
          if (e instanceof ApiError && e.code === 'REQUEST_IN_PROGRESS' && renewing) {
            throw new ApiError(renewUnderWayWords(refusalReason(e)), e.code, e.status);
          }
          throw e;
        }
      }}
    />
  );
}

/** Withdraw withdraws x after asking (POST /api/requests/{id}/withdraw),
 * on the request page and in a row of my requests alike. onDone gets the
 * answer and the live states in which it still holds (Said). */
function Withdraw({ x, title, onDone }: { x: RequestView; title: string; onDone: (message: string, holds: (y: RequestView) => boolean) => void }) {
  // Which states the answer holds in depends on the answer: run sets it
  // just before onDone reads it.
  let holds: (y: RequestView) => boolean = () => false;
  const isRenewal = x.kind === 'RENEW';
  return (
    <Confirmed
      testid="withdraw"
      label="Withdraw"
      question={
        isRenewal
          ? `Withdraw your renewal for ${title}? Your access stays as it is and still ends when it was going to; you can renew again later.`
          : failed(x)
            ? `Withdraw your stopped request for ${title}? Its proposed change is closed; you can ask again right after.`
            : `Withdraw your request for ${title}? It will not take effect; you can ask again later.`
      }
      onDone={(words) => onDone(words, holds)}
      run={async () => {
        try {
          const res = await call<RequestView>('POST', `/api/requests/${encodeURIComponent(x.operationId)}/withdraw`);
          if (res.code === 'ACCEPTED') {
            // True until the withdrawal is carried out: then the status
            // and "What to do" say it is over.
            holds = (y) => y.step.name === 'CLOSE_REQUESTER_WITHDRAWN' && y.status !== 'CLOSED' && y.status !== 'REJECTED';
            return 'Withdrawn: the proposed change is being closed, and nothing of it takes effect.';
          }
          if (res.data.step.name === 'CLOSE_REQUESTER_WITHDRAWN') {
            holds = (y) => y.step.name === 'CLOSE_REQUESTER_WITHDRAWN';
            if (isRenewal) return 'Withdrawn: your access stays as it was, until it ends as before.';
            return failed(x) ? 'Withdrawn: nothing of this request takes effect. You can ask again now.' : 'Withdrawn: nothing of this request takes effect.';
          }
          const ended = res.data.status;
          holds = (y) => y.status === ended;
          return `It had already ended: ${statusWord(ended, res.data.step.name).toLowerCase()}.`;
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
  );
}

/** renewHref opens the target's form as the renewal of operationId
 * (SubmitForm's ?renew=). */
export function renewHref(targetKey: string, operationId: string): string {
  return `/request/${encodeURIComponent(targetKey)}?renew=${encodeURIComponent(operationId)}`;
}

/** RenewButton is Renew once the renewal window of x has opened
 * (renewFrom ≤ now), else from when it opens, in words; nothing for an
 * access without an expiry. compact is a row's: the button, or the date. */
function RenewButton({ x, compact }: { x: RequestView; compact?: boolean }) {
  const from = Date.parse(x.renewFrom ?? '');
  if (Number.isNaN(from)) return null;
  if (from > Date.now()) {
    return compact ? (
      <span class="muted small" data-testid="renew-from">
        renew from {when(x.renewFrom)}
      </span>
    ) : (
      <p data-testid="renew-from">You can renew it from {when(x.renewFrom)}, before it ends.</p>
    );
  }
  const button = (
    <a class="button" data-testid="renew" href={renewHref(x.targetKey, x.operationId)}>
      Renew
    </a>
  );
  if (compact) return button;
  return (
    <>
      <p>
        Your access ends on {when(x.expiresAt)}. Renew it to keep it longer: the renewal is asked for and approved like a request, and
        until it is in effect your access stays as it is.
      </p>
      <p>{button}</p>
    </>
  );
}

/** Said is an action's answer in words and the live states in which it
 * still holds: the banner is shown only while the request's live state
 * is one of them, so it never outlives what it announced ("being given
 * back…" goes once the access is removed, without a reload). */
interface Said {
  words: string;
  holds: (x: RequestView) => boolean;
}

/** Actions are what the owner may do to the request now: give an access
 * in effect back, renew it, withdraw a request not yet in effect. Each
 * asks first (Confirmed) and answers in words; the page then follows the
 * request's new state by itself. */
function Actions({ x }: { x: RequestView }) {
  const [said, setSaid] = useState<Said | null>(null);
  const done = said && said.holds(x) ? said.words : '';
  const say = (words: string, holds: (y: RequestView) => boolean) => setSaid({ words, holds });
  const title = x.targetTitle || x.targetKey;
  // A grant whose renewal is in effect is acted on through the renewal
  // (it owns the access).
  const giveBack = giveBackable(x);
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
      {giveBack && x.renewFrom && <RenewButton x={x} />}
      {giveBack && (
        <>
          <p>
            No longer need it? Give the access back: it is removed from the access file by a change like the one that granted it, with no
            approval needed.{renewing && ' Its renewal under way is closed with it.'}
          </p>
          <GiveBack
            operationId={x.operationId}
            title={title}
            renewing={renewing}
            // True while the access is still in effect (the answer comes
            // before the page's next read) or being removed.
            onDone={(words) => say(words, (y) => y.status === 'VALIDATED' || y.status === 'REVOKING')}
          />
        </>
      )}
      {withdraw && (
        <>
          <p>
            {failed(x)
              ? isRenewal
                ? 'Rather not wait for the operators? Withdraw this renewal: its proposed change is closed, your access stays exactly as it is, and you can renew again at once.'
                : 'Rather not wait for the operators? Withdraw this request: its proposed change is closed, and you can ask again at once.'
              : isRenewal
                ? 'Changed your mind? You can withdraw this renewal while it has not taken effect; the access it renews stays exactly as it is.'
                : 'Changed your mind? You can withdraw this request while it has not taken effect.'}
          </p>
          <Withdraw x={x} title={title} onDone={say} />
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
          <Progress steps={x.progress} kind={x.kind} />
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
                  {/* Follows the renewal's live status: "stays as it is
                      until this renewal is in effect" is true only while
                      it is not. */}
                  <a href={`/requests/${encodeURIComponent(x.renews)}`} data-testid="renews-link">
                    {renewsWords(x.status).link}
                  </a>
                  <span data-testid="renews-words">{renewsWords(x.status).rest}</span>
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
            {x.expiresFromApproval && x.days !== undefined && x.days > 0 && (
              <>
                <dt>Access ends</dt>
                <dd data-testid="ends-after-approval">
                  {x.days} day{x.days === 1 ? '' : 's'} after it is approved: the days count from the approval, not from when you asked.
                </dd>
              </>
            )}
            <dt>Status</dt>
            <dd>
              <Status status={x.status} renewed={carried(x)} step={x.step.name} />
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
