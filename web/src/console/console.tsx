// The operations console (docs/api.md, "Operations endpoints"): loaded lazily, because most people
// never open it. Its routes live under /console, not /ops, which is the
// API's. Its writes — re-trigger a stopped request, replay a recorded
// approval decision, settle a batch, run a round or reconciliation now —
// each ask for a confirmation first and answer in words.
import { useState } from 'preact/hooks';
import type { ProgressStep, Step } from '../api';
import { call } from '../api';
import { Confirmed, Done, ErrorNote, Progress, Stamp, Status } from '../components';
import { useGet } from '../hooks';
import { match, navigate } from '../router';
import { hintWords, when, whenExact } from '../words';
import type { DeployCallback } from './deploy';
import { Checks } from './checks';
import { Find } from './find';
import { Runbook } from './runbook';
import { SecurityEvents } from './security';
import { DeployInbox, DeployTable } from './deploy';

interface OpsRequest {
  operation: Record<string, unknown> & { operationId: string; subject: string; targetKey: string; version: number; mr?: { iid: number; url: string } };
  status: string;
  step: Step;
  hint: string;
  binding: { status: string; operationId: string; expiresAt?: string; expired: boolean; version: number; updatedAt: string } | null;
  steps: { from: Step; to: Step; fromBinding?: string; toBinding?: string; actor: string; note?: string; at: string }[];
  batch?: Batch;
  queue?: { projectId: number; batchId?: number; position?: number; admittedAt: string };
  /** The callback inbox, newest first: the first is what a replay applies. */
  approvalCallbacks: ApprovalCallback[];
  /** The deploy callbacks recorded for the request's MR, newest first. */
  deployCallbacks?: DeployCallback[];
  audit: { actor: string; action: string; params: string; outcome: string; at: string }[];
  /** On a grant: the revocation that took its binding over. */
  revocation?: { operationId: string; status: string; reason: string; text: string };
  /** The step bar, as the owner's page shows it. */
  progress?: ProgressStep[];
}

/** Why a revocation was made, for operators (the code beside it). */
const revokeReasonWords: Record<string, string> = {
  EXPIRED: 'expired (the expiry scan)',
  GIVEN_BACK: 'given back by its owner',
  OPERATOR: 'revoked by an operator',
};

/** opsLink is a request's console page. */

/** operationFields names, in words, the request's own fields the console
 * shows as they are: the key in the field's title, for who reads the API. */
const operationFields: [string, string][] = [
  ['nextAction', 'Next action'],
  ['dueAt', 'Due at'],
  ['attempts', 'Attempts so far'],
  ['leaseOwner', 'Held by instance'],
  ['lastError', 'Last error'],
];

