// The deployment checks in the console: GET /ops/checks, the report
// `changeflow doctor` prints — each check with its verdict, what was
// found and what to change, worst first.
import type { components } from '../api.gen';
import { ErrorNote, Stamp } from '../components';
import { useGet } from '../hooks';

/** Report is GET /ops/checks: the verdict, and each check's finding. */
type Report = components['schemas']['ChecksAnswer']['data'];

/** Finding is one check's verdict, what it found and what to change. */
export type Finding = Report['findings'][number];

const verdict: Record<string, string> = { ok: 'OK', warn: 'Warning', fail: 'Problem' };
const rank: Record<string, number> = { fail: 0, warn: 1, ok: 2 };

export function Checks() {
  const r = useGet<Report>('/ops/checks');
  const c = r.data;
  const findings = [...(c?.findings ?? [])].sort((a, b) => rank[a.status] - rank[b.status]);
  const problems = findings.filter((f) => f.status === 'fail').length;
  const warnings = findings.filter((f) => f.status === 'warn').length;
  return (
    <>
      <ErrorNote>{r.error}</ErrorNote>
      {c && (
        <>
          <p data-testid="checks-verdict">
            {problems > 0
              ? `${problems} problem(s) to fix`
              : warnings > 0
                ? `No problem, ${warnings} warning(s)`
                : 'Everything checked is as it should be'}
            , checked <Stamp iso={c.checkedAt} />. The same report as <span class="mono">changeflow doctor</span>.{' '}
            <button type="button" class="secondary small" onClick={() => r.reload()}>
              Check again
            </button>
          </p>
          <table class="list stack" data-testid="checks">
            <thead>
              <tr>
                <th>Verdict</th>
                <th>Check</th>
                <th>Found</th>
                <th>What to change</th>
              </tr>
            </thead>
            <tbody>
              {findings.map((f) => (
                <tr key={`${f.id}/${f.project ?? ''}/${f.subject ?? ''}`} data-check={f.id} data-status={f.status}>
                  <td>
                    <strong>{verdict[f.status] ?? f.status}</strong>
                  </td>
                  <td>
                    {f.title}
                    {f.project && <> (project {f.project})</>}
                  </td>
                  <td>{f.detail}</td>
                  <td>{f.fix ?? '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </>
  );
}
