// The console's Requests page (GET /ops/requests) in a real browser: an
// operator finds what bob has in effect now in two clicks from the page
// (the Requests tab, then bob's name), filters by person and state, pages
// through the list (Older, Newer), opens a request's console page from its row, and the
// "Needs attention" view lists a request stopped on a failure with why.
// Against the real binary and its simulators. Run: npm test --prefix web.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { launchBrowser, mainMatchesDatabase, newPage, skipReason, sqlite, sqliteSkipReason, startServer } from './harness.js';

const skip = skipReason() || sqliteSkipReason();

async function submit(server, account, operationId, targetKey) {
  const r = await fetch(`${server.base}/api/requests`, {
    method: 'POST',
    headers: { 'X-Auth-Request-User': account, 'Idempotency-Key': operationId, 'Content-Type': 'application/json' },
    body: JSON.stringify({ targetKey, reason: 'find test' }),
  });
  assert.equal(r.status, 202, await r.text());
}

async function approve(server, operationId) {
  for (const deadline = Date.now() + 20000; Date.now() < deadline; ) {
    const list = await (await fetch(`${server.sim}/approval/_control/approvals`)).json();
    const form = list.items.find((a) => a.operationId === operationId && a.status === 'PENDING');
    if (form) {
      const r = await fetch(`${server.sim}/approval/_control/approvals/${form.approvalId}/approve`, { method: 'POST', body: '{}' });
      assert.equal(r.status, 200, await r.text());
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`no approval form for ${operationId}`);
}

async function statusIs(server, account, operationId, status, timeout = 90000) {
  let last;
  for (const deadline = Date.now() + timeout; Date.now() < deadline; ) {
    const r = await fetch(`${server.base}/api/requests/${encodeURIComponent(operationId)}`, { headers: { 'X-Auth-Request-User': account } });
    last = (await r.json()).data;
    if (last?.status === status) return last;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.fail(`${operationId} never reached ${status}; last ${JSON.stringify(last)}`);
}

describe('finding requests in the console', { skip: skip || false }, () => {
  let server;
  let chrome;
  before(async () => {
    server = await startServer({ applyLimit: 100 });
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
    await server?.stop();
  });

  it('an operator finds what bob has now in two clicks, filters, pages, opens a row, and sees what needs attention', async () => {
    await submit(server, 'bob', 'find-bob-1', 'billing-dashboard');
    await approve(server, 'find-bob-1');
    await statusIs(server, 'bob', 'find-bob-1', 'VALIDATED');
    await submit(server, 'bob', 'find-bob-2', 'payments-db-readonly');
    await submit(server, 'alice', 'find-alice-1', 'payments-db-readonly');
    // alice's stopped on a failed check pipeline, as a crash would leave it.
    await statusIs(server, 'alice', 'find-alice-1', 'APPROVAL_SENT');
    sqlite(server.db, "UPDATE binding SET status = 'CREATE_FAILED' WHERE operation_id = 'find-alice-1'");
    sqlite(server.db, "UPDATE operation SET step_status = 10004, due_at = NULL WHERE operation_id = 'find-alice-1'");

    const page = await newPage(chrome.browser, server.base, 'olivia');
    await page.goto('/console');
    // Click 1: the Requests tab lists everything, newest first.
    await page.click('nav.tabs a[href="/console/find"]');
    const rows = page.locator('[data-testid=find-results] tbody tr');
    await rows.first().waitFor({ timeout: 20000 });
    assert.deepEqual(await rows.evaluateAll((rs) => rs.map((r) => r.dataset.operation)), ['find-alice-1', 'find-bob-2', 'find-bob-1']);
    // Click 2: bob's name is what bob has in effect now.
    await page.locator('tr[data-operation=find-bob-2] [data-testid=find-person]').click();
    await page.waitForURL(/\/console\/find\?subject=bob&status=VALIDATED$/);
    await page.locator('[data-testid=find-results] tbody tr[data-operation=find-bob-1]').waitFor();
    assert.equal(await rows.count(), 1);
    const row = await rows.first().innerText();
    assert.match(row, /In effect/);
    assert.match(row, /VALIDATED/);
    assert.match(await page.locator('[data-testid=find-summary]').innerText(), /of bob, in effect now/);

    // The filters: person and state typed and chosen.
    await page.fill('input[name=subject]', 'alice');
    await page.selectOption('select[name=status]', '');
    await page.click('[data-testid=find-filters] button[type=submit]');
    await page.waitForURL(/\/console\/find\?subject=alice$/);
    await page.locator('[data-testid=find-results] tbody tr[data-operation=find-alice-1]').waitFor();
    assert.equal(await rows.count(), 1);

    // Needs attention: alice's stopped request, and why.
    await page.click('[data-testid=attention-view]');
    await page.waitForURL(/attention=true/);
    await page.locator('[data-testid=find-why]').first().waitFor();
    assert.match(await page.locator('tr[data-operation=find-alice-1] [data-testid=find-why]').innerText(), /Stopped on a failure/);

    // Pages of one (the address's limit): Older walks the cursor back in
    // time, Newer returns; the last page offers no Older.
    await page.goto('/console/find?limit=1');
    for (const want of ['find-alice-1', 'find-bob-2', 'find-bob-1']) {
      await page.locator(`[data-testid=find-results] tbody tr[data-operation=${want}]`).waitFor();
      assert.equal(await rows.count(), 1);
      if (want !== 'find-bob-1') await page.click('[data-testid=find-older]');
    }
    assert.equal(await page.locator('[data-testid=find-older]').count(), 0, 'the last page offers no Older');
    await page.click('[data-testid=find-newer]');
    await page.locator('[data-testid=find-results] tbody tr[data-operation=find-bob-2]').waitFor();

    // A row opens the request's console page.
    await page.goto('/console/find');
    await page.locator('tr[data-operation=find-bob-1] [data-testid=find-request]').click();
    await page.waitForURL(/\/console\/requests\/find-bob-1$/);
    await page.context().close();

    // At a phone's width the page, its filters and its rows fit the window.
    const phone = await newPage(chrome.browser, server.base, 'olivia', { width: 390, height: 800 });
    await phone.goto('/console/find?attention=true');
    await phone.locator('[data-testid=find-results] tbody tr').first().waitFor({ timeout: 20000 });
    const { scroll, client } = await phone.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
    assert.ok(scroll <= client, `the Requests page is ${scroll} px wide in a ${client} px window`);
    await phone.context().close();

    // The binding file on main holds exactly the access the database has in effect.
    assert.deepEqual(await mainMatchesDatabase(server, 'billing-dashboard'), ['bob find-bob-1']);
  });
});
