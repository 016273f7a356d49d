/** The end date a request will get, worked out before it is sent as the
 * server works it out (docs/workflow.md, "When the access ends"), so the
 * form can say it: a grant ends its days after it starts counting — its
 * approval on the approve-first flow, its submission on the legacy flow —
 * and a renewal ends its days after the later of now and the access's
 * current end; either at most the target's maximum from now. The server
 * decides (domain.ApprovedExpiry, domain.RenewalExpiry); this is only
 * what the person reads first. Pure: no clock, no page. */

const dayMs = 24 * 60 * 60 * 1000;

/** requestedDays is the days a form's field asks for: the whole number
 * typed, the target's maximum when the field is empty, undefined when
 * what is typed is not a number of days the target allows (the form's
 * check says why). */
export function requestedDays(field: string, maxDays: number): number | undefined {
  const d = field.trim();
  if (d === '') return maxDays > 0 ? maxDays : undefined;
  if (!/^\d+$/.test(d)) return undefined;
  const n = Number(d);
  return n >= 1 && n <= maxDays ? n : undefined;
}

/** EndDate is when the access would end and from what it was counted. */
export interface EndDate {
  /** iso is the end, RFC 3339 in UTC to the second, as the API writes it. */
  iso: string;
  /** from says where the days start: 'now' (a grant), 'current' (a
   * renewal of access that still runs: from its end). */
  from: 'now' | 'current';
  /** capped is true when the target's maximum from now cut it shorter. */
  capped: boolean;
}

/** endDate is the end of days days counted from nowMs — or, for a
 * renewal (current: the access's end, RFC 3339), from the later of nowMs
 * and current — at most nowMs + maxDays (maxDays ≤ 0: no cap),
 * truncated to the second. */
export function endDate(nowMs: number, days: number, maxDays: number, current?: string): EndDate {
  let from = nowMs;
  let base: EndDate['from'] = 'now';
  const cur = current ? Date.parse(current) : NaN;
  if (!Number.isNaN(cur) && cur > nowMs) {
    from = cur;
    base = 'current';
  }
  let end = from + days * dayMs;
  let capped = false;
  if (maxDays > 0 && end > nowMs + maxDays * dayMs) {
    end = nowMs + maxDays * dayMs;
    capped = true;
  }
  end = Math.floor(end / 1000) * 1000;
  return { iso: new Date(end).toISOString().replace(/\.\d{3}Z$/, 'Z'), from: base, capped };
}