function opsLink(id: string): string {
  return `/console/requests/${encodeURIComponent(id)}`;
}
interface ApprovalCallback {
  deliveryKey: string;
  approvalId: string;
  result: string;
  /** callback (delivered to us) or poll (poll_approval found it). */
  source?: string;
  /** What the workflow did with it the last time it acted on it. */
  disposition?: string;
  reason?: string;
  /** Later deliveries of the same key, answered as duplicates. */
  duplicates?: number;
  receivedAt: string;
}

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
interface Batch {
  id: number;
  projectId: number;
  status: string;
  mr?: { iid: number; url: string };
  failureCode?: string;
  failureMessage?: string;
  createdAt: string;
  updatedAt: string;
  members?: { id: number; operationId: string; kind?: string }[];
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
  const batch = match('/console/batches/:id', path);
  return (
    <section data-release={__RELEASE__ || undefined}>
      <h1>Operations console</h1>
      <nav class="tabs">
        <a href="/console" class={path === '/console' || req ? 'active' : ''}>
          Look up a request
        </a>
        <a href="/console/find" class={path === '/console/find' ? 'active' : ''}>
          Requests
        </a>
        <a href="/console/batches" class={path === '/console/batches' || batch ? 'active' : ''}>
          Batches
        </a>
        <a href="/console/config" class={path === '/console/config' ? 'active' : ''}>
          Configuration
        </a>
        <a href="/console/deploy-callbacks" class={path === '/console/deploy-callbacks' ? 'active' : ''}>
          Deploy callbacks
        </a>
        <a href="/console/unowned" class={path === '/console/unowned' ? 'active' : ''}>
          Expired, not ours
        </a>
        <a href="/console/checks" class={path === '/console/checks' ? 'active' : ''}>
          Checks
        </a>
        <a href="/console/security" class={path === '/console/security' ? 'active' : ''}>
          Security events
        </a>
        <a href="/console/runbook" class={path === '/console/runbook' ? 'active' : ''} data-testid="runbook-tab">
          Runbook
        </a>
      </nav>
      {batch ? (
        <BatchDetail key={batch.id} id={batch.id} />
      ) : path === '/console/find' ? (
        <Find />
      ) : path === '/console/batches' ? (
        <Batches />
      ) : path === '/console/config' ? (
        <Config />
      ) : path === '/console/deploy-callbacks' ? (
        <DeployInbox />
      ) : path === '/console/unowned' ? (
        <Unowned />
      ) : path === '/console/checks' ? (
        <Checks />
      ) : path === '/console/security' ? (
        <SecurityEvents />
      ) : path === '/console/runbook' ? (
        <Runbook />
      ) : (
        <Lookup id={req?.id ?? ''} />
      )}
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

/** RevokeCard revokes someone's access in effect, with the reason the
 * operator gives (required; it goes into the removal MR's description and
 * the audit). The server checks the reason; its words stay beside the
 * button. */
function RevokeCard({ id, subject, onDone, reload }: { id: string; subject: string; onDone: (m: string) => void; reload: () => void }) {
  const [reason, setReason] = useState('');
  return (
    <div class="card actions" data-testid="ops-revoke-card">
      <p>
        This access is in effect. To end it before its expiry, revoke it with a reason: its entry is removed from the access file by a
        merge request like the one that granted it, with no approval.
      </p>
      <div class="row">
        <input
          name="revoke-reason"
          class="lookup"
          placeholder="why the access is revoked"
          aria-label="Reason for revoking"
          value={reason}
          onInput={(e) => setReason((e.target as HTMLInputElement).value)}
        />
      </div>
      <Confirmed
        testid="ops-revoke"
        label="Revoke access"
        question={`Revoke ${subject}'s access now? It ends once the removal is deployed.`}
        onDone={onDone}
        run={async () => {
          const res = await call<{ created: boolean; revocationId: string }>('POST', `/ops/requests/${encodeURIComponent(id)}/revoke`, { reason });
          reload();
          return res.data.created
            ? `Revoked: ${res.data.revocationId} removes the entry; the access ends once that is deployed.`
            : `It was already being removed (${res.data.revocationId}); nothing was sent twice.`;
        }}
      />
    </div>
  );
}

/** closable: a request an operator may close (POST …/close): stopped,
 * and not a removal — closing one would leave the access in the file.
 * The server decides the rest (a pending step still merging, a batch
 * still running) and says so in words. */
function closable(x: OpsRequest): boolean {
  return stopped(x.operation) && x.operation.kind !== 'REVOKE' && x.operation.nextAction !== 'withdraw';
}

/** CloseCard gives up on a stopped request, with the reason the operator
 * gives (required; it goes into the request's step history and the
 * audit): its MR is closed and the request ends closed, or follows its
 * merge when a person merged the MR meanwhile. */
function CloseCard({ id, subject, onDone, reload }: { id: string; subject: string; onDone: (m: string) => void; reload: () => void }) {
  const [reason, setReason] = useState('');
  return (
    <div class="card actions" data-testid="ops-close-card">
      <p>
        Or give up on it: close it with a reason. Its merge request is closed and the request ends closed; {subject} can ask again at once.
        If someone merged the merge request meanwhile, the request follows its merge instead.
      </p>
      <div class="row">
        <input
          name="close-reason"
          class="lookup"
          placeholder="why the request is closed"
          aria-label="Reason for closing"
          value={reason}
          onInput={(e) => setReason((e.target as HTMLInputElement).value)}
        />
      </div>
      <Confirmed
        testid="ops-close"
        label="Close request"
        question={`Close ${subject}'s request now? Its merge request is closed and nothing of it takes effect.`}
        onDone={onDone}
        run={async () => {
          const res = await call<{ status: string }>('POST', `/ops/requests/${encodeURIComponent(id)}/close`, { reason });
          reload();
          return res.code === 'ACCEPTED'
            ? 'Closed: its merge request is being closed.'
            : res.data.status === 'CLOSED'
              ? 'Closed: its merge request is closed and nothing of it takes effect.'
              : `It had already ended: ${res.data.status}.`;
        }}
      />
    </div>
  );
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
                  const res = await call<{ action: string; from: Step }>('POST', `/ops/requests/${encodeURIComponent(id)}/retrigger`, {
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
                              const res = await call<{ applied: boolean }>('POST', `/ops/requests/${encodeURIComponent(id)}/replay-approval`, {});
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

interface RoundResult {
  projectId: number;
  outcome: string;
  batchId?: number;
  members?: number;
  mrIid?: number;
  resumed?: boolean;
  blocked?: boolean;
}

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

function Batches() {
  const r = useGet<{ items: Batch[] }>('/ops/batches?limit=50', 5000);
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
            const res = await call<{ rounds: RoundResult[] }>('POST', '/ops/rounds', {});
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
            const res = await call<{ scanned: number; validated: number; waiting: number }>('POST', '/ops/reconcile', {});
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
            const res = await call<{ scanned: number; revoked: number; chunks: number }>('POST', '/ops/expiry/scan', {});
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
                        const res = await call<{ status: string; merged: boolean; alreadySettled: boolean; readmitted: number }>(
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
function BatchDetail({ id }: { id: string }) {
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

interface UnownedFile {
  targetKey: string;
  title: string;
  project: string;
  file: string;
  problem?: string;
  entries: { subject: string; operationId: string; expiresAt: string; why: string }[];
  ownedExpired: number;
}

/** Why an expired entry is not changeflow's, in words. */
const unownedWhy: Record<string, string> = {
  NO_OPERATION: 'no request of changeflow’s has this operationId (added by hand, or by an older release)',
  OTHER_BINDING: 'the operationId is changeflow’s, but for another person or target (copied by hand)',
};

/** Unowned lists, per binding file, the expired entries changeflow did
 * not write (GET /ops/targets/unowned-expired). Not polled: each look
 * reads every target's file from GitLab, so the operator asks again. */
function Unowned() {
  const r = useGet<{ checkedAt: string; ref: string; files: UnownedFile[] }>('/ops/targets/unowned-expired');
  const d = r.data;
  const open = d?.files.filter((f) => f.problem || f.entries.length > 0) ?? [];
  const clean = d?.files.filter((f) => !f.problem && f.entries.length === 0) ?? [];
  const owned = d?.files.reduce((n, f) => n + f.ownedExpired, 0) ?? 0;
  return (
    <div data-testid="unowned">
      <p>
        Entries whose expiry has passed but that changeflow did not write. <strong>changeflow will not remove them</strong>: it
        removes only the entries its own requests wrote, whose history says what was granted, to whom and until when; an entry it did
        not write may be there for a reason it cannot know, and removing it could cut access someone relies on. They still grant
        access wherever the file is deployed, so a person decides: remove the entry by a change to the file, or ask whoever added it.
      </p>
      <div class="row tools">
        <button type="button" class="secondary" onClick={() => r.reload()} disabled={r.loading}>
          Check again
        </button>
        {d && (
          <span class="muted small">
            Read from <span class="mono">{d.ref}</span>, expiries compared with the database clock at <Stamp iso={d.checkedAt} />.
          </span>
        )}
      </div>
      <ErrorNote>{r.error}</ErrorNote>
      {r.loading && !d && <p>Reading the binding files…</p>}
      {d && open.length === 0 && <p data-testid="unowned-none">No binding file holds an expired entry that changeflow did not write.</p>}
      {open.map((f) => (
        <div class="card" key={f.targetKey} data-target={f.targetKey}>
          <h2>
            {f.title} <span class="muted mono small">{f.file}</span>
          </h2>
          {f.problem && <p class="note error">{f.problem}</p>}
          {f.entries.length > 0 && (
            <table class="list stack">
              <thead>
                <tr>
                  <th>Subject</th>
                  <th>operationId</th>
                  <th>Expired</th>
                  <th>Not changeflow’s because</th>
                </tr>
              </thead>
              <tbody>
                {f.entries.map((e) => (
                  <tr key={e.subject} data-subject={e.subject}>
                    <td class="mono">{e.subject}</td>
                    <td class="mono small">{e.operationId || '(none)'}</td>
                    <td class="small">
                      <Stamp iso={e.expiresAt} />
                    </td>
                    <td class="small">{unownedWhy[e.why] ?? e.why}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </div>
      ))}
      {d && clean.length > 0 && (
        <p class="muted small" data-testid="unowned-clean">
          Nothing to decide in: {clean.map((f) => f.title).join(', ')}.
        </p>
      )}
      {owned > 0 && (
        <p class="muted small" data-testid="unowned-owned">
          {owned} expired entr{owned === 1 ? 'y' : 'ies'} of changeflow’s own requests: the expiry scan removes {owned === 1 ? 'it' : 'them'}.
        </p>
      )}
    </div>
  );
}

/** groupOf is a configuration key's group: its first segment
 * ("ratelimit.apply.limit" → "ratelimit"). */
function groupOf(key: string): string {
  const i = key.indexOf('.');
  return i < 0 ? key : key.slice(0, i);
}

function valueText(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/** Config is the effective configuration, grouped by the keys' first
 * segment (one collapsible box per group, with its count and how many of
 * its items fell back) and searchable over key, value, source and reason:
 * a hundred items fit a page, and a phone. */
function Config() {
  const r = useGet<{ version: number; loadedAt: string; fellBack: number; unknownKeys: string[] | null; items: ConfigItem[] }>('/ops/config');
  const [onlyFallbacks, setOnlyFallbacks] = useState(false);
  const [query, setQuery] = useState('');
  const [open, setOpen] = useState<Record<string, boolean>>({});
  const c = r.data;
  const q = query.trim().toLowerCase();
  const shown = (c?.items ?? []).filter(
    (i) =>
      (!onlyFallbacks || i.fellBack) &&
      (!q || [i.key, valueText(i.value), i.source, i.reason ?? ''].some((t) => t.toLowerCase().includes(q))),
  );
  const groups: { name: string; items: ConfigItem[] }[] = [];
  for (const i of shown) {
    const g = groupOf(i.key);
    const last = groups.find((x) => x.name === g);
    if (last) last.items.push(i);
    else groups.push({ name: g, items: [i] });
  }
  // A search or the fall-back filter opens every group it leaves; else a
  // group is open unless the operator folded it.
  const isOpen = (g: string) => !!q || onlyFallbacks || open[g] !== false;
  return (
    <>
      <ErrorNote>{r.error}</ErrorNote>
      {c && (
        <>
          <p>
            Version {c.version}, loaded <Stamp iso={c.loadedAt} />. <strong>{c.fellBack}</strong> item(s) fell back to a default.
            {c.unknownKeys && c.unknownKeys.length > 0 && <> Unknown keys ignored: {c.unknownKeys.join(', ')}.</>}
          </p>
          <div class="row tools">
            <input
              type="search"
              name="config-search"
              placeholder="Search keys, values, reasons"
              aria-label="Search the configuration"
              value={query}
              onInput={(e) => setQuery((e.target as HTMLInputElement).value)}
            />
            <label class="inline">
              <input type="checkbox" checked={onlyFallbacks} onChange={(e) => setOnlyFallbacks((e.target as HTMLInputElement).checked)} /> only
              items that fell back
            </label>
            <button
              type="button"
              class="secondary small"
              onClick={() => setOpen(Object.fromEntries(groups.map((g) => [g.name, false])))}
              disabled={!!q || onlyFallbacks}
            >
              Fold all
            </button>
            <button type="button" class="secondary small" onClick={() => setOpen({})} disabled={!!q || onlyFallbacks}>
              Unfold all
            </button>
          </div>
          <div data-testid="config">
            {groups.length === 0 && <p class="muted">No item matches.</p>}
            {groups.map((g) => {
              const fell = g.items.filter((i) => i.fellBack).length;
              return (
                <details
                  key={g.name}
                  class="group"
                  data-group={g.name}
                  open={isOpen(g.name)}
                  onToggle={(e) => {
                    const now = (e.target as HTMLDetailsElement).open;
                    if (now !== isOpen(g.name)) setOpen((o) => ({ ...o, [g.name]: now }));
                  }}
                >
                  <summary>
                    <span class="mono">{g.name}</span>{' '}
                    <span class="muted small">
                      {g.items.length} item{g.items.length === 1 ? '' : 's'}
                      {fell > 0 ? `, ${fell} fell back` : ''}
                    </span>
                  </summary>
                  <table class="list stack">
                    <thead>
                      <tr>
                        <th>Key</th>
                        <th>Value</th>
                        <th>Source</th>
                        <th>Fell back because</th>
                      </tr>
                    </thead>
                    <tbody>
                      {g.items.map((i) => (
                        <tr key={i.key} class={i.fellBack ? 'warn' : ''} data-key={i.key}>
                          <td class="mono small">{i.key}</td>
                          <td class="mono small value">{valueText(i.value)}</td>
                          <td class="small">{i.source}</td>
                          <td class="small">{i.fellBack ? i.reason || 'yes' : ''}</td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </details>
              );
            })}
          </div>
        </>
      )}
    </>
  );
}
