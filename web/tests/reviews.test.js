// Access reviews in a real browser (docs/reviews.md): an operator opens a
// campaign for a target; bob, its owner, sees every access under review
// but his own, picks alice's and revokes it with a comment; the console's
// report shows who decided what, when, with the comment, follows the
// removal to "in effect", and downloads as CSV. Against the real binary
// and its simulators. Run: npm test --prefix web.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { approve, mainMatchesDatabase, newPage, serverAndBrowser, skipReason, sqliteSkipReason, statusIs, submitRequest } from './harness.js';

const skip = skipReason() || sqliteSkipReason();

describe('access reviews on the web', { skip: skip || false }, () => {
  const live = serverAndBrowser({ applyLimit: 100 });

  it('bob revokes alice’s access from his Reviews page, and the console’s report follows it to in effect', async () => {
    for (const [who, id] of [
      ['alice', 'review-alice-1'],
      ['bob', 'review-bob-1'],
    ]) {
      await submitRequest(live.server, who, id, { targetKey: 'billing-dashboard', reason: 'review test' });
      await approve(live.server, id);
      await statusIs(live.server, who, id, 'VALIDATED');
    }
    const dueAt = new Date(Date.now() + 7 * 86400_000).toISOString();
    const opened = await fetch(`${live.server.base}/ops/reviews`, {
      method: 'POST',
      headers: { 'X-Auth-Request-User': 'olivia', 'Content-Type': 'application/json' },
      body: JSON.stringify({ targetKey: 'billing-dashboard', dueAt, defaultDecision: 'revoke' }),
    });
    const campaign = await opened.json();
    assert.equal(opened.status, 200, JSON.stringify(campaign));
    const reviewId = campaign.data.id;

    // bob's page: alice's access, never his own.
    const page = await newPage(live.chrome.browser, live.server.base, 'bob');
    await page.goto('/');
    await page.click('header nav a[href="/reviews"]');
    const rows = page.locator('[data-testid=review-items] tbody tr');
    await rows.first().waitFor({ timeout: 20000 });
    assert.deepEqual(await rows.evaluateAll((rs) => rs.map((r) => r.dataset.subject)), ['alice']);
    assert.match(await rows.first().innerText(), /granted through changeflow/);

    // Pick, revoke, confirm: one question before anything is sent.
    assert.equal(await page.locator('[data-testid=review-revoke]').isDisabled(), true, 'nothing picked, nothing to revoke');
    await page.check('[data-testid=review-items] tbody tr[data-subject=alice] input[type=checkbox]');
    await page.fill('[data-testid=review-decide] input[name=comment]', 'left the billing team');
    await page.click('[data-testid=review-revoke]');
    assert.match(await page.locator('[data-testid=review-decide]').innerText(), /Revoke 1 entry\? The access is removed from the file and ends once that is deployed/);
    await page.click('[data-testid=review-decide] button:has-text("Yes, revoke")');
    assert.match(await page.locator('[data-testid=done]').innerText(), /^Revoked 1 entry: each is being removed from the access file/);
    await page.locator('[data-testid=reviews-none]').waitFor();
    await page.context().close();

    // The removal goes the ordinary way.
    await statusIs(live.server, 'alice', 'review-alice-1', 'REVOKED');

    // The console's report: who decided what, when, the comment, in effect.
    const ops = await newPage(live.chrome.browser, live.server.base, 'olivia');
    await ops.goto('/console');
    await ops.click('nav.tabs a[href="/console/reviews"]');
    await ops.locator(`[data-testid=console-reviews] tr[data-review="${reviewId}"] a`).click();
    await ops.waitForURL(new RegExp(`/console/reviews/${reviewId}$`));
    const alice = ops.locator('[data-testid=review-entries] tr[data-subject=alice]');
    await alice.waitFor({ timeout: 20000 });
    await ops.waitForFunction(() => /removed: in effect/.test(document.querySelector('[data-testid=review-entries] tr[data-subject=alice]')?.textContent ?? ''), null, { timeout: 30000 });
    const aliceRow = await alice.innerText();
    assert.match(aliceRow, /revoked/);
    assert.match(aliceRow, /bob/);
    assert.match(aliceRow, /left the billing team/);
    assert.match(aliceRow, /UTC|GMT/, 'times name their zone');
    assert.match(await ops.locator('[data-testid=review-entries] tr[data-subject=bob]').innerText(), /not decided yet/);
    const [file] = await Promise.all([ops.waitForEvent('download'), ops.click('[data-testid=review-csv]')]);
    assert.equal(file.suggestedFilename(), `access-review-${reviewId}.csv`);
    const csv = readFileSync(await file.path(), 'utf8');
    assert.match(csv, /alice/);
    assert.match(csv, /left the billing team/);
    await ops.context().close();

    // The binding file on main holds exactly the access the database has in effect.
    assert.deepEqual(await mainMatchesDatabase(live.server, 'billing-dashboard'), ['bob review-bob-1']);
  });
});
