// The console's request page (/console, /console/requests/{id}): look a
// request up by operationId and see both layers of it — the operation and
// its binding — with its step history, callbacks and audit, and the ways
// out an operator has (re-trigger, replay, close, revoke), each asking for
// a confirmation first.
import { useState } from 'preact/hooks';
import { call } from '../api';
import type { components } from '../api.gen';
import { Confirmed, Done, ErrorNote, Progress, Stamp, Status } from '../components';
import { useGet } from '../hooks';
import { navigate } from '../router';
import { hintWords, when, whenExact } from '../words';
import { accessLink } from './access';
import { DeployTable } from './deploy';
import { CloseCard, RevokeCard } from './requestcards';
import { opsLink } from './shared';

type Schemas = components['schemas'];

/** OpsRequest is GET /ops/requests/{id}: the operation and its binding
 * side by side, with the step history, the callback inboxes (newest
 * first: the first approval callback is what a replay applies), the
 * audit, the grant's revocation and the step bar the owner's page shows. */
type OpsRequest = Schemas['OpsRequestAnswer']['data'];

/** Why a revocation was made, for operators (the code beside it). */
const revokeReasonWords: Record<string, string> = {
  EXPIRED: 'expired (the expiry scan)',
  GIVEN_BACK: 'given back by its owner',
  OPERATOR: 'revoked by an operator',
};

/** operationFields names, in words, the request's own fields the console
 * shows as they are: the key in the field's title, for who reads the API. */
const operationFields: [keyof OpsRequest['operation'], string][] = [
  ['nextAction', 'Next action'],
  ['dueAt', 'Due at'],
  ['attempts', 'Attempts so far'],
  ['leaseOwner', 'Held by instance'],
  ['lastError', 'Last error'],
];

/** ApprovalCallback is one entry of the request's approval callback
 * inbox: how it came (delivered, or found by polling) and what the
 * workflow did with it the last time it acted on it. */
type ApprovalCallback = Schemas['ApprovalCallbackRecord'];

/** A callback's disposition in words an operator reads without the docs. */
const dispositionWords: Record<string, string> = {
  RECORDED: 'recorded, not applied yet',
  APPLIED: 'applied',
  STALE: 'ignored: the request had moved on',
  UNKNOWN_OPERATION: 'ignored: no such request',
  REJECTED_BY_GUARD: 'refused: not the approval or MR changeflow recorded, or not a legal move',
  UNCONFIRMED: 'not applied: the approval system still says pending',
  VERIFY_FAILED: 'not applied yet: the approval could not be read back',
};

function whatBecameOf(c: ApprovalCallback): string {
  const words = c.disposition ? (dispositionWords[c.disposition] ?? c.disposition) : 'recorded';
  const parts = [words];
  if (c.reason) parts.push(`(${c.reason})`);
  if (c.duplicates && c.duplicates > 0) parts.push(`· delivered again ${c.duplicates}×`);
  return parts.join(' ');
}

/** Lookup is the console's front page: the look-up box, and the request
 * it names once there is one. */
export function Lookup({ id }: { id: string }) {
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
        <input
          name="operationId"
          class="lookup"
          placeholder="operationId, e.g. 3f2b7c1e-…"
          aria-label="operationId"
          value={draft}
          onInput={(e) => setDraft((e.target as HTMLInputElement).value)}
        />
        <button type="submit">Look up</button>
      </form>
      {id && <OpsRequestView key={id} id={id} />}
    </>
  );
}

/** stopped: the request keeps where it stopped (next action) but nothing
 * is due and nobody holds it — what POST …/retrigger accepts
 * (docs/workflow.md "Retrigger"). */
function stopped(op: OpsRequest['operation']): boolean {
  return !!op.nextAction && !op.dueAt && !op.leaseOwner;
}

/** unpolled: the request waits for its approval with no action kept,
 * nothing due and no lease — left by a release before poll_approval
 * existed. Only its callback would move it; a re-trigger polls the
 * approval system for it (docs/workflow.md "Retrigger"). */
function unpolled(x: OpsRequest): boolean {
  const op = x.operation;
  return !op.nextAction && !op.dueAt && !op.leaseOwner && x.step.name === 'CREATE_APPROVAL_SUBMITTED' && x.status === 'APPROVAL_SENT';
}

/** waitsForApproval: the request is in the callback guard's waiting set,
 * the only state in which a replayed decision can move it
 * (docs/workflow.md). */
function waitsForApproval(x: OpsRequest): boolean {
  return x.status === 'APPROVAL_SENDING' || x.status === 'APPROVAL_SENT';
}

/** inEffect: a grant that holds its binding in effect — what an operator
 * may revoke (POST /ops/requests/{id}/revoke answers 409 otherwise). */
function inEffect(x: OpsRequest, id: string): boolean {
  return x.operation.kind !== 'REVOKE' && x.binding?.status === 'VALIDATED' && x.binding.operationId === id;
}

/** closable: a request an operator may close (POST …/close): stopped,
 * and not a removal — closing one would leave the access in the file.
 * The server decides the rest (a pending step still merging, a batch
 * still running) and says so in words. */
