// Words for users, codes for operators: the one table of what the API's
// states mean in plain words (docs/webapp.md, "Words for users"). People
// asking for access never see a raw code (APPROVAL_SENT, CALLED_BACK); the
// console shows the codes beside these words for operators.
//
// statusWords and stepWords must name every binding state and every step
// the API can return: internal/web's TestWordsCoverEveryState compares
// their keys with the domain's lists, and the browser tests render every
// (step, state) pair of web/tests/testdata/states.json (generated from
// the domain), so a new state without words fails a test.

/** statusWords: the binding state, the coarse phase a person sees. */
const statusWords: Record<string, string> = {
  APPROVAL_SENDING: 'Sending for approval',
  APPROVAL_SENT: 'Waiting for approval',
  MR_CREATING: 'Preparing the change',
  MR_CREATED: 'Change proposed, checks running',
  MERGING: 'Merging the change',
  MERGED: 'Merged, waiting for deployment',
  VALIDATED: 'In effect',
  CREATE_FAILED: 'The change could not be prepared',
  HANDLE_FAILED: 'Stopped while applying the change',
  REJECTED: 'Rejected',
  CLOSED: 'Closed',
  REVOKING: 'Access being removed',
  REVOKED: 'Access removed; you can ask again',
  REVOKE_FAILED: 'Removing the access stopped; it is still granted',
  RENEWING: 'In effect; a renewal is under way',
};

/** stepWords: the exact step, as "what is happening now". */
const stepWords: Record<string, string> = {
  NONE: 'Not started yet',
  CREATE_STARTED: 'Preparing the change to the access file',
  CREATE_SUCCEEDED: 'The change is proposed and its checks passed',
  CREATE_FAILED: 'Preparing the change failed',
  CREATE_PIPELINE_FAILED: 'The checks on the proposed change failed',
  CREATE_BRANCH_CREATED: 'Preparing the change to the access file',
  CREATE_COMMITTED: 'Preparing the change to the access file',
  CREATE_MR_CREATED: 'The change is proposed; its checks are starting',
  CREATE_PIPELINE_RUNNING: 'The checks on the proposed change are running',
  CREATE_POOL_REJECTED: 'The service was too busy to prepare the change',
  CREATE_APPROVAL_SUBMITTING: 'Sending the request to the approvers',
  CREATE_APPROVAL_SUBMITTED: 'With the approvers, waiting for their decision',
  CREATE_APPROVAL_FAILED: 'The request could not be sent to the approvers',
  CREATE_ADMITTED: 'Approved; waiting to be merged with the next batch of requests',
  HANDLE_STARTED: 'Approved; the change is being reviewed for merging',
  HANDLE_APPROVED: 'The change is approved and being merged',
  HANDLE_APPROVE_FAILED: 'The change could not be approved for merging',
  HANDLE_APPROVE_FORBIDDEN: 'The change could not be approved for merging (a permission problem)',
  HANDLE_REBASE_CONFLICT: 'The change conflicts with another change to the same file',
  HANDLE_REBASING: 'Bringing the change up to date with the latest file',
  HANDLE_MERGE_FAILED: 'Merging the change failed',
  HANDLE_MERGED: 'Merged; waiting for the deployment to report it in effect',
  HANDLE_PIPELINE_RUNNING: 'The checks are running again on the updated change',
  HANDLE_PIPELINE_FAILED: 'The checks on the updated change failed',
  HANDLE_POOL_REJECTED: 'The service was too busy to merge the change',
  CLOSE_REJECTED: 'Rejected by the approver',
  CLOSE_WITHDRAWN: 'The approval was withdrawn',
  CLOSE_MR_CLOSED: 'Closed; the proposed change was closed',
  CLOSE_FAILED: 'Closed; the proposed change is still to be closed',
  CLOSE_CANCELLED: 'Cancelled by an operator',
  CLOSE_EXPIRED: 'The access has expired',
  CLOSE_REQUESTER_WITHDRAWN: 'You withdrew this request',
  CALLED_BACK: 'Deployed and in effect',
  RECONCILED: 'In effect (the deployment was confirmed by a check)',
  HANDLE_PIPELINE_PENDING: 'The checks on the updated change did not finish in time',
  HANDLE_MERGE_UNKNOWN: 'Not known yet whether the merge went through',
  HANDLE_REBASE_PENDING: 'Bringing the change up to date did not finish in time',
  CREATE_PIPELINE_PENDING: 'The checks on the proposed change did not finish in time',
  REVOKE_STARTED: 'Removing the access from the access file',
  REVOKE_CALLED_BACK: 'Access removed and deployed',
  REVOKE_RECONCILED: 'Access removed (the deployment was confirmed by a check)',
  REVOKE_ABSENT: 'Access removed; there was nothing left to remove',
  RENEW_EXPIRED: 'Closed: the access expired before the renewal took effect',
  RENEW_REVOKED: 'Closed: the access was given back or revoked before the renewal took effect',
};

