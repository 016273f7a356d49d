// The two cards on a console request page that write: revoke an access in
// effect, close a stopped request. Each takes the operator's reason
// (required; it goes into the audit) and asks before it sends.
import { useState } from 'preact/hooks';
import { call } from '../api';
import type { components } from '../api.gen';
import { Confirmed } from '../components';

/** RevokeCard revokes someone's access in effect, with the reason the
 * operator gives (required; it goes into the removal MR's description and
 * the audit). The server checks the reason; its words stay beside the
 * button. */
export function RevokeCard({ id, subject, onDone, reload }: { id: string; subject: string; onDone: (m: string) => void; reload: () => void }) {
  const [reason, setReason] = useState('');
  return (
    <div class="card actions" data-testid="ops-revoke-card">
      <p>
        This access is in effect. To end it before its expiry, revoke it with a reason: its entry is removed from the access file by a
        merge request like the one that granted it, with no approval.
      </p>
      <div class="row">
        <input
          name="revoke-reason"
          class="lookup"
          placeholder="why the access is revoked"
          aria-label="Reason for revoking"
          value={reason}
          onInput={(e) => setReason((e.target as HTMLInputElement).value)}
        />
      </div>
      <Confirmed
        testid="ops-revoke"
        label="Revoke access"
        question={`Revoke ${subject}'s access now? It ends once the removal is deployed.`}
        onDone={onDone}
        run={async () => {
          const res = await call<components['schemas']['RevokeData']>('POST', `/ops/requests/${encodeURIComponent(id)}/revoke`, { reason });
          reload();
          return res.data.created
            ? `Revoked: ${res.data.revocationId} removes the entry; the access ends once that is deployed.`
            : `It was already being removed (${res.data.revocationId}); nothing was sent twice.`;
        }}
      />
    </div>
  );
}

/** CloseCard gives up on a stopped request, with the reason the operator
 * gives (required; it goes into the request's step history and the
 * audit): its MR is closed and the request ends closed, or follows its
 * merge when a person merged the MR meanwhile. */
export function CloseCard({ id, subject, onDone, reload }: { id: string; subject: string; onDone: (m: string) => void; reload: () => void }) {
  const [reason, setReason] = useState('');
  return (
    <div class="card actions" data-testid="ops-close-card">
      <p>
        Or give up on it: close it with a reason. Its merge request is closed and the request ends closed; {subject} can ask again at once.
        If someone merged the merge request meanwhile, the request follows its merge instead.
      </p>
      <div class="row">
        <input
          name="close-reason"
          class="lookup"
          placeholder="why the request is closed"
          aria-label="Reason for closing"
          value={reason}
          onInput={(e) => setReason((e.target as HTMLInputElement).value)}
        />
      </div>
      <Confirmed
        testid="ops-close"
        label="Close request"
        question={`Close ${subject}'s request now? Its merge request is closed and nothing of it takes effect.`}
        onDone={onDone}
        run={async () => {
          const res = await call<components['schemas']['WithdrawAnswer']['data']>('POST', `/ops/requests/${encodeURIComponent(id)}/close`, { reason });
          reload();
          return res.code === 'ACCEPTED'
            ? 'Closed: its merge request is being closed.'
            : res.data.status === 'CLOSED'
              ? 'Closed: its merge request is closed and nothing of it takes effect.'
              : `It had already ended: ${res.data.status}.`;
        }}
      />
    </div>
  );
}
