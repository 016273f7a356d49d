import type { Target } from '../api';
import { ErrorNote } from '../components';
import { useGet } from '../hooks';
import { accessWords, closedWords } from '../words';

export function TargetsPage({ user }: { user: string }) {
  const t = useGet<{ items: Target[] }>('/api/targets', 15000, [user]);
  return (
    <section>
      <h1>Targets</h1>
      <p class="lead">What you can ask access for, and whether it can be granted right now.</p>
      <ErrorNote>{t.error}</ErrorNote>
      {t.loading && !t.data && <p>Loading…</p>}
      {t.data && (
        <table class="list stack" data-testid="targets">
          <thead>
            <tr>
              <th>Target</th>
              <th>Access</th>
              <th>Why</th>
              <th>At most</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {t.data.items.map((x) => (
              <tr key={x.key} data-target={x.key}>
                <td>
                  <strong>{x.title || x.key}</strong>
                  <div class="muted mono">{x.key}</div>
                </td>
                <td>
                  <span class={`access ${x.open ? 'open' : 'closed'}`}>{accessWords(x.accessMode, x.open)}</span>
                </td>
                <td class="muted">{x.open ? 'Requests are accepted now.' : closedWords(x.accessMode, x.why)}</td>
                <td class="muted">
                  up to {x.maxDays} day{x.maxDays === 1 ? '' : 's'}
                </td>
                <td>
                  {x.open ? (
                    <a class="button" href={`/request/${encodeURIComponent(x.key)}`}>
                      Request access
                    </a>
                  ) : (
                    <span class="muted">Not now</span>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