/** statusWord is a binding state in words; a state this release does not
 * know is "In progress", never its code. With the step, a request its
 * owner withdrew reads "Withdrawn" rather than the "Closed" of every other
 * end without effect: "Closed" alone is also what a target closed to
 * requests used to say, and a person could not tell the two apart. */
export function statusWord(status: string, step?: string): string {
  if (status === 'CLOSED' && step === 'CLOSE_REQUESTER_WITHDRAWN') return 'Withdrawn';
  return statusWords[status] ?? 'In progress';
}

/** stepWord is a step in words, or '' for a step this release does not
 * know (the status still says where the request is). */
export function stepWord(step: string): string {
  return stepWords[step] ?? '';
}

/** The hint's words (docs/workflow.md): KEEP_WAITING is a stop that is
 * retried or resumed where it stopped; CONTACT_MAINTAINERS a failure that
 * waiting will not fix. */
export function hintWords(hint: string, contact?: string): string {
  switch (hint) {
    case 'KEEP_WAITING':
      return 'You can keep waiting: the problem is temporary, and the request resumes where it stopped once it is retried.';
    case 'CONTACT_MAINTAINERS':
      return `Contact ${contact || 'the maintainers'}; waiting will not help.`;
    default:
      return '';
  }
}

/** What a person does next, and whether "request again" applies. */
export interface Todo {
  words: string;
  /** the request is over and may be asked for again */
  again: boolean;
  /** a failure a person must act on */
  bad: boolean;
}

/** whatToDo is the "What to do" of a request: what an ended request
 * means (in effect, rejected, closed, expired, access removed), else the
 * server's hint (CONTACT_MAINTAINERS, KEEP_WAITING — the API decides
 * them), else what the person waits for. updatedAt dates a removal (the
 * last change of a REVOKED request is its removal's confirmation). */
