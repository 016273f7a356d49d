// The console's Requests page: GET /ops/requests — every request, newest
// first, filtered by person, target and state, or only what waits on a
// person ("Needs attention"), a page at a time; each row links to the
// request's console page. The filters live in the address (?subject=…),
// so a view can be shared and the back button walks them; a person's name
// in a row opens what that person has in effect now.
import { useEffect, useState } from 'preact/hooks';
import type { components } from '../api.gen';
import { ErrorNote, Stamp, Status } from '../components';
import { useGet } from '../hooks';
import { navigate, useSearch } from '../router';
import { statusWord } from '../words';

/** FoundPage is one page of GET /ops/requests. */
type FoundPage = components['schemas']['OpsFindAnswer']['data'];

/** The states a request can hold, in the order a request goes through them. */
const states = [
  'APPROVAL_SENDING',
  'APPROVAL_SENT',
  'MR_CREATING',
  'MR_CREATED',
  'MERGING',
  'MERGED',
  'VALIDATED',
  'RENEWING',
  'CREATE_FAILED',
  'HANDLE_FAILED',
  'REJECTED',
  'CLOSED',
  'REVOKING',
  'REVOKED',
  'REVOKE_FAILED',
];

const kindWords: Record<string, string> = { GRANT: 'access', REVOKE: 'removal', RENEW: 'renewal' };

/** findLink is the Requests page with these filters. */
export function findLink(f: { subject?: string; target?: string; status?: string; attention?: boolean }): string {
  const q = new URLSearchParams();
  if (f.subject) q.set('subject', f.subject);
  if (f.target) q.set('target', f.target);
  if (f.status) q.set('status', f.status);
  if (f.attention) q.set('attention', 'true');
  const s = q.toString();
  return '/console/find' + (s ? `?${s}` : '');
}

export function Find() {
  const q = useSearch();
  const subject = q.get('subject') ?? '';
  const target = q.get('target') ?? '';
  const status = q.get('status') ?? '';
  const attention = q.get('attention') === 'true';
  const filterKey = q.toString();
  // The cursors of the pages before this one, to walk back.
  const [cursors, setCursors] = useState<string[]>(['']);
  useEffect(() => setCursors(['']), [filterKey]);
  const cursor = cursors[cursors.length - 1];
  const api = new URLSearchParams(q);
  // 50 a page unless the address asks for another size.
  if (!api.has('limit')) api.set('limit', '50');
  if (cursor) api.set('cursor', cursor);
  const r = useGet<FoundPage>(`/ops/requests?${api.toString()}`);
  const [draft, setDraft] = useState({ subject, target, status });
  useEffect(() => setDraft({ subject, target, status }), [filterKey]);
  const page = r.data;
  return (
    <>
      <nav class="tabs" aria-label="Views">
        <a href={findLink({})} class={!attention ? 'active' : ''}>
          All requests
        </a>
        <a href={findLink({ subject, target, attention: true })} class={attention ? 'active' : ''} data-testid="attention-view">
          Needs attention
        </a>
      </nav>
      <form
        class="row"
        data-testid="find-filters"
        onSubmit={(e) => {
          e.preventDefault();
          navigate(findLink({ subject: draft.subject.trim(), target: draft.target.trim(), status: draft.status, attention }));
        }}
      >
        <input
          name="subject"
          placeholder="Person, e.g. bob"
          aria-label="Person"
          value={draft.subject}
          onInput={(e) => setDraft({ ...draft, subject: (e.target as HTMLInputElement).value })}
        />
        <input
          name="target"
          placeholder="Target key"
          aria-label="Target"
          value={draft.target}
          onInput={(e) => setDraft({ ...draft, target: (e.target as HTMLInputElement).value })}
        />
        <select
          name="status"
          aria-label="State"
          class="fit"
          value={draft.status}
          onChange={(e) => setDraft({ ...draft, status: (e.target as HTMLSelectElement).value })}
        >
          <option value="">Any state</option>
          {states.map((s) => (
            <option key={s} value={s}>
              {statusWord(s)} ({s})
            </option>
          ))}
        </select>
        <button type="submit">Find</button>
      </form>
      <p class="muted" data-testid="find-summary">
        {attention ? 'What waits on a person' : 'Every request'}
        {subject && <> of {subject}</>}
        {target && <> on {target}</>}
        {status && <>, {statusWord(status).toLowerCase()} now</>}, newest first.
        {attention &&
          ' A request stopped on a failure or an unknown outcome, a failed removal, a member of a blocked batch, or one at a step for more than twice its bound.'}
      </p>
      <ErrorNote>{r.error}</ErrorNote>
      {page && page.items.length === 0 && <p data-testid="find-empty">{attention ? 'Nothing waits on a person.' : 'No request matches.'}</p>}
      {page && page.items.length > 0 && (
        <table class="list stack" data-testid="find-results">
          <thead>
            <tr>
              <th>Request</th>
              <th>Person</th>
              <th>Target</th>
              <th>State</th>
              <th>Asked</th>
              <th>Ends</th>
              {attention && <th>Why it needs a person</th>}
            </tr>
          </thead>
          <tbody>
            {page.items.map((x) => (
              <tr key={x.operationId} data-operation={x.operationId}>
                <td>
                  <a href={`/console/requests/${encodeURIComponent(x.operationId)}`} class="mono" data-testid="find-request">
                    {x.operationId}
                  </a>{' '}
                  <span class="muted">
                    {kindWords[x.kind] ?? x.kind}, {x.flow === 'APPROVE_FIRST' ? 'approve-first' : 'legacy'}
                  </span>
                </td>
                <td>
                  <a
                    href={findLink({ subject: x.subject, status: 'VALIDATED' })}
                    title={`What ${x.subject} has in effect now`}
                    data-testid="find-person"
                  >
                    {x.subject}
                  </a>
                </td>
                <td>
                  <a href={findLink({ target: x.targetKey })} title={`Every request on ${x.targetKey}`}>
                    {x.targetTitle ?? x.targetKey}
                  </a>
                </td>
                <td>
                  <Status status={x.status} /> <span class="mono muted">{x.status}</span>
                  <br />
                  <span class="mono muted">
                    {x.step.name} ({x.step.code})
                  </span>
                </td>
                <td>
                  <Stamp iso={x.createdAt} />
                </td>
                <td>{x.expiresAt ? <Stamp iso={x.expiresAt} /> : '—'}</td>
                {attention && <td data-testid="find-why">{x.attention}</td>}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <p class="row">
        {cursors.length > 1 && (
          <button type="button" class="secondary small" data-testid="find-newer" onClick={() => setCursors(cursors.slice(0, -1))}>
            Newer
          </button>
        )}
        {page?.nextCursor && (
          <button
            type="button"
            class="secondary small"
            data-testid="find-older"
            onClick={() => setCursors([...cursors, page.nextCursor])}
          >
            Older
          </button>
        )}
      </p>
    </>
  );
}
