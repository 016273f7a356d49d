// What more than one console page uses: a request's console page link
// and the batch shape (a request's page shows its batch).

/** opsLink is a request's console page. */
export function opsLink(id: string): string {
  return `/console/requests/${encodeURIComponent(id)}`;
}

/** Batch is one batch as GET /ops/batches and GET /ops/batches/{id}
 * answer it. */
export interface Batch {
  id: number;
  projectId: number;
  status: string;
  mr?: { iid: number; url: string };
  failureCode?: string;
  failureMessage?: string;
  createdAt: string;
  updatedAt: string;
  members?: { id: number; operationId: string; kind?: string }[];
}
