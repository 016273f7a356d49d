import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, call, fieldProblems, type RequestView, type Target } from '../api';
import type { components } from '../api.gen';
import { ErrorNote, Stamp } from '../components';
import { endDate, requestedDays } from '../enddate';
import { useGet } from '../hooks';
import { accessWords, closedWords, dayWords, when } from '../words';

/** maxReasonChars is the server's limit (internal/httpapi, maxReasonRunes):
 * a longer reason is refused there, so it is refused here first — never
 * cut, which a maxLength attribute would do silently to a paste. */
export const maxReasonChars = 500;

/** unsafeChar is what the server refuses in a reason (domain
 * UnsafeTextRune): control characters (a newline too), line and paragraph
 * separators, bidirectional formatting. */
const unsafeChar = /[\p{Cc}\u2028\u2029\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/u;

/** validate checks the form as the server will, with the server's own
 * sentences, so the browser and the server never disagree. */
export function validate(reason: string, days: string, maxDays: number): Record<string, string> {
  const out: Record<string, string> = {};
  const r = reason.trim();
  const chars = [...r];
  if (chars.length === 0) out.reason = 'reason is required.';
  else if (chars.length > maxReasonChars) out.reason = `reason must be at most ${maxReasonChars} characters of text.`;
  else {
    const i = chars.findIndex((c) => unsafeChar.test(c));
    if (i >= 0) {
      const hex = chars[i].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');
      out.reason = `reason must be one line of text without control or bidirectional-formatting characters (U+${hex} at character ${i + 1}).`;
    }
  }
  const d = days.trim();
  if (d && (!/^\d+$/.test(d) || Number(d) < 1 || Number(d) > maxDays)) out.days = `days must be between 1 and ${maxDays} for this target.`;
  return out;
}

function newOperationId(): string {
  if (typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

/** Preview is GET /api/targets/{key}/preview; {} when none can be made.
 * The server shows a person only their own entry (scope "own") and how many
 * other people hold the target; the whole file is for operators. */
type Preview = Partial<components['schemas']['Preview']>;

type Outcome =
  | { kind: 'idle' }
  | { kind: 'sent'; operationId: string; duplicate: boolean }
  | { kind: 'limited'; message: string; until: number }
  | { kind: 'error'; message: string; code: string; operationId?: string; expiresAt?: string; renewFrom?: string };

/** SubmitPage wraps one form instance; "Start a new request" remounts it,
 * which is the only way to get a new operationId. A target that takes no
 * request now — closed, outside its window, unknown — is explained
 * instead, before anyone types: there is no form to fill in for nothing. */
export function SubmitPage({ targetKey, account }: { targetKey: string; account?: string }) {
  const [instance, setInstance] = useState(0);
  const targets = useGet<{ items: Target[] }>('/api/targets');
  const target = targets.data?.items.find((t) => t.key === targetKey);
  if (!targets.data) {
    return (
      <section>
        <h1>Request access</h1>
        <ErrorNote>{targets.error}</ErrorNote>
        {!targets.error && <p>Loading…</p>}
      </section>
    );
  }
  if (!target) {
    return (
      <section data-testid="no-form">
        <h1>No such target</h1>
        <p class="note">
          There is no target <span class="mono wrap">{targetKey}</span>. Pick one from the <a href="/targets">targets</a>.
        </p>
      </section>
    );
  }
  if (!target.open) {
    return (
      <section data-testid="no-form">
        <h1>Request access</h1>
        <p class="lead">
          to <strong>{target.title || target.key}</strong> <span class="muted mono">({target.key})</span>
        </p>
        <p class="note" data-testid="not-open">
          <strong>{accessWords(target.accessMode, false)}.</strong> {closedWords(target.accessMode, target.why)}
        </p>
        <p>
          Back to the <a href="/targets">targets</a>.
        </p>
      </section>
    );
  }
  return <SubmitForm key={instance} target={target} account={account} onNew={() => setInstance((i) => i + 1)} />;
}

/** SubmitForm is the form itself; account (GET /api/me) is whom the
 * request is for — always the caller, the server takes no other. */
function SubmitForm({ target, account, onNew }: { target: Target; account?: string; onNew: () => void }) {
  const targetKey = target.key;
  // One operationId per form instance, sent as Idempotency-Key on every
  // attempt: a retry after a lost answer is the same request to the server.
  const [operationId] = useState(newOperationId);
  const [reason, setReason] = useState('');
  const [days, setDays] = useState('');
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome>({ kind: 'idle' });
  // Problems per field: the browser's check first, the server's words
  // when it refuses anyway.
  const [problems, setProblems] = useState<Record<string, string>>({});
  const [now, setNow] = useState(Date.now());
  // The clock the end-date preview counts from: a form left open for an
  // hour still shows the end a submission would get now.
  const [clock, setClock] = useState(Date.now());
  useEffect(() => {
    const id = window.setInterval(() => setClock(Date.now()), 30_000);
    return () => window.clearInterval(id);
  }, []);
  // The ref closes the gap between a click and the re-render that disables
  // the button: a double click must send one request.
  const inFlight = useRef(false);
  // A renewal (?renew=<operationId> from the request page's Renew): the
  // same target, filled in like the access it renews. Only the owner's
  // own request in effect for this target fills it in; anything else
  // leaves an ordinary empty form.
  const query = new URLSearchParams(window.location.search);
  const renewID = query.get('renew');
  const renewing = useGet<RequestView>(renewID ? `/api/requests/${encodeURIComponent(renewID)}` : null);
  const renews = renewing.data && renewing.data.targetKey === targetKey && renewing.data.status === 'VALIDATED' ? renewing.data : undefined;
  // Asking again (?again=<operationId> from "Request again"): filled in
  // like the earlier request, if it is the caller's own for this target;
  // an ordinary empty form otherwise (an admin may read someone else's,
  // but asks for themselves). The person still reads and submits it:
  // nothing is sent before that.
  const againID = renewID ? null : query.get('again');
  const earlier = useGet<RequestView>(againID ? `/api/requests/${encodeURIComponent(againID)}` : null);
  const e = earlier.data;
  const again = e && e.targetKey === targetKey && e.kind !== 'REVOKE' && (!account || e.subject === account) ? e : undefined;
  const from = renews ?? again;
  const filled = useRef(false);
  useEffect(() => {
    if (!from || filled.current) return;
    filled.current = true;
    setReason(from.reason ?? '');
    // Days as asked then, unless the target's maximum has since become
    // smaller: then empty, which is the maximum.
    if (from.days && from.days <= target.maxDays) setDays(String(from.days));
  }, [from]);
  const daysParam = /^\d+$/.test(days.trim()) ? `?days=${days.trim()}` : '';
  const preview = useGet<Preview>(`/api/targets/${encodeURIComponent(targetKey)}/preview${daysParam}`);

  useEffect(() => {
    if (outcome.kind !== 'limited') return;
    const id = window.setInterval(() => setNow(Date.now()), 1000);
    return () => window.clearInterval(id);
  }, [outcome.kind]);

  const locked = outcome.kind === 'sent';
  const waitSeconds = outcome.kind === 'limited' ? Math.max(0, Math.ceil((outcome.until - now) / 1000)) : 0;

  async function submit(e: Event) {
    e.preventDefault();
    if (inFlight.current || locked || waitSeconds > 0) return;
    const found = validate(reason, days, target.maxDays);
    setProblems(found);
    if (Object.keys(found).length > 0) return;
    inFlight.current = true;
    setBusy(true);
    try {
      const body: Record<string, unknown> = { targetKey, reason: reason.trim() };
      if (days.trim()) body.days = Number(days);
      const r = await call<components['schemas']['SubmitAnswer']['data']>('POST', '/api/requests', body, { 'Idempotency-Key': operationId });
      setOutcome({ kind: 'sent', operationId: r.data?.operationId ?? operationId, duplicate: r.code === 'DUPLICATE_SUBMIT' });
    } catch (err) {
      if (err instanceof ApiError && err.code === 'RATE_LIMITED') {
        const secs = err.retryAfter ?? 60;
        setNow(Date.now());
        setOutcome({ kind: 'limited', message: err.message, until: Date.now() + secs * 1000 });
      } else if (err instanceof ApiError) {
        const fp = fieldProblems(err, ['reason', 'days']);
        setProblems(fp);
        const ref = (err.data ?? {}) as { operationId?: string; expiresAt?: string; renewFrom?: string };
        setOutcome({
          kind: 'error',
          message: Object.keys(fp).length > 0 ? 'Please correct the form.' : err.message,
          code: err.code,
          operationId: typeof ref.operationId === 'string' ? ref.operationId : undefined,
          expiresAt: typeof ref.expiresAt === 'string' ? ref.expiresAt : undefined,
          renewFrom: typeof ref.renewFrom === 'string' ? ref.renewFrom : undefined,
        });
      } else {
        setOutcome({ kind: 'error', message: 'Something went wrong.', code: 'UNKNOWN' });
      }
    } finally {
      inFlight.current = false;
      setBusy(false);
    }
  }

  return (
    <section>
      <h1>{renews ? 'Renew access' : 'Request access'}</h1>
      <p class="lead">
        to <strong>{target.title || targetKey}</strong> <span class="muted mono">({targetKey})</span>
      </p>
      {renews && (
        <p class="note" data-testid="renewing">
          Renewing your access, which ends on {when(renews.expiresAt)}. The renewal is approved like a request; until it is in effect your
          access stays as it is, and if it is refused nothing changes.
        </p>
      )}
      {again && (
        <p class="note" data-testid="asking-again">
          Filled in like your earlier request of <Stamp iso={again.createdAt ?? again.updatedAt} />: check the reason and the days, then
          submit.
        </p>
      )}
      {account && (
        <p class="muted" data-testid="for-account">
          For <strong>{account}</strong>: a request is always for the account you act as.
        </p>
      )}
      <p class="muted" data-testid="max-days">
        Access for up to <strong>{target.maxDays}</strong> day{target.maxDays === 1 ? '' : 's'}.
      </p>
      <form class="card" onSubmit={submit} data-operation-id={operationId} noValidate>
        <label>
          <span>
            Reason{' '}
            <span class={`muted hint${[...reason.trim()].length > maxReasonChars ? ' bad' : ''}`} data-testid="reason-count">
              ({[...reason.trim()].length} of at most {maxReasonChars} characters; it wraps, but takes no line breaks)
            </span>
          </span>
          <textarea
            name="reason"
            required
            rows={3}
            value={reason}
            disabled={locked || busy}
            aria-invalid={problems.reason ? true : undefined}
            onInput={(e) => setReason((e.target as HTMLTextAreaElement).value)}
            placeholder="What you need it for, e.g. the quarterly audit"
          />
          {problems.reason && (
            <span class="field-error" role="alert" data-testid="reason-error">
              {problems.reason}
            </span>
          )}
        </label>
        <label>
          <span>
            Days <span class="muted hint">(1 to {target.maxDays}; leave empty for {target.maxDays})</span>
          </span>
          <input
            name="days"
            type="number"
            min={1}
            max={target.maxDays}
            inputMode="numeric"
            value={days}
            disabled={locked || busy}
            aria-invalid={problems.days ? true : undefined}
            onInput={(e) => setDays((e.target as HTMLInputElement).value)}
          />
          {problems.days && (
            <span class="field-error" role="alert" data-testid="days-error">
              {problems.days}
            </span>
          )}
        </label>
        <EndPreview days={days} target={target} renewsUntil={renews?.expiresAt} renewing={!!renews} nowMs={clock} />
        <div class="row">
          <button type="submit" disabled={busy || locked || waitSeconds > 0}>
            {busy ? 'Submitting…' : locked ? 'Submitted' : renews ? 'Submit renewal' : 'Submit request'}
          </button>
          {outcome.kind !== 'idle' && (
            <span class="muted mono small" data-testid="operation-id">
              operation {operationId}
            </span>
          )}
        </div>
      </form>
      <PreviewBox preview={preview.data} />
      {outcome.kind === 'sent' && (
        <p class="note ok" role="status" data-testid="submitted">
          {outcome.duplicate ? 'This request was already submitted; nothing was sent twice. ' : 'Submitted. '}
          <a href={`/requests/${encodeURIComponent(outcome.operationId)}`}>Follow it</a> or see <a href="/requests">my requests</a>.
        </p>
      )}
      {outcome.kind === 'limited' && (
        <p class="note error" role="alert" data-testid="rate-limited">
          {outcome.message}.{' '}
          {waitSeconds > 0 ? `You can try again in ${waitSeconds} s.` : 'You can try again now.'}
        </p>
      )}
      {outcome.kind === 'error' && (outcome.code === 'ALREADY_IN_EFFECT' || outcome.code === 'REQUEST_IN_PROGRESS') && outcome.operationId && (
        <p class="note error" role="alert" data-testid="refused">
          {outcome.code === 'ALREADY_IN_EFFECT' ? (
            outcome.expiresAt ? (
              <>
                You already have this access, until {dayWords(outcome.expiresAt)} (<Stamp iso={outcome.expiresAt} />
                ).{' '}
                {outcome.renewFrom && <span data-testid="refused-renew-from">You can renew it from {when(outcome.renewFrom)}. </span>}
              </>
            ) : (
              'You already have this access. '
            )
          ) : (
            'A request of yours for this target is already on its way (or waits for the maintainers). '
          )}
          <a href={`/requests/${encodeURIComponent(outcome.operationId)}`} data-testid="refused-link">
            See that request
          </a>
          .
        </p>
      )}
      {outcome.kind === 'error' && !((outcome.code === 'ALREADY_IN_EFFECT' || outcome.code === 'REQUEST_IN_PROGRESS') && outcome.operationId) && (
        <>
          <ErrorNote>{outcome.message}</ErrorNote>
          {outcome.code === 'IDEMPOTENCY_KEY_REUSED' && (
            <button type="button" class="secondary" onClick={onNew}>
              Start a new request
            </button>
          )}
        </>
      )}
    </section>
  );
}

/** EndPreview says, before submit, when the access would end with the
 * days typed (docs/webapp.md, "The end date"): the server's rule
 * (enddate.ts) applied to the clock now. Nothing while the days field
 * holds something the target does not allow: its check says why. */
function EndPreview({
  days,
  target,
  renewing,
  renewsUntil,
  nowMs,
}: {
  days: string;
  target: Target;
  renewing: boolean;
  renewsUntil?: string;
  nowMs: number;
}) {
  const n = requestedDays(days, target.maxDays);
  if (n === undefined) return null;
  const e = endDate(nowMs, n, target.maxDays, renewing ? renewsUntil : undefined);
  const count = `${n} day${n === 1 ? '' : 's'}`;
  const cap = e.capped ? `, cut to ${target.maxDays} day${target.maxDays === 1 ? '' : 's'} from now, this target's longest access` : '';
  let how: string;
  if (renewing) {
    how = e.from === 'current' ? `${count} added to your access's current end, ${when(renewsUntil)}${cap}.` : `${count} from now${cap}.`;
  } else if (target.daysFromApproval) {
    how = `the ${count} count from the approval, so this is the end if it is approved now; each day the approval takes moves the end a day later.`;
  } else {
    how = `${count} from now${cap}.`;
  }
  return (
    <p class="muted small" data-testid="end-date" data-from={e.from} data-capped={e.capped ? 'true' : undefined}>
      {renewing ? 'Renewed, your access would end on ' : target.daysFromApproval ? 'If approved now, your access would end on ' : 'Your access would end on '}
      <Stamp iso={e.iso} />: {how}
    </p>
  );
}

/** othersText says how many other people's entries the file holds; who
 * they are is not shown to anyone but operators. */
function othersText(n: number): string {
  if (n === 0) return 'Nobody else has access to this target through the file.';
  return `The file also holds ${n} other ${n === 1 ? 'person' : 'people'}'s access (not shown).`;
}

/** PreviewBox shows the change the request would make to the binding file.
 * A preview never blocks a submission: without one (GitLab slow or down)
 * it says so and nothing else. */
function PreviewBox({ preview }: { preview?: Preview }) {
  if (!preview) return null;
  const changed = preview.diff?.filter((l) => l.op !== ' ') ?? [];
  if (!preview.file || changed.length === 0) {
    return <p class="muted small">No preview of the change is available right now; you can still submit.</p>;
  }
  return (
    <details class="preview" data-testid="preview">
      <summary>
        The change to <span class="mono">{preview.file}</span> ({changed.length} line{changed.length === 1 ? '' : 's'})
      </summary>
      <pre>
        {preview.diff!.map((l, i) => (
          <div key={i} class={l.op === '+' ? 'add' : l.op === '-' ? 'del' : ''}>
            {l.op} {l.text}
          </div>
        ))}
      </pre>
      {preview.scope === 'own' && (
        <p class="muted small" data-testid="preview-others">
          {othersText(preview.otherHolders ?? 0)}
        </p>
      )}
    </details>
  );
}