function closable(x: OpsRequest): boolean {
  return stopped(x.operation) && x.operation.kind !== 'REVOKE' && x.operation.nextAction !== 'withdraw';
}

/** Said is a write's answer and the live states in which it still holds
 * (as on a person's request page): the banner goes once the request has
 * moved past what it announced, without a reload. */
interface Said {
  words: string;
  holds: (x: OpsRequest) => boolean;
}

/** ended: the request is over (in effect, rejected, closed, removed). */
function ended(x: OpsRequest): boolean {
  return x.status === 'VALIDATED' || x.status === 'REJECTED' || x.status === 'CLOSED' || x.status === 'REVOKED';
}

/** sinceOrMoving is when a re-trigger's or a replay's answer holds: while
 * the request is still as the operator saw it (the answer comes before
 * the page's next read), or on its way — neither stopped again nor over. */
function sinceOrMoving(seen: OpsRequest): (y: OpsRequest) => boolean {
  const v = seen.operation.version;
  return (y) => y.operation.version === v || (!stopped(y.operation) && !unpolled(y) && !ended(y));
}

/** sinceOrClosed is when a close's answer holds: while the request is
 * still as the operator saw it, or once it is closed. */
function sinceOrClosed(seen: OpsRequest): (y: OpsRequest) => boolean {
  const v = seen.operation.version;
  return (y) => y.operation.version === v || y.status === 'CLOSED';
}

