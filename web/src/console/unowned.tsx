// The console's "Expired, not ours" page: per binding file, the expired
// entries changeflow did not write, and why it leaves them to a person.
import type { components } from '../api.gen';
import { ErrorNote, Stamp } from '../components';
import { useGet } from '../hooks';

type UnownedAnswer = components['schemas']['UnownedExpiredAnswer']['data'];

/** Why an expired entry is not changeflow's, in words. */
const unownedWhy: Record<string, string> = {
  NO_OPERATION: 'no request of changeflow’s has this operationId (added by hand, or by an older release)',
  OTHER_BINDING: 'the operationId is changeflow’s, but for another person or target (copied by hand)',
};

/** Unowned lists, per binding file, the expired entries changeflow did
 * not write (GET /ops/targets/unowned-expired). Not polled: each look
 * reads every target's file from GitLab, so the operator asks again. */
export function Unowned() {
  const r = useGet<UnownedAnswer>('/ops/targets/unowned-expired');
  const d = r.data;
  const open = d?.files.filter((f) => f.problem || f.entries.length > 0) ?? [];
  const clean = d?.files.filter((f) => !f.problem && f.entries.length === 0) ?? [];
  const owned = d?.files.reduce((n, f) => n + f.ownedExpired, 0) ?? 0;
  return (
    <div data-testid="unowned">
      <p>
        Entries whose expiry has passed but that changeflow did not write. <strong>changeflow will not remove them</strong>: it
        removes only the entries its own requests wrote, whose history says what was granted, to whom and until when; an entry it did
        not write may be there for a reason it cannot know, and removing it could cut access someone relies on. They still grant
        access wherever the file is deployed, so a person decides: remove the entry by a change to the file, or ask whoever added it.
      </p>
      <div class="row tools">
        <button type="button" class="secondary" onClick={() => r.reload()} disabled={r.loading}>
          Check again
        </button>
        {d && (
          <span class="muted small">
            Read from <span class="mono">{d.ref}</span>, expiries compared with the database clock at <Stamp iso={d.checkedAt} />.
          </span>
        )}
      </div>
      <ErrorNote>{r.error}</ErrorNote>
      {r.loading && !d && <p>Reading the binding files…</p>}
      {d && open.length === 0 && <p data-testid="unowned-none">No binding file holds an expired entry that changeflow did not write.</p>}
      {open.map((f) => (
        <div class="card" key={f.targetKey} data-target={f.targetKey}>
          <h2>
            {f.title} <span class="muted mono small">{f.file}</span>
          </h2>
          {f.problem && <p class="note error">{f.problem}</p>}
          {f.entries.length > 0 && (
            <table class="list stack">
              <thead>
                <tr>
                  <th>Subject</th>
                  <th>operationId</th>
                  <th>Expired</th>
                  <th>Not changeflow’s because</th>
                </tr>
              </thead>
              <tbody>
                {f.entries.map((e) => (
                  <tr key={e.subject} data-subject={e.subject}>
                    <td class="mono">{e.subject}</td>
                    <td class="mono small">{e.operationId || '(none)'}</td>
                    <td class="small">
                      <Stamp iso={e.expiresAt} />
                    </td>
                    <td class="small">{unownedWhy[e.why] ?? e.why}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </div>
      ))}
      {d && clean.length > 0 && (
        <p class="muted small" data-testid="unowned-clean">
          Nothing to decide in: {clean.map((f) => f.title).join(', ')}.
        </p>
      )}
      {owned > 0 && (
        <p class="muted small" data-testid="unowned-owned">
          {owned} expired entr{owned === 1 ? 'y' : 'ies'} of changeflow’s own requests: the expiry scan removes {owned === 1 ? 'it' : 'them'}.
        </p>
      )}
    </div>
  );
}
