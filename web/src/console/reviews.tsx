// The console's access reviews (docs/reviews.md): every campaign, newest
// first (GET /ops/reviews), and one campaign's report (GET
// /ops/reviews/{id}): each entry, its decision, who made it and when, the
// comment, and whether a revoke's removal is in effect — downloadable as
// CSV for the auditor.
import { useState } from 'preact/hooks';
import { download } from '../api';
import type { components } from '../api.gen';
import { ErrorNote, Stamp } from '../components';
import { useGet } from '../hooks';
import { opsLink } from './shared';

type Campaign = components['schemas']['ReviewCampaign'];
type Report = components['schemas']['ReviewReport'];
type Item = components['schemas']['ReviewItem'];

/** reviewLink is a campaign's report page. */
export function reviewLink(id: number): string {
  return `/console/reviews/${id}`;
}

/** defaultWords says what an undecided entry becomes at the due date. */
function defaultWords(c: Campaign | Report): string {
  return c.keepByDefault
    ? 'undecided entries are kept (flagged: revoke is the safer default)'
    : 'undecided entries are revoked';
}

export function Reviews() {
  const r = useGet<{ reviews: Campaign[] }>('/ops/reviews', 15000);
  const list = r.data?.reviews ?? [];
  return (
    <div data-testid="console-reviews">
      <p>
        Access reviews: the owners of a target confirm or remove each access in effect when the campaign opened; at the due date what
        is undecided takes the campaign’s default. A revoke is removed the ordinary way (merged, deployed, confirmed).
      </p>
      <ErrorNote>{r.error}</ErrorNote>
      {r.loading && !r.data && <p>Loading…</p>}
      {r.data && list.length === 0 && <p data-testid="console-reviews-none">No access review has been opened.</p>}
      {list.length > 0 && (
        <table class="list stack">
          <thead>
            <tr>
              <th>Campaign</th>
              <th>Target</th>
              <th>Opened</th>
              <th>Due</th>
              <th>Decided</th>
              <th>Status</th>
            </tr>
          </thead>
          <tbody>
            {list.map((c) => (
              <tr key={c.id} data-review={c.id}>
                <td>
                  <a href={reviewLink(c.id)}>#{c.id}</a>
                </td>
                <td class="mono small">{c.targetKey}</td>
                <td class="small">
                  <Stamp iso={c.openedAt} exact /> by <span class="mono">{c.openedBy}</span>
                </td>
                <td class="small">
                  <Stamp iso={c.dueAt} exact />
                </td>
                <td>
                  {c.decided} of {c.items}
                </td>
                <td>{c.status === 'open' ? 'open' : 'closed'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

/** decisionWords is an item's decision in words. */
function decisionWords(i: Item): string {
  if (!i.decision) return 'not decided yet';
  const what = i.decision === 'keep' ? 'kept' : 'revoked';
  return i.byDefault ? `${what} by the campaign’s default` : what;
}

/** removalWords says where a revoke's removal stands. */
function removalWords(i: Item): string {
  if (i.decision !== 'revoke') return '';
  if (i.removalInEffect) return 'removed: in effect';
  if (i.revokeNote) return i.revokeNote;
  return i.revocationId ? 'removal under way' : 'removal not started yet';
}

export function ReviewReport({ id }: { id: string }) {
  const r = useGet<Report>(`/ops/reviews/${encodeURIComponent(id)}`, 5000);
  const [csvError, setCsvError] = useState('');
  const c = r.data;
  return (
    <div data-testid="review-report">
      <ErrorNote>{r.error}</ErrorNote>
      {r.loading && !c && <p>Loading…</p>}
      {c && (
        <>
          <div class="card">
            <h2>
              Access review #{c.id} of <span class="mono">{c.targetKey}</span>
            </h2>
            <p>
              Opened <Stamp iso={c.openedAt} exact /> by <span class="mono">{c.openedBy}</span>
              {c.scheduled ? ' (on its schedule)' : ''}, due <Stamp iso={c.dueAt} exact />; {defaultWords(c)}.{' '}
              {c.status === 'open' ? (
                <>
                  {c.decided} of {c.items} decided.
                </>
              ) : (
                <>
                  Closed <Stamp iso={c.closedAt} exact />.
                </>
              )}
            </p>
            <p>
              <button
                type="button"
                class="secondary"
                data-testid="review-csv"
                onClick={() => download(`/ops/reviews/${c.id}?format=csv`, `access-review-${c.id}.csv`).then(() => setCsvError(''), (e) => setCsvError(String(e.message ?? e)))}
              >
                Download the report (CSV)
              </button>
            </p>
            <ErrorNote>{csvError}</ErrorNote>
          </div>
          <table class="list stack" data-testid="review-entries">
            <thead>
              <tr>
                <th>Person</th>
                <th>Access since</th>
                <th>Decision</th>
                <th>By, when</th>
                <th>Comment</th>
                <th>Removal</th>
              </tr>
            </thead>
            <tbody>
              {c.entries.map((i) => (
                <tr key={i.id} data-subject={i.subject} data-decision={i.decision ?? ''}>
                  <td class="mono">
                    {i.grantOperationId ? <a href={opsLink(i.grantOperationId)}>{i.subject}</a> : i.subject}
                  </td>
                  <td class="small">{i.from ? <Stamp iso={i.from} exact /> : 'not known'}</td>
                  <td>{decisionWords(i)}</td>
                  <td class="small">
                    {i.decidedBy ? <span class="mono">{i.decidedBy}</span> : null} {i.decidedAt ? <Stamp iso={i.decidedAt} exact /> : null}
                  </td>
                  <td class="small">{i.comment ?? ''}</td>
                  <td class="small">
                    {i.revocationId ? <a href={opsLink(i.revocationId)}>{removalWords(i)}</a> : removalWords(i)}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </div>
  );
}
