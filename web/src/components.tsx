import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError } from './api';
import { isFailed, phaseIndex, phases, renewedWord, statusWord, when, whenExact } from './words';

export function ErrorNote({ children }: { children?: ComponentChildren }) {
  if (!children) return null;
  return (
    <p class="note error" role="alert">
      {children}
    </p>
  );
}

/** Status is a request's state in words; step (when given) tells a
 * withdrawal from the other ends (statusWord). */
export function Status({ status, renewed, step }: { status: string; renewed?: boolean; step?: string }) {
  // A request whose access a later renewal carries reads as renewed, not
  // "In effect" (its own entry and expiry no longer apply).
  if (renewed) return <span class="status ended" data-testid="renewed">{renewedWord}</span>;
  // REVOKED is over, like a closed request, but nothing went wrong.
  const cls = status === 'VALIDATED' ? 'ok' : isFailed(status) ? 'bad' : status === 'REVOKED' ? 'ended' : 'busy';
  return <span class={`status ${cls}`}>{statusWord(status, step)}</span>;
}

/** Progress shows the external phase as a line of steps. */
export function Progress({ status }: { status: string }) {
  const at = phaseIndex(status);
  const failed = isFailed(status);
  return (
    <ol class="progress" aria-label="Progress">
      {phases.map((p, i) => {
        const cls = i < at || (i === at && status === 'VALIDATED') ? 'done' : i === at ? (failed ? 'failed' : 'current') : 'todo';
        return (
          <li key={p} class={cls} aria-current={i === at ? 'step' : undefined}>
            {p}
          </li>
        );
      })}
    </ol>
  );
}

/** Stamp is a time stamp with its time zone, the exact instant in the
 * title and the datetime attribute. */
export function Stamp({ iso, exact }: { iso?: string; exact?: boolean }) {
  if (!iso) return null;
  return (
    <time dateTime={iso} title={iso}>
      {exact ? whenExact(iso) : when(iso)}
    </time>
  );
}

/** Confirmed is a write behind a confirmation: the first click asks, the
 * second does it (the console's writes and a person's give back and
 * withdraw alike). A refusal stays next to the button in the server's
 * words; the answer goes to onDone, because a success usually removes the
 * button (the request is no longer stopped, the batch is settled). */
export function Confirmed({
  label,
  question,
  run,
  onDone,
  testid,
}: {
  label: string;
  question: string;
  run: () => Promise<string>;
  onDone: (message: string) => void;
  testid: string;
}) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const go = async () => {
    if (busy) return;
    setBusy(true);
    setError('');
    try {
      onDone(await run());
    } catch (e) {
      setError(e instanceof ApiError ? e.message : 'Something went wrong.');
    } finally {
      setBusy(false);
      setAsking(false);
    }
  };
  return (
    <div class="confirm" data-testid={testid}>
      {!asking ? (
        <button type="button" onClick={() => setAsking(true)} disabled={busy}>
          {label}
        </button>
      ) : (
        <span class="ask">
          {question}{' '}
          <button type="button" class="danger" onClick={go} disabled={busy}>
            Yes, {label.toLowerCase()}
          </button>{' '}
          <button type="button" class="secondary" onClick={() => setAsking(false)} disabled={busy}>
            Cancel
          </button>
        </span>
      )}
      <ErrorNote>{error}</ErrorNote>
    </div>
  );
}

export function Done({ children }: { children: string }) {
  if (!children) return null;
  return (
    <p class="note ok" role="status" data-testid="done">
      {children}
    </p>
  );
}

