import type { ComponentChildren } from 'preact';
import { isFailed, phaseIndex, phases, statusWord, when } from './words';

export function ErrorNote({ children }: { children?: ComponentChildren }) {
  if (!children) return null;
  return (
    <p class="note error" role="alert">
      {children}
    </p>
  );
}

export function Status({ status }: { status: string }) {
  const cls = status === 'VALIDATED' ? 'ok' : isFailed(status) ? 'bad' : 'busy';
  return <span class={`status ${cls}`}>{statusWord(status)}</span>;
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
export function Stamp({ iso }: { iso?: string }) {
  if (!iso) return null;
  return (
    <time dateTime={iso} title={iso}>
      {when(iso)}
    </time>
  );
}
