// Browser tests of the end date a request will get, shown before submit
// (docs/webapp.md, "The end date"): the request form counts the days from
// now — "if approved now" on the approve-first flow, whose days count from
// the approval — and the renewal form from the later of now and the
// access's current end, at most the target's maximum from now; nothing
// while the days field holds what the target does not allow. A request
// waiting for its approval says its days count from the approval. The
// page's clock is fixed, so every end is exact. Run: npm test --prefix web.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildRelease, launchBrowser, newPage, renewalFilledIn, skipReason, startServer } from './harness.js';

const skip = skipReason();
const now = '2026-12-01T10:00:00Z';

const envelope = (data) => ({ status: 200, contentType: 'application/json', body: JSON.stringify({ code: 'OK', message: '', data }) });

/** grantInEffect is GET /api/requests/op-r for alice's access in effect
 * until until, asked for with days days. */
function grantInEffect(until, days) {
  return {
    operationId: 'op-r',
    subject: 'alice',
    targetKey: 'payments-db-readonly',
    targetTitle: 'Payments DB (read-only)',
    reason: 'quarterly audit',
    days,
    status: 'VALIDATED',
    step: { code: 10301, name: 'CALLED_BACK' },
    hint: 'NONE',
    kind: 'GRANT',
    createdAt: '2026-11-20T10:00:00Z',
    updatedAt: '2026-11-20T11:00:00Z',
    expiresAt: until,
  };
}

/** endShown is what the form says about the end: its words and the
 * machine-readable end, or null when it says nothing. */
async function endShown(page) {
  const p = page.locator('[data-testid=end-date]');
  if ((await p.count()) === 0) return null;
  return {
    text: await p.innerText(),
    iso: await p.locator('time').getAttribute('datetime'),
    from: await p.getAttribute('data-from'),
    capped: (await p.getAttribute('data-capped')) === 'true',
  };
}

/** typeDays puts value into the days field and waits for the form to
 * show it. */
async function typeDays(page, value) {
  await page.fill('input[name=days]', value);
  await page.waitForFunction((v) => document.querySelector('input[name=days]').value === v, value);
}

describe('the end date before submit, in a real browser', { skip: skip || false }, () => {
  let bin;
  let server;
  let chrome;
  before(async () => {
    bin = buildRelease('');
    server = await startServer({ bin, applyLimit: 100 });
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
    await server?.stop();
    if (bin) rmSync(dirname(bin), { recursive: true, force: true });
  });

  it('approve-first: the form shows the end if approved now, for the days typed or the maximum', async () => {
    const page = await newPage(chrome.browser, server.base, 'alice');
    await page.clock.setFixedTime(new Date(now));
    await page.goto('/request/payments-db-readonly');
    await page.locator('[data-testid=end-date]').waitFor();

    // Empty: the target's maximum, 30 days.
    let e = await endShown(page);
    assert.equal(e.iso, '2026-12-31T10:00:00Z');
    assert.match(e.text, /^If approved now, your access would end on Dec 31, 2026, 10:00 AM UTC: the 30 days count from the approval/);
    assert.match(e.text, /each day the approval takes moves the end a day later/);

    await typeDays(page, '5');
    e = await endShown(page);
    assert.deepEqual([e.iso, e.from, e.capped], ['2026-12-06T10:00:00Z', 'now', false]);
    assert.match(e.text, /Dec 6, 2026, 10:00 AM UTC: the 5 days count from the approval/);

    await typeDays(page, '1');
    assert.match((await endShown(page)).text, /the 1 day count from the approval/);

    // What the target does not allow shows no end: the check says why.
    for (const bad of ['0', '31', '2.5']) {
      await typeDays(page, bad);
      await page.waitForFunction(() => !document.querySelector('[data-testid=end-date]'));
      assert.equal(await endShown(page), null, `days ${bad}`);
    }
    await page.context().close();
  });

  it('legacy flow: the days count from the submission', async () => {
    const page = await newPage(chrome.browser, server.base, 'alice');
    await page.clock.setFixedTime(new Date(now));
    await page.route(/\/api\/targets$/, async (route) => {
      const real = await route.fetch();
      const body = await real.json();
      for (const t of body.data.items) t.daysFromApproval = false;
      await route.fulfill({ response: real, json: body });
    });
    await page.goto('/request/payments-db-readonly');
    await typeDays(page, '7');
    const e = await endShown(page);
    assert.equal(e.iso, '2026-12-08T10:00:00Z');
    assert.equal(e.text, 'Your access would end on Dec 8, 2026, 10:00 AM UTC: 7 days from now.');
    await page.context().close();
  });

  it('renewal: from the later of now and the current end, at most the maximum from now', async () => {
    for (const c of [
      // Renewing early keeps the days left: Dec 3 + 5 days.
      { until: '2026-12-03T10:00:00Z', days: '5', want: '2026-12-08T10:00:00Z', from: 'current', capped: false, words: /5 days added to your access's current end, Dec 3, 2026, 10:00 AM UTC\.$/ },
      // Never past now + 30 days (Dec 31), however early.
      { until: '2026-12-28T10:00:00Z', days: '20', want: '2026-12-31T10:00:00Z', from: 'current', capped: true, words: /cut to 30 days from now, this target's longest access\.$/ },
      // An end already passed counts from now.
      { until: '2026-11-30T10:00:00Z', days: '5', want: '2026-12-06T10:00:00Z', from: 'now', capped: false, words: /: 5 days from now\.$/ },
    ]) {
      const page = await newPage(chrome.browser, server.base, 'alice');
      await page.clock.setFixedTime(new Date(now));
      await page.route(/\/api\/requests\/op-r$/, (route) => route.fulfill(envelope(grantInEffect(c.until, 5))));
      await page.goto('/request/payments-db-readonly?renew=op-r');
      await renewalFilledIn(page); // before typing: the fill would overwrite what was typed
      await typeDays(page, c.days);
      const e = await endShown(page);
      assert.deepEqual([e.iso, e.from, e.capped], [c.want, c.from, c.capped], `until ${c.until}, ${c.days} days`);
      assert.match(e.text, /^Renewed, your access would end on /);
      assert.match(e.text, c.words);
      await page.context().close();
    }
  });

  it('a request waiting for its approval says its days count from the approval, and shows no end yet', async () => {
    const r = await fetch(`${server.base}/api/requests`, {
      method: 'POST',
      headers: { 'X-Auth-Request-User': 'bob', 'Idempotency-Key': 'enddate-waiting', 'Content-Type': 'application/json' },
      body: JSON.stringify({ targetKey: 'billing-dashboard', reason: 'month end', days: 3 }),
    });
    assert.equal(r.status, 202);
    const v = (await (await fetch(`${server.base}/api/requests/enddate-waiting`, { headers: { 'X-Auth-Request-User': 'bob' } })).json()).data;
    assert.equal(v.expiresFromApproval, true, JSON.stringify(v));
    assert.equal(v.expiresAt, undefined);

    const page = await newPage(chrome.browser, server.base, 'bob');
    await page.goto('/requests/enddate-waiting');
    const ends = page.locator('[data-testid=ends-after-approval]');
    await ends.waitFor();
    assert.equal(await page.locator('[data-testid=days]').innerText(), '3');
    assert.equal(await ends.innerText(), '3 days after it is approved: the days count from the approval, not from when you asked.');
    assert.equal(await page.locator('[data-testid=access-until]').count(), 0);
    await page.context().close();
  });
});