export function whatToDo(status: string, step: string, hint: string, expiresAt?: string, updatedAt?: string, contact?: string): Todo {
  if (status === 'VALIDATED') {
    return {
      words: expiresAt
        ? `Nothing: you have access until ${when(expiresAt)}. It ends on its own then; give it back sooner if you no longer need it.`
        : 'Nothing: you have access.',
      again: false,
      bad: false,
    };
  }
  if (status === 'REJECTED') {
    if (step === 'CLOSE_WITHDRAWN') return { words: 'The approval was withdrawn. Request again if you still need access.', again: true, bad: false };
    return { words: 'The approver said no. Request again if you still need access, with a reason that answers theirs.', again: true, bad: false };
  }
  if (status === 'CLOSED') {
    if (step === 'CLOSE_EXPIRED') return { words: 'Your access has ended. Request again if you need it again.', again: true, bad: false };
    if (step === 'CLOSE_CANCELLED') return { words: 'An operator cancelled this request. Request again if you still need access.', again: true, bad: false };
    if (step === 'CLOSE_REQUESTER_WITHDRAWN') return { words: 'You withdrew this request. Request again if you need access after all.', again: true, bad: false };
    return { words: 'This request is closed. Request again if you still need access.', again: true, bad: false };
  }
  if (status === 'REVOKED') {
    const on = updatedAt ? ` on ${when(updatedAt)}` : '';
    return { words: `Your access was removed${on}; you can ask again if you need it.`, again: true, bad: false };
  }
  if (status === 'REVOKE_FAILED') {
    // The entry is still in the access file: the access is still granted
    // until an operator has the removal retried.
    const h = hintWords(hint, contact);
    return { words: `Removing your access stopped, so you still have it; the operators see it. ${h || `Contact ${contact || 'the maintainers'} if it does not move on.`}`, again: false, bad: true };
  }
  if (step === 'CLOSE_REQUESTER_WITHDRAWN') {
    return { words: 'Nothing: your withdrawal is being carried out; the proposed change is being closed.', again: false, bad: false };
  }
  const h = hintWords(hint, contact);
  if (h) return { words: h, again: false, bad: hint === 'CONTACT_MAINTAINERS' };
  if (status === 'CREATE_FAILED' || status === 'HANDLE_FAILED') {
    return { words: `It stopped; the operators see it. Contact ${contact || 'the maintainers'} if it does not move on.`, again: false, bad: true };
  }
  if (status === 'APPROVAL_SENDING' || status === 'APPROVAL_SENT') {
    return { words: 'Nothing: it waits for the approvers’ decision; this page follows by itself.', again: false, bad: false };
  }
  if (status === 'MERGED') return { words: 'Nothing: the change is merged and waits for the deployment.', again: false, bad: false };
  if (status === 'REVOKING') {
    return { words: 'Nothing: your access is being removed from the access file; it ends once that change is deployed.', again: false, bad: false };
  }
  return { words: 'Nothing, it is on its way.', again: false, bad: false };
}

/** renewedWord is the status of a request whose access continues under
 * a later renewal (docs/api.md, "Renewing access": a renewal with status
 * VALIDATED carries it): in effect, but no longer through this request's
 * entry nor until this request's expiry — so not "In effect". */
export const renewedWord = 'Renewed; the access continues under a later request';

/** renewedTodo is the "What to do" of such a request: act on the request
 * that carries the access (linked beside it), until its expiry. */
export function renewedTodo(expiresAt?: string): Todo {
  const until = expiresAt ? `, now until ${when(expiresAt)}` : '';
  return {
    words: `Nothing here: your access was renewed and continues under a later request${until}. Give it back or renew it there.`,
    again: false,
    bad: false,
  };
}

/** renewsWords is the "Renews" line of a renewal's page, from the
 * renewal's live status: the access it renews stays as it is only while
 * the renewal is under way; once the renewal is in effect it carries the
 * access itself, and one that ended without effect changed nothing. */
export function renewsWords(status: string): { link: string; rest: string } {
  if (status === 'VALIDATED') return { link: 'your earlier request', rest: '; this renewal carries its access now' };
  if (isRevocationStatus(status)) return { link: 'your earlier request', rest: '; this renewal carried its access on until it was removed' };
  if (status === 'REJECTED' || status === 'CLOSED') {
    return { link: 'your access', rest: ', which this renewal did not change: it stays as it was, until it ends as before' };
  }
  return { link: 'your access in effect', rest: ', which stays as it is until this renewal is in effect' };
}

/** revokeReasonWords says why an access ends, for a revocation's page. */
export function revokeReasonWords(reason?: string): string {
  switch (reason) {
    case 'EXPIRED':
      return 'It reached the end of the time it was granted for.';
    case 'GIVEN_BACK':
      return 'You gave it back.';
    case 'OPERATOR':
      return 'An operator revoked it.';
    default:
      return '';
  }
}

