// The security events in the console: GET /ops/security-events, newest
// first — content on changeflow's branches that changeflow did not write
// (docs/security.md, "Only what changeflow wrote"), with what it found and
// what it did about it.
import type { components } from '../api.gen';
import { ErrorNote, Stamp } from '../components';
import { useGet } from '../hooks';

type SecurityEventList = components['schemas']['SecurityEventListAnswer']['data'];

/** SecurityEvent is one thing changeflow found on its branches that it
 * did not write. */
export type SecurityEvent = SecurityEventList['items'][number];

const kindWords: Record<string, string> = {
  foreign_head: 'A commit changeflow did not write on its merge request',
  foreign_branch: 'A branch changeflow did not create, named as one of its own',
  foreign_mr: 'A merge request changeflow did not open, on one of its branches',
};

const didWords: Record<string, string> = {
  foreign_head:
    'Approved nothing and merged nothing: closed the merge request and went on from a fresh read on a new branch of its own.',
  foreign_branch: 'Did not build on that branch: went on from a fresh read on a new branch of its own.',
  foreign_mr:
    'Did not adopt, approve or merge that merge request and left it to its author; went on on a branch of its own.',
};

/** Subject links an event's resource: a request or a batch to its console
 * page; a merge request found by the stray sweep has no page here. */
function Subject({ resource }: { resource: string }) {
  const batch = /^batch-(\d+)$/.exec(resource);
  if (batch) return <a href={`/console/batches/${batch[1]}`}>batch #{batch[1]}</a>;
  if (/^mr-\d+$/.test(resource)) return <span class="muted">no request (found by the stray sweep)</span>;
  return (
    <a class="mono small" href={`/console/requests/${encodeURIComponent(resource)}`} data-testid="security-request">
      {resource}
    </a>
  );
}

export function SecurityEvents() {
  const r = useGet<SecurityEventList>('/ops/security-events?limit=200');
  const items = r.data?.items ?? [];
  return (
    <div data-testid="security-events">
      <p>
        Content on changeflow’s branches that changeflow did not write: someone with push rights to the configuration repository
        committed to one of its branches, prepared one before changeflow did, or opened a merge request from one. changeflow never
        approves or merges such content. Find out who did it and why, and protect <span class="mono">changeflow/*</span> so only
        the committer bot may push (see Checks).
      </p>
      <div class="row tools">
        <button type="button" class="secondary" onClick={() => r.reload()} disabled={r.loading}>
          Look again
        </button>
      </div>
      <ErrorNote>{r.error}</ErrorNote>
      {r.loading && !r.data && <p>Reading the security events…</p>}
      {r.data && items.length === 0 && (
        <p data-testid="security-none">No security event: changeflow has found nothing on its branches that it did not write.</p>
      )}
      {items.length > 0 && (
        <table class="list stack">
          <thead>
            <tr>
              <th>When</th>
              <th>What was found</th>
              <th>Request</th>
              <th>Merge request and branch</th>
              <th>Foreign commit and author</th>
              <th>What changeflow did</th>
            </tr>
          </thead>
          <tbody>
            {items.map((e) => (
              <tr key={e.id} data-kind={e.kind} data-resource={e.resource}>
                <td class="small">
                  <Stamp iso={e.at} />
                </td>
                <td>{kindWords[e.kind] ?? e.kind}</td>
                <td>
                  <Subject resource={e.resource} />
                </td>
                <td class="small">
                  {e.mrIid ? <>!{e.mrIid}</> : 'no merge request'}
                  {e.branch && (
                    <>
                      {' on '}
                      <span class="mono">{e.branch}</span>
                    </>
                  )}
                </td>
                <td class="small">
                  {e.sha && <span class="mono">{e.sha.slice(0, 12)} </span>}
                  {e.why}
                </td>
                <td class="small">{didWords[e.kind] ?? '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