function OpsRequestView({ id }: { id: string }) {
  const r = useGet<OpsRequest>(`/ops/requests/${encodeURIComponent(id)}`, 3000);
  const [said, setSaid] = useState<Said | null>(null);
  const x = r.data;
  const done = said && x && said.holds(x) ? said.words : '';
  const say = (holds: (y: OpsRequest) => boolean) => (words: string) => setSaid({ words, holds });
  return (
    <div data-testid="ops-request">
      <Done>{done}</Done>
      <ErrorNote>{r.error}</ErrorNote>
      {r.loading && !x && <p>Loading…</p>}
      {x && (
        <>
          {inEffect(x, id) && (
            <RevokeCard
              id={id}
              subject={x.operation.subject}
              // True while the access is in effect or being removed.
              onDone={say((y) => y.binding?.status === 'VALIDATED' || y.binding?.status === 'REVOKING')}
              reload={r.reload}
            />
          )}
          {(stopped(x.operation) || unpolled(x)) && (
            <div class="card actions">
              {stopped(x.operation) ? (
                <p>
                  This request stopped at <span class="mono">{x.step.name}</span>
                  {x.operation.lastError ? <> ({String(x.operation.lastError)})</> : null}. Fix the cause, then re-trigger it: it resumes
                  from <span class="mono">{String(x.operation.nextAction)}</span>, reading what already exists first. What each stopped state
                  means, and the ways out: <a href="/console/runbook">the runbook</a>.
                  {x.operation.kind === 'REVOKE' && (
                    <> This is a revocation: until it is re-triggered and deployed, the entry stays in the access file and the access is still granted.</>
                  )}
                </p>
              ) : (
                <p>
                  This request waits for its approval, but nothing asks the approval system about it: only its callback would move it, and
                  that may have been lost. Re-trigger it to poll the approval system and apply its decision.
                </p>
              )}
              <Confirmed
                testid="retrigger"
                label="Re-trigger"
                question={
                  stopped(x.operation)
                    ? `Re-run this request from ${String(x.operation.nextAction)} now?`
                    : 'Poll the approval system for this request now?'
                }
                // True while the page still shows the state the operator
                // acted on, or the request moves on; once it stopped again
                // or ended, the page says where it is.
                onDone={say(sinceOrMoving(x))}
                run={async () => {
                  // The step the operator saw: the server refuses if the
                  // request moved since (docs/api.md).
                  const res = await call<Schemas['RetriggerAnswer']['data']>('POST', `/ops/requests/${encodeURIComponent(id)}/retrigger`, {
                    step: x.step.name,
                  });
                  r.reload();
                  return `Re-triggered: ${res.data.action} runs now (it had stopped at ${res.data.from.name}).`;
                }}
              />
            </div>
          )}
          {closable(x) && (
            <CloseCard
              id={id}
              subject={x.operation.subject}
              onDone={say(sinceOrClosed(x))}
              reload={r.reload}
            />
          )}
          <div class="card">
            <Progress steps={x.progress} kind={String(x.operation.kind ?? '')} />
            <dl class="facts">
              <dt>{x.operation.kind === 'REVOKE' ? 'Access of' : 'Requested by'}</dt>
              <dd>{x.operation.subject}</dd>
              {x.operation.kind === 'REVOKE' && (
                <>
                  <dt>Revocation of</dt>
                  <dd data-testid="revocation-of">
                    <a class="mono" href={opsLink(String(x.operation.grantOperationId ?? ''))}>
                      {String(x.operation.grantOperationId ?? '')}
                    </a>{' '}
                    — {revokeReasonWords[String(x.operation.revokeReason)] ?? ''}{' '}
                    <span class="mono small">{String(x.operation.revokeReason ?? '')}</span>
                    {x.operation.reason ? <>: “{x.operation.reason}”</> : null}
                  </dd>
                </>
              )}
              {x.revocation && (
                <>
                  <dt>Revocation</dt>
                  <dd data-testid="revocation">
                    <a class="mono" href={opsLink(x.revocation.operationId)}>
                      {x.revocation.operationId}
                    </a>{' '}
                    <Status status={x.revocation.status} /> — {revokeReasonWords[x.revocation.reason] ?? ''}{' '}
                    <span class="mono small">{x.revocation.reason}</span>
                    {x.revocation.text ? <>: “{x.revocation.text}”</> : null}
                  </dd>
                </>
              )}
              <dt>Target</dt>
              <dd>{x.operation.targetKey}</dd>
              {x.access && (
                <>
                  <dt>Had access</dt>
                  <dd data-testid="request-access">
                    from <Stamp iso={x.access.from} exact />{' '}
                    {x.access.until ? (
                      <>
                        until <Stamp iso={x.access.until} exact />
                      </>
                    ) : (
                      'and still has'
                    )}{' '}
                    — <a href={accessLink(x.operation.targetKey)}>who had access to {x.operation.targetKey}</a>
                  </dd>
                </>
              )}
              <dt>Step (operation)</dt>
              <dd class="mono">
                {x.step.name} ({x.step.code})
              </dd>
              <dt>Binding</dt>
              <dd>
                {x.binding ? (
                  <>
                    <Status status={x.binding.status} />{' '}
                    {x.binding.operationId !== id && (
                      <span class="muted small">
                        now held by{' '}
                        <a class="mono" href={opsLink(x.binding.operationId)}>
                          {x.binding.operationId}
                        </a>
                      </span>
                    )}
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
                    <a href={`/console/batches/${x.batch.id}`} data-testid="batch-link">
                      #{x.batch.id}
                    </a>{' '}
                    <span class="mono small">{x.batch.status}</span>
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
              {operationFields.map(([k, label]) =>
                x.operation[k] !== undefined && x.operation[k] !== '' ? (
                  <>
                    <dt title={k}>{label}</dt>
                    <dd class="mono small">{k === 'dueAt' ? whenExact(String(x.operation[k])) : String(x.operation[k])}</dd>
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
                  <td class="small">
                    <Stamp iso={s.at} exact />
                  </td>
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
          {(x.approvalCallbacks ?? []).length > 0 && (
            <>
              <h2>Approval callbacks received</h2>
              {waitsForApproval(x) && (
                <p class="muted small">
                  The request still waits for its approval although a decision was recorded: its application was lost (a restart between
                  recording and applying it, say). Replay the latest one to apply it now; otherwise reconciliation does it after a while.
                </p>
              )}
              <table class="list" data-testid="approval-inbox">
                <thead>
                  <tr>
                    <th>Received</th>
                    <th>Decision</th>
                    <th>Approval</th>
                    <th>How it came</th>
                    <th>What became of it</th>
                    <th>Delivery</th>
                    <th></th>
                  </tr>
                </thead>
                <tbody>
                  {x.approvalCallbacks.map((c, i) => (
                    <tr key={c.deliveryKey} data-delivery={c.deliveryKey}>
                      <td class="small">{when(c.receivedAt)}</td>
                      <td class="mono small">{c.result}</td>
                      <td class="mono small">{c.approvalId}</td>
                      <td class="small">{c.source === 'poll' ? 'found by polling' : 'delivered'}</td>
                      <td class="small" data-testid="disposition">{whatBecameOf(c)}</td>
                      <td class="mono small">{c.deliveryKey}</td>
                      <td>
                        {i === 0 && waitsForApproval(x) && (
                          <Confirmed
                            testid="replay"
                            label="Replay"
                            question={`Apply this ${c.result} decision now? It passes the same check as a delivery: if the request has moved on, nothing changes.`}
                            onDone={say(sinceOrMoving(x))}
                            run={async () => {
                              const res = await call<Schemas['ReplayAnswer']['data']>('POST', `/ops/requests/${encodeURIComponent(id)}/replay-approval`, {});
                              r.reload();
                              return res.data.applied
                                ? `Replayed: the recorded ${c.result} decision was applied, and the request moves on.`
                                : 'Nothing was replayed: the decision had already been acted on, or the request no longer waits for it.';
                            }}
                          />
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </>
          )}
          {(x.deployCallbacks ?? []).length > 0 && (
            <>
              <h2>Deploy callbacks for its MR</h2>
              <DeployTable items={x.deployCallbacks ?? []} testid="deploy-inbox" />
            </>
          )}
          {x.audit.length > 0 && (
            <>
              <h2>Audit</h2>
              <table class="list">
                <tbody>
                  {x.audit.map((a, i) => (
                    <tr key={i}>
                      <td class="small">
                        <Stamp iso={a.at} exact />
                      </td>
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