/** isRevocationStatus: the access's own states once its removal began
 * (the progress line of a grant does not apply to them). */
export function isRevocationStatus(status: string): boolean {
  return status === 'REVOKING' || status === 'REVOKED' || status === 'REVOKE_FAILED';
}

/** accessWords is a target's access mode in words. A closed target is
 * "Closed to requests", never a bare "Closed", which is a request's end. */
export function accessWords(mode: string, open: boolean): string {
  if (mode === 'OPEN') return 'Open';
  if (mode === 'TEST_WINDOW') return open ? 'Test window (open now)' : 'Test window (closed now)';
  if (mode === 'CLOSED') return 'Closed to requests';
  return open ? 'Open' : 'Closed to requests';
}

/** closedWords explains in words why a target takes no requests now: the
 * server's reason for a test window ("outside the test window 09:00–17:00
 * UTC"), a fixed sentence for a closed one. */
export function closedWords(mode: string, why?: string): string {
  if (mode === 'TEST_WINDOW') {
    const w = why?.startsWith('outside ') ? why.slice('outside '.length) : '';
    return w ? `Requests are accepted only inside ${w}; come back then.` : 'Requests are accepted only inside its test window, which is not open now.';
  }
  return 'This target takes no requests: its owners have closed it.';
}

/** progressWords names the step bar's steps (docs/api.md, "The step
 * bar"): the server decides each step's state from the request's real
 * history; these are only its words. A revocation's proposed change is a
 * removal. internal/web's TestWordsCoverEveryState checks every key the
 * domain lists has words here. */
const progressWords: Record<string, string> = {
  APPROVAL: 'Approval',
  PROPOSED: 'Change proposed',
  CHECKS: 'Checks',
  MERGED: 'Merged',
  DEPLOYED: 'Deployed',
  REMOVED: 'Access removed',
  RENEWED: 'Renewed',
  EXPIRED: 'Expired',
};

/** progressWord is a step of the bar in words ('' for a key this release
 * does not know: the step is left out rather than shown as a code). */
export function progressWord(key: string, kind?: string): string {
  if (key === 'PROPOSED' && kind === 'REVOKE') return 'Removal proposed';
  return progressWords[key] ?? '';
}

/** progressStateWords says a step's state for screen readers (the colour
 * says it to the eye). */
const progressStateWords: Record<string, string> = {
  DONE: 'done',
  CURRENT: 'under way',
  FAILED: 'stopped here',
  SKIPPED: 'will not happen',
  TODO: 'not reached yet',
};

export function progressStateWord(state: string): string {
  return progressStateWords[state] ?? '';
}

export function isFailed(status: string): boolean {
  return status === 'CREATE_FAILED' || status === 'HANDLE_FAILED' || status === 'REJECTED' || status === 'CLOSED' || status === 'REVOKE_FAILED';
}

const stamp = new Intl.DateTimeFormat(undefined, {
  year: 'numeric',
  month: 'short',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  timeZoneName: 'short',
});

/** exact is stamp to the second: for a history, where two steps a few
 * seconds apart must not read as the same moment. */
const exact = new Intl.DateTimeFormat(undefined, {
  year: 'numeric',
  month: 'short',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
  timeZoneName: 'short',
});

const day = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'long', day: 'numeric' });

/** when is a time stamp in the reader's time zone, with the zone named
 * ("Dec 1, 2026, 02:05 PM UTC"): the API's times are UTC, a person reads
 * their own clock, and a time without its zone is ambiguous. */
export function when(iso?: string): string {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : stamp.format(d);
}

/** whenExact is when to the second, with the zone named ("Dec 1, 2026,
 * 02:05:07 PM UTC"): the step history's and the audit's times. */
export function whenExact(iso?: string): string {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : exact.format(d);
}

/** dayWords is a date in words ("December 1, 2026"). */
export function dayWords(iso?: string): string {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : day.format(d);
}
