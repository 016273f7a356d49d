// Plain words for the API's codes (docs/api.md, domain binding states).

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
};

export function statusWord(status: string): string {
  return statusWords[status] ?? status;
}

/** The hint tells a person what to do next (docs/workflow.md). */
export function hintWords(hint: string): string {
  switch (hint) {
    case 'KEEP_WAITING':
      return 'You can keep waiting: this is retried on its own.';
    case 'CONTACT_MAINTAINERS':
      return 'Contact the maintainers; waiting will not help.';
    default:
      return '';
  }
}

export function accessWords(mode: string, open: boolean): string {
  if (mode === 'OPEN') return 'Open';
  if (mode === 'TEST_WINDOW') return open ? 'Test window (open now)' : 'Test window (closed now)';
  if (mode === 'CLOSED') return 'Closed';
  return open ? 'Open' : 'Closed';
}

/** The external phases as a progress line; failures stop where they happen. */
export const phases = ['Approval', 'Change proposed', 'Merged', 'Deployed', 'In effect'] as const;

export function phaseIndex(status: string): number {
  switch (status) {
    case 'APPROVAL_SENDING':
    case 'APPROVAL_SENT':
    case 'REJECTED':
      return 0;
    case 'MR_CREATING':
    case 'MR_CREATED':
    case 'CREATE_FAILED':
      return 1;
    case 'MERGING':
    case 'HANDLE_FAILED':
      return 2;
    case 'MERGED':
      return 3;
    case 'VALIDATED':
      return 4;
    default:
      return -1;
  }
}

export function isFailed(status: string): boolean {
  return status === 'CREATE_FAILED' || status === 'HANDLE_FAILED' || status === 'REJECTED' || status === 'CLOSED';
}

export function when(iso?: string): string {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}
