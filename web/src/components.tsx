import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError } from './api';
import type { ProgressStep } from './api';
import { isFailed, progressStateWord, progressWord, renewedWord, statusWord, when, whenExact } from './words';

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

/** Progress is the step bar: the server decides each step's state from
 * the request's real history (docs/api.md, "The step bar"), so the
 * request page and the console draw the same bar and neither guesses it
 * from the status. Each step says its state in words too (its title,
 * read out by screen readers and shown on hover), not only by its
 * colour. */
export function Progress({ steps, kind }: { steps?: ProgressStep[]; kind?: string }) {
  const shown = (steps ?? []).filter((p) => progressWord(p.key, kind));
  if (shown.length === 0) return null;
  return (
    <ol class="progress" aria-label="Progress" data-testid="progress">
      {shown.map((p) => {
        const cls = p.state.toLowerCase();
        const at = p.state === 'CURRENT' || p.state === 'FAILED';
        return (
          <li
            key={p.key}
            class={cls}
            data-key={p.key}
            data-state={p.state}
            title={`${progressWord(p.key, kind)}: ${progressStateWord(p.state)}`}
            aria-current={at ? 'step' : undefined}
          >
            {progressWord(p.key, kind)}
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

