// The "Reviews" page: an owner's open access-review items (GET
// /api/reviews, docs/reviews.md), each kept or revoked with a comment, one
// at a time or several at once. A revoke removes the access the ordinary
// way (merged and deployed), so the page says so before it is sent.
import { useState } from 'preact/hooks';
import { ApiError, call } from '../api';
import type { components } from '../api.gen';
import { Done, ErrorNote, Stamp } from '../components';
import { useGet } from '../hooks';

type Item = components['schemas']['ReviewItem'];
type Decision = components['schemas']['ReviewDecision'];

/** sourceWords says who wrote the entry under review. */
const sourceWords: Record<string, string> = {
  changeflow: 'granted through changeflow',
  repo: 'added to the file by hand (not through changeflow)',
};

/** key names an item across campaigns. */
const key = (i: Item) => `${i.reviewId}/${i.id}`;

export function ReviewsPage({ user }: { user: string }) {
  const r = useGet<{ items: Item[] }>('/api/reviews', 0, [user]);
  const [picked, setPicked] = useState<Set<string>>(new Set());
  const [comment, setComment] = useState('');
  const [asking, setAsking] = useState<Decision | null>(null);
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState('');
  const [problems, setProblems] = useState<string[]>([]);
  const items = r.data?.items ?? [];

  const toggle = (k: string) => {
    const next = new Set(picked);
    if (next.has(k)) next.delete(k);
    else next.add(k);
    setPicked(next);
    setAsking(null);
  };

  // decide sends one decision per picked item, in order, and says what
  // became of each: a refusal (decided meanwhile, the campaign closed)
  // stays next to the list in the server's words; the rest are done.
  const decide = async (decision: Decision) => {
    setBusy(true);
    setDone('');
    const failed: string[] = [];
    let ok = 0;
    for (const i of items.filter((x) => picked.has(key(x)))) {
      try {
        await call('POST', `/api/reviews/${i.reviewId}/items/${i.id}`, { decision, comment: comment.trim() });
        ok++;
      } catch (e) {
        failed.push(`${i.subject} (${i.targetKey}): ${e instanceof ApiError ? e.message : String(e)}`);
      }
    }
    setBusy(false);
    setAsking(null);
    setPicked(new Set());
    setProblems(failed);
    if (ok > 0) {
      setDone(
        decision === 'keep'
          ? `Kept ${ok} entr${ok === 1 ? 'y' : 'ies'}.`
          : `Revoked ${ok} entr${ok === 1 ? 'y' : 'ies'}: each is being removed from the access file and ends once the removal is deployed.`,
      );
    }
    r.reload();
  };

  const n = picked.size;
  return (
    <section data-testid="reviews">
      <h1>Reviews</h1>
      <p>
        As an owner of a target you confirm, now and then, who still needs its access. <strong>Keep</strong> an entry that is still
        needed; <strong>revoke</strong> one that is not — it is removed from the access file the usual way and ends once that is
        deployed. Your own access is never yours to review: another owner or an operator decides it. What you leave undecided takes the
        campaign’s default on its due date.
      </p>
      <Done>{done}</Done>
      <ErrorNote>{r.error}</ErrorNote>
      {problems.length > 0 && (
        <div class="note error" data-testid="review-problems">
          Not decided:
          <ul>
            {problems.map((p) => (
              <li key={p}>{p}</li>
            ))}
          </ul>
        </div>
      )}
      {r.loading && !r.data && <p>Loading…</p>}
      {r.data && items.length === 0 && <p data-testid="reviews-none">Nothing waits for your review.</p>}
      {items.length > 0 && (
        <>
          <table class="list stack" data-testid="review-items">
            <thead>
              <tr>
                <th>
                  <input
                    type="checkbox"
                    aria-label="Pick every entry"
                    checked={n === items.length}
                    onChange={() => setPicked(n === items.length ? new Set() : new Set(items.map(key)))}
                  />
                </th>
                <th>Person</th>
                <th>Target</th>
                <th>Has had access since</th>
                <th>Until</th>
                <th>How</th>
                <th>Decide by</th>
              </tr>
            </thead>
            <tbody>
              {items.map((i) => (
                <tr key={key(i)} data-subject={i.subject} data-review={i.reviewId}>
                  <td>
                    <input type="checkbox" aria-label={`Pick ${i.subject}`} checked={picked.has(key(i))} onChange={() => toggle(key(i))} />
                  </td>
                  <td class="mono">{i.subject}</td>
                  <td class="mono small">{i.targetKey}</td>
                  <td class="small">{i.from ? <Stamp iso={i.from} exact /> : 'not known'}</td>
                  <td class="small">{i.expiresAt ? <Stamp iso={i.expiresAt} exact /> : 'no end date'}</td>
                  <td class="small">
                    {sourceWords[i.source] ?? i.source}
                    {i.approvalId ? <span class="muted"> (approval {i.approvalId})</span> : null}
                  </td>
                  <td class="small">
                    <Stamp iso={i.dueAt} exact />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          <div class="card" data-testid="review-decide">
            <label>
              Comment (kept with the decision; a revoke’s goes into the removal’s reason)
              <input name="comment" maxLength={500} value={comment} onInput={(e) => setComment((e.target as HTMLInputElement).value)} />
            </label>
            {asking ? (
              <p>
                {asking === 'keep'
                  ? `Keep ${n} entr${n === 1 ? 'y' : 'ies'}?`
                  : `Revoke ${n} entr${n === 1 ? 'y' : 'ies'}? The access is removed from the file and ends once that is deployed.`}{' '}
                <button type="button" disabled={busy} onClick={() => decide(asking)}>
                  Yes, {asking}
                </button>{' '}
                <button type="button" class="secondary" disabled={busy} onClick={() => setAsking(null)}>
                  Cancel
                </button>
              </p>
            ) : (
              <p>
                <button type="button" disabled={n === 0} onClick={() => setAsking('keep')} data-testid="review-keep">
                  Keep {n || ''} picked
                </button>{' '}
                <button type="button" class="danger" disabled={n === 0} onClick={() => setAsking('revoke')} data-testid="review-revoke">
                  Revoke {n || ''} picked
                </button>
              </p>
            )}
          </div>
        </>
      )}
    </section>
  );
}
