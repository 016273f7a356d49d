// The console's Requests page (GET /ops/requests) in a real browser: an
// operator finds what bob has in effect now in two clicks from the page
// (the Requests tab, then bob's name), filters by person and state, pages
// through the list (Older, Newer), opens a request's console page from its row, and the
// "Needs attention" view lists a request stopped on a failure with why.
// Against the real binary and its simulators. Run: npm test --prefix web.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { approve, mainMatchesDatabase, newPage, serverAndBrowser, skipReason, sqlite, sqliteSkipReason, statusIs, submitRequest } from './harness.js';

const skip = skipReason() || sqliteSkipReason();

function submit(server, account, operationId, targetKey) {
  return submitRequest(server, account, operationId, { targetKey, reason: 'find test' });
}

describe('finding requests in the console', { skip: skip || false }, () => {
  const live = serverAndBrowser({ applyLimit: 100 });

  it('an operator finds what bob has now in two clicks, filters, pages, opens a row, and sees what needs attention', async () => {
    await submit(live.server, 'bob', 'find-bob-1', 'billing-dashboard');
    await approve(live.server, 'find-bob-1');
    await statusIs(live.server, 'bob', 'find-bob-1', 'VALIDATED');
    await submit(live.server, 'bob', 'find-bob-2', 'payments-db-readonly');
    await submit(live.server, 'alice', 'find-alice-1', 'payments-db-readonly');
    // alice's stopped on a failed check pipeline, as a crash would leave it.
    await statusIs(live.server, 'alice', 'find-alice-1', 'APPROVAL_SENT');
    sqlite(live.server.db, "UPDATE binding SET status = 'CREATE_FAILED' WHERE operation_id = 'find-alice-1'");
    sqlite(live.server.db, "UPDATE operation SET step_status = 10004, due_at = NULL WHERE operation_id = 'find-alice-1'");

    const page = await newPage(live.chrome.browser, live.server.base, 'olivia');
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
    const phone = await newPage(live.chrome.browser, live.server.base, 'olivia', { width: 390, height: 800 });
    await phone.goto('/console/find?attention=true');
    await phone.locator('[data-testid=find-results] tbody tr').first().waitFor({ timeout: 20000 });
    const { scroll, client } = await phone.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
    assert.ok(scroll <= client, `the Requests page is ${scroll} px wide in a ${client} px window`);
    await phone.context().close();

    // The binding file on main holds exactly the access the database has in effect.
    assert.deepEqual(await mainMatchesDatabase(live.server, 'billing-dashboard'), ['bob find-bob-1']);
  });
});
