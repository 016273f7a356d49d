// The notification outbox in the console: GET /ops/notifications — how
// many messages wait and for how long, the ones that ran out of attempts
// (dead letters) with what went wrong and Deliver again, and the
// destinations that said they are gone with Turn back on
// (docs/notifications.md, "For operators").
import { useState } from 'preact/hooks';
import { call } from '../api';
import type { components } from '../api.gen';
import { Confirmed, Done, ErrorNote, Stamp } from '../components';
import { useGet } from '../hooks';

type Schemas = components['schemas'];
type Outbox = Schemas['NotificationsAnswer']['data'];

/** waited is an age in seconds, in words. */
function waited(s: number): string {
  if (s < 1) return 'nothing waits';
  if (s < 90) return `${Math.round(s)} seconds`;
  if (s < 5400) return `${Math.round(s / 60)} minutes`;
  return `${Math.round(s / 3600)} hours`;
}

export function Notifications() {
  const r = useGet<Outbox>('/ops/notifications?limit=100', 5000);
  const [done, setDone] = useState('');
  const d = r.data;
  return (
    <div data-testid="notifications">
      <p>
        People and systems hear from changeflow through these messages: e-mail, webhooks and chat. A message that could not be
        delivered is tried again with growing pauses; after the last attempt it waits here for you. Deliver it again once the
        destination is back: destinations that already took it do not get it twice.
      </p>
      <Done>{done}</Done>
      <div class="row tools">
        <button type="button" class="secondary" onClick={() => r.reload()} disabled={r.loading}>
          Look again
        </button>
      </div>
      <ErrorNote>{r.error}</ErrorNote>
      {r.loading && !d && <p>Reading the messages…</p>}
      {d && (
        <p data-testid="outbox-depth">
          {d.pending === 0
            ? 'Every message has been delivered.'
            : `${d.pending} message(s) wait to be delivered; the oldest for ${waited(d.oldestPendingSeconds)}.`}{' '}
          {d.dead === 0 ? 'None ran out of attempts.' : `${d.dead} ran out of attempts.`}
        </p>
      )}
      {d && d.disabledChannels.length > 0 && (
        <>
          <h2>Destinations turned off</h2>
          <p>These said they are gone (HTTP 410): changeflow sends them nothing until you turn them back on.</p>
          <table class="list stack" data-testid="disabled-channels">
            <thead>
              <tr>
                <th>Destination</th>
                <th>Since</th>
                <th>What it said</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              {d.disabledChannels.map((c) => (
                <tr key={c.channel} data-channel={c.channel}>
                  <td class="mono">{c.channel}</td>
                  <td class="small">
                    <Stamp iso={c.disabledAt} />
                  </td>
                  <td class="small">{c.reason}</td>
                  <td>
                    <Confirmed
                      testid={`enable-${c.channel}`}
                      label="Turn back on"
                      question={`Send ${c.channel} the messages written from now on?`}
                      onDone={setDone}
                      run={async () => {
                        await call<Schemas['NotificationChannelAnswer']['data']>(
                          'POST',
                          `/ops/notifications/channels/${encodeURIComponent(c.channel)}/enable`,
                          {},
                        );
                        r.reload();
                        return `${c.channel} is on again.`;
                      }}
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      {d && d.deadLetters.length > 0 && (
        <>
          <h2>Ran out of attempts</h2>
          <table class="list stack" data-testid="dead-letters">
            <thead>
              <tr>
                <th>Written</th>
                <th>Message</th>
                <th>Request</th>
                <th>What went wrong</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              {d.deadLetters.map((e) => (
                <tr key={e.eventId} data-event={e.eventId}>
                  <td class="small">
                    <Stamp iso={e.createdAt} />
                  </td>
                  <td>{e.summary}</td>
                  <td>
                    {e.operationId ? (
                      <a class="mono small" href={`/console/requests/${encodeURIComponent(e.operationId)}`}>
                        {e.operationId}
                      </a>
                    ) : (
                      '—'
                    )}
                  </td>
                  <td class="small">
                    {e.attempts} attempt(s): {e.lastError}
                  </td>
                  <td>
                    <Confirmed
                      testid={`replay-${e.eventId}`}
                      label="Deliver again"
                      question="Deliver this message again to the destinations that have not taken it?"
                      onDone={setDone}
                      run={async () => {
                        await call<Schemas['NotificationReplayAnswer']['data']>(
                          'POST',
                          `/ops/notifications/${encodeURIComponent(e.eventId)}/replay`,
                          {},
                        );
                        r.reload();
                        return 'The message is on its way again.';
                      }}
                    />
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
