import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, call, type Target } from '../api';
import { ErrorNote } from '../components';
import { useGet } from '../hooks';

function newOperationId(): string {
  if (typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

/** Preview is GET /api/targets/{key}/preview; {} when none can be made.
 * The server shows a person only their own entry (scope "own") and how many
 * other people hold the target; the whole file is for operators. */
interface Preview {
  file?: string;
  scope?: string;
  otherHolders?: number;
  diff?: { op: string; text: string }[];
}

type Outcome =
  | { kind: 'idle' }
  | { kind: 'sent'; operationId: string; duplicate: boolean }
  | { kind: 'limited'; message: string; until: number }
  | { kind: 'error'; message: string; code: string };

/** SubmitPage wraps one form instance; "Start a new request" remounts it,
 * which is the only way to get a new operationId. */
export function SubmitPage({ targetKey }: { targetKey: string }) {
  const [instance, setInstance] = useState(0);
  return <SubmitForm key={instance} targetKey={targetKey} onNew={() => setInstance((i) => i + 1)} />;
}

function SubmitForm({ targetKey, onNew }: { targetKey: string; onNew: () => void }) {
  // One operationId per form instance, sent as Idempotency-Key on every
  // attempt: a retry after a lost answer is the same request to the server.
  const [operationId] = useState(newOperationId);
  const [reason, setReason] = useState('');
  const [days, setDays] = useState('');
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome>({ kind: 'idle' });
  const [now, setNow] = useState(Date.now());
  // The ref closes the gap between a click and the re-render that disables
  // the button: a double click must send one request.
  const inFlight = useRef(false);
  const targets = useGet<{ items: Target[] }>('/api/targets');
  const daysParam = /^\d+$/.test(days.trim()) ? `?days=${days.trim()}` : '';
  const preview = useGet<Preview>(`/api/targets/${encodeURIComponent(targetKey)}/preview${daysParam}`);
  const target = targets.data?.items.find((t) => t.key === targetKey);

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
    inFlight.current = true;
    setBusy(true);
    try {
      const body: Record<string, unknown> = { targetKey, reason: reason.trim() };
      if (days.trim()) body.days = Number(days);
      const r = await call<{ operationId: string }>('POST', '/api/requests', body, { 'Idempotency-Key': operationId });
      setOutcome({ kind: 'sent', operationId: r.data?.operationId ?? operationId, duplicate: r.code === 'DUPLICATE_SUBMIT' });
    } catch (err) {
      if (err instanceof ApiError && err.code === 'RATE_LIMITED') {
        const secs = err.retryAfter ?? 60;
        setNow(Date.now());
        setOutcome({ kind: 'limited', message: err.message, until: Date.now() + secs * 1000 });
      } else if (err instanceof ApiError) {
        setOutcome({ kind: 'error', message: err.message, code: err.code });
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
      <h1>Request access</h1>
      <p class="lead">
        to <strong>{target?.title ?? targetKey}</strong> <span class="muted mono">({targetKey})</span>
      </p>
      <form class="card" onSubmit={submit} data-operation-id={operationId}>
        <label>
          Reason
          <textarea
            name="reason"
            required
            maxLength={500}
            rows={3}
            value={reason}
            disabled={locked || busy}
            onInput={(e) => setReason((e.target as HTMLTextAreaElement).value)}
            placeholder="What you need it for, e.g. the quarterly audit"
          />
        </label>
        <label>
          <span>
            Days <span class="muted hint">(leave empty for the target's maximum)</span>
          </span>
          <input
            name="days"
            type="number"
            min={1}
            inputMode="numeric"
            value={days}
            disabled={locked || busy}
            onInput={(e) => setDays((e.target as HTMLInputElement).value)}
          />
        </label>
        <div class="row">
          <button type="submit" disabled={busy || locked || waitSeconds > 0}>
            {busy ? 'Submitting…' : locked ? 'Submitted' : 'Submit request'}
          </button>
          <span class="muted mono small">operation {operationId}</span>
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
      {outcome.kind === 'error' && (
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
