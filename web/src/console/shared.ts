// What more than one console page uses: a request's console page link
// and the batch shape (a request's page shows its batch).
import type { components } from '../api.gen';

/** opsLink is a request's console page. */
export function opsLink(id: string): string {
  return `/console/requests/${encodeURIComponent(id)}`;
}

/** Batch is one batch as GET /ops/batches and GET /ops/batches/{id}
 * answer it. */
export type Batch = components['schemas']['Batch'];
