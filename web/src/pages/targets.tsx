import { useState } from 'preact/hooks';
import type { Mine, Target } from '../api';
import { Done, ErrorNote, Stamp } from '../components';
import { useGet } from '../hooks';
import { accessWords, closedWords, statusWord, when } from '../words';
import { GiveBack, renewHref } from './requests';

/** held: the access is the caller's (in effect until its removal is
 * deployed), not a request still on its way (docs/api.md, GET
 * /api/targets). */
function held(m: Mine): boolean {
  return m.status === 'VALIDATED' || m.status === 'RENEWING' || m.status === 'REVOKING' || m.status === 'REVOKE_FAILED';
}

const requestLink = (id: string) => `/requests/${encodeURIComponent(id)}`;

/** Yours is what the caller holds on the target, in words, with its end
 * and links to the requests concerned. */
function Yours({ m }: { m?: Mine }) {
  if (!m) return <span class="muted none">—</span>;
  if (!held(m)) {
    const failed = m.status === 'CREATE_FAILED' || m.status === 'HANDLE_FAILED';
    return (
      <span data-testid="yours">
        {failed ? 'Your request stopped: ' : 'Your request is on its way: '}
        {statusWord(m.status).toLowerCase()}.{' '}
        <a href={requestLink(m.operationId)} data-testid="yours-link">
          Follow it
        </a>
      </span>
    );
  }
  const until = m.expiresAt ? (
    <>
      until <Stamp iso={m.expiresAt} />
    </>
  ) : (
    'with no end date'
  );
  let words;
  if (m.expired) {
    words = (
      <>
        Your access ended on <Stamp iso={m.expiresAt} />; it is being removed.
      </>
    );
  } else if (m.status === 'REVOKING') {
    words = (
      <>
        You have access {until}; it is being removed (
        <a href={requestLink(m.revocationId ?? '')} data-testid="yours-removal">
          follow the removal
        </a>
        ).
      </>
    );
  } else if (m.status === 'REVOKE_FAILED') {
    words = <>Removing your access stopped, so you still have it, {until}; the operators see it.</>;
  } else if (m.status === 'RENEWING') {
    words = (
      <>
        You have access {until};{' '}
        <a href={requestLink(m.renewalId ?? '')} data-testid="yours-renewal">
          its renewal
        </a>{' '}
        is under way.
      </>
    );
  } else {
    words = <>You have access {until}.</>;
  }
  return (
    <span data-testid="yours">
      {words}{' '}
      <a href={requestLink(m.operationId)} class="small" data-testid="yours-link">
        Your request
      </a>
    </span>
  );
}

/** RowAction is what the row offers the caller now: Request access on an
 * open target they hold nothing on; on an access in effect Renew (once
 * its renewal window has opened, else from when) and Give back — the
 * same actions as the request's page; nothing while a request of theirs
 * is on its way (its page is linked) or a target is closed. */
function RowAction({ x, onChange }: { x: Target; onChange: () => void }) {
  const [done, setDone] = useState('');
  const m = x.mine;
  if (!m) {
    return x.open ? (
      <a class="button" href={`/request/${encodeURIComponent(x.key)}`} data-testid="request-access">
        Request access
      </a>
    ) : (
      <span class="muted">Not now</span>
    );
  }
  const inEffect = (m.status === 'VALIDATED' || m.status === 'RENEWING') && !m.expired;
  if (!inEffect) return <Done>{done}</Done>;
  const from = Date.parse(m.renewFrom ?? '');
  return (
    <div class="row-actions" data-testid="row-actions">
      <Done>{done}</Done>
      {/* Renewing is asking again: only where the target takes requests now. */}
      {x.open &&
        !Number.isNaN(from) &&
        (from <= Date.now() ? (
          <a class="button" data-testid="renew" href={renewHref(x.key, m.operationId)}>
            Renew
          </a>
        ) : (
          <span class="muted small" data-testid="renew-from">
            renew from {when(m.renewFrom)}
          </span>
        ))}
      <GiveBack
        operationId={m.operationId}
        title={x.title || x.key}
        renewing={m.status === 'RENEWING'}
        onDone={(msg) => {
          setDone(msg);
          onChange();
        }}
      />
    </div>
  );
}

export function TargetsPage({ user }: { user: string }) {
  const t = useGet<{ items: Target[] }>('/api/targets', 15000, [user]);
  return (
    <section>
      <h1>Targets</h1>
      <p class="lead">What you can ask access for, whether it can be granted right now, and what you hold.</p>
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
              <th>Yours</th>
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
                <td class="small">
                  <Yours m={x.mine} />
                </td>
                <td>
                  {/* Keyed by the caller's state: a write's answer goes
                      once the row shows the state it led to. */}
                  <RowAction key={`${x.mine?.operationId}:${x.mine?.status}`} x={x} onChange={t.reload} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
