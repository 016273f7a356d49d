// The "Notifications" page: which e-mails a person gets from changeflow
// (GET/PUT /api/notifications/preferences, docs/notifications.md
// "Preferences"). Each kind is one switch in words; the messages that
// access is about to end or has ended stay on unless the operator allows
// turning them off, and the page says why instead of hiding them.
import { useState } from 'preact/hooks';
import { ApiError, call } from '../api';
import type { components } from '../api.gen';
import { Done, ErrorNote } from '../components';
import { useGet } from '../hooks';

type Preference = components['schemas']['Preference'];
type Kind = components['schemas']['NotificationKind'];

/** kindWords says, in words, when a person hears of each kind. */
const kindWords: Partial<Record<Kind, string>> = {
  'request.submitted': 'I sent a request',
  'request.approved': 'my request was approved',
  'request.rejected': 'my request was rejected (with the approver’s comment)',
  'request.in_effect': 'my access is in effect',
  'request.failed': 'my request failed (with what to do)',
  'request.withdrawn': 'my request was withdrawn',
  'renewal.in_effect': 'my renewal is in effect',
  'access.expiring': 'my access is about to end (with a link to renew it)',
  'access.removed': 'my access was removed',
  'review.assigned': 'an access review waits for me',
};

export function NotificationsPage({ user }: { user: string }) {
  const r = useGet<{ preferences: Preference[] }>('/api/notifications/preferences', 0, [user]);
  // changed holds the switches moved since the last save, kind → on.
  const [changed, setChanged] = useState<Partial<Record<Kind, boolean>>>({});
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState('');
  const [error, setError] = useState('');
  const prefs = r.data?.preferences ?? [];
  const on = (p: Preference) => changed[p.kind] ?? p.enabled;
  const dirty = Object.keys(changed).length > 0;

  const save = async () => {
    setBusy(true);
    setDone('');
    setError('');
    try {
      await call('PUT', '/api/notifications/preferences', changed);
      setChanged({});
      setDone('Saved. Changeflow writes to you about what is on, and keeps quiet about the rest.');
      r.reload();
    } catch (e) {
      setError(e instanceof ApiError ? e.message : String(e));
    }
    setBusy(false);
  };

  return (
    <section data-testid="notifications">
      <h1>Notifications</h1>
      <p>
        Changeflow writes to you by e-mail when something happens to your requests, so you do not have to watch this page. Choose
        what you hear about. Messages that your access is about to end or has ended stay on: without them you would learn of it only
        when your work fails.
      </p>
      <Done>{done}</Done>
      <ErrorNote>{r.error || error}</ErrorNote>
      {r.loading && !r.data && <p>Loading…</p>}
      {prefs.length > 0 && (
        <div class="card">
          <p>E-mail me when…</p>
          <ul class="plain" data-testid="preferences">
            {prefs.map((p) => (
              <li key={p.kind} data-kind={p.kind}>
                <label>
                  <input
                    type="checkbox"
                    checked={on(p)}
                    disabled={p.locked || busy}
                    onChange={() => setChanged({ ...changed, [p.kind]: !on(p) })}
                  />{' '}
                  {kindWords[p.kind] ?? p.kind}
                  {p.locked && <span class="muted"> — always on</span>}
                </label>
              </li>
            ))}
          </ul>
          <p>
            <button type="button" disabled={!dirty || busy} onClick={save} data-testid="preferences-save">
              Save
            </button>{' '}
            <button type="button" class="secondary" disabled={!dirty || busy} onClick={() => setChanged({})}>
              Undo changes
            </button>
          </p>
        </div>
      )}
    </section>
  );
}
