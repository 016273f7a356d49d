// The deploy-callback inbox in the console: what became of every deploy
// callback ("in effect" reports from the deployment pipeline). Only MRs
// changeflow itself merged count, so a callback for any other MR is shown
// here with why it changed nothing — the listing is the only place a
// callback for an MR no request has (UNKNOWN_MR) appears.
import type { components } from '../api.gen';
import { ErrorNote } from '../components';
import { useGet } from '../hooks';
import { when } from '../words';

type Schemas = components['schemas'];

/** DeployCallback is one deploy callback received for an MR, and what
 * became of it (RECORDED until the workflow classified it). */
export type DeployCallback = Schemas['DeployCallbackRecord'];

/** A deploy callback's disposition in words an operator reads without the docs. */
const deployWords: Record<string, string> = {
  RECORDED: 'recorded, not classified yet',
  APPLIED: 'applied: the requests are in effect',
  DUPLICATE: 'duplicate: already in effect',
  EARLY: 'early: applied once the merge is written',
  NOT_MERGED: 'ignored: changeflow has not merged this MR',
  UNKNOWN_MR: 'ignored: no request has this MR',
  IGNORED: 'ignored: not a successful deployment',
};

export function deployWhatBecameOf(c: DeployCallback): string {
  const parts = [deployWords[c.disposition] ?? c.disposition];
  if (c.reason) parts.push(`(${c.reason})`);
  if (c.duplicates && c.duplicates > 0) parts.push(`· delivered again ${c.duplicates}×`);
  return parts.join(' ');
}

/** DeployTable lists deploy callbacks, newest first. */
export function DeployTable({ items, testid }: { items: DeployCallback[]; testid: string }) {
  return (
    <table class="list" data-testid={testid}>
      <thead>
        <tr>
          <th>Received</th>
          <th>MR</th>
          <th>Status</th>
          <th>What became of it</th>
          <th>Delivery</th>
        </tr>
      </thead>
      <tbody>
        {items.map((c) => (
          <tr key={c.id} data-deploy={c.id} data-disposition={c.disposition}>
            <td class="small">{when(c.receivedAt)}</td>
            <td class="mono small">
              {c.projectId}!{c.mrIid}
            </td>
            <td class="mono small">{c.status}</td>
            <td class="small" data-testid="deploy-disposition">
              {deployWhatBecameOf(c)}
            </td>
            <td class="mono small">{c.deliveryKey || '—'}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** DeployInbox is the console page of every recorded deploy callback. */
export function DeployInbox() {
  const r = useGet<Schemas['DeployCallbackListAnswer']['data']>('/ops/callbacks/deploy?limit=100', 5000);
  return (
    <>
      <p class="muted small">
        Deploy callbacks count only for MRs changeflow merged itself; anything else is kept here with why it changed nothing.
      </p>
      <ErrorNote>{r.error}</ErrorNote>
      {r.data && r.data.items.length === 0 && <p class="muted">No deploy callbacks yet.</p>}
      {r.data && r.data.items.length > 0 && <DeployTable items={r.data.items} testid="deploy-inbox-all" />}
    </>
  );
}
