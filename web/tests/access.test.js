// The console's Access page (GET /ops/access, GET /ops/access/history) in a
// real browser: an operator sees who has access to a target now, the
// timeline of the window, and after a give-back the period ended; the
// request's console page shows its period and links the target's page;
// an entry put back by hand on main after the give-back shows as a
// discrepancy to resolve.
// Against the real binary and its simulators. Run: npm test --prefix web.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { approve, mainMatchesDatabase, newPage, serverAndBrowser, skipReason, sqliteSkipReason, statusIs, submitRequest } from './harness.js';

const skip = skipReason() || sqliteSkipReason();

/** fileOnMain is a file's text on the simulated GitLab's main, null when it does not exist. */
async function fileOnMain(server, file) {
  const r = await fetch(`${server.sim}/gitlab/api/v4/projects/1/repository/files/${encodeURIComponent(file)}/raw?ref=main`, {
    headers: { 'PRIVATE-TOKEN': 'local-maintainer-token' },
  });
  if (r.status === 404) return null;
  assert.equal(r.status, 200);
  return r.text();
}

/** commitOnMain writes a file on main by hand, as a maintainer. */
async function commitOnMain(server, file, action, content) {
  const r = await fetch(`${server.sim}/gitlab/api/v4/projects/1/repository/commits`, {
    method: 'POST',
    headers: { 'PRIVATE-TOKEN': 'local-maintainer-token', 'Content-Type': 'application/json' },
    body: JSON.stringify({ branch: 'main', commit_message: 'hand edit', actions: [{ action, file_path: file, content }] }),
  });
  assert.equal(r.status, 201, await r.text());
}

describe('who had access, in the console', { skip: skip || false }, () => {
  const live = serverAndBrowser({ applyLimit: 100 });

  it('an operator sees who has access now, the timeline, and the period a give-back ended', async () => {
    const id = 'access-bob-1';
    await submitRequest(live.server, 'bob', id, { targetKey: 'billing-dashboard', reason: 'access page test' });
    await approve(live.server, id);
    await statusIs(live.server, 'bob', id, 'VALIDATED');

    const page = await newPage(live.chrome.browser, live.server.base, 'olivia');
    await page.goto('/console');
    await page.click('nav.tabs a[href="/console/access"]');
    await page.fill('[data-testid=access-form] input[name=target]', 'billing-dashboard');
    await page.click('[data-testid=access-form] button[type=submit]');
    await page.waitForURL(/\/console\/access\?target=billing-dashboard$/);
    const now = page.locator(`[data-testid=access-now] tr[data-subject=bob][data-operation=${id}]`);
    await now.waitFor({ timeout: 20000 });
    assert.match(await now.innerText(), /changeflow’s request/);
    // Times name their zone.
    assert.match(await now.locator('time').first().innerText(), /UTC|GMT/);
    await page.locator('[data-testid=access-timeline] [data-subject=bob] .timeline-bar').waitFor();
    assert.match(await page.locator('[data-testid=access-history]').innerText(), /still has access/);

    // The request's console page shows its period and links the target's.
    await page.goto(`/console/requests/${id}`);
    const had = page.locator('[data-testid=request-access]');
    await had.waitFor({ timeout: 20000 });
    assert.match(await had.innerText(), /and still has/);
    await had.locator('a').click();
    await page.waitForURL(/\/console\/access\?target=billing-dashboard$/);

    // bob gives it back; once the removal is in effect nobody has access
    // now and the period has its end.
    const granted = await fileOnMain(live.server, 'bindings/billing-dashboard.yaml');
    const r = await fetch(`${live.server.base}/api/requests/${id}/revoke`, {
      method: 'POST',
      headers: { 'X-Auth-Request-User': 'bob', 'Idempotency-Key': `${id}-give-back`, 'Content-Type': 'application/json' },
      body: '{}',
    });
    assert.equal(r.status, 202, await r.text());
    await statusIs(live.server, 'bob', id, 'REVOKED');
    await page.goto('/console/access?target=billing-dashboard&days=7');
    await page.locator('[data-testid=access-now-none]').waitFor({ timeout: 20000 });
    const period = page.locator(`[data-testid=access-history] tbody tr[data-operation=${id}]`);
    await period.waitFor();
    assert.equal(await period.locator('time').count(), 2, 'the period shows its start and its end');
    assert.equal(await page.locator('[data-testid=access-days-7].active').count(), 1);
    assert.equal(await page.locator('[data-testid=access-discrepancies]').count(), 0, 'records and main agree');

    // A maintainer puts bob's entry back by hand: the page says, to
    // resolve, that it is on main while changeflow's records say it ended.
    const removed = await fileOnMain(live.server, 'bindings/billing-dashboard.yaml');
    await commitOnMain(live.server, 'bindings/billing-dashboard.yaml', removed === null ? 'create' : 'update', granted);
    await page.goto('/console/access?target=billing-dashboard&days=7');
    const note = page.locator('[data-testid=access-discrepancies]');
    await note.waitFor({ timeout: 20000 });
    assert.match(await note.innerText(), /To resolve:[\s\S]*bob.s entry \(request access-bob-1\) is on the default branch[\s\S]*put back by hand/);
    // Removed again by hand, the file and the database agree once more.
    await commitOnMain(live.server, 'bindings/billing-dashboard.yaml', removed === null ? 'delete' : 'update', removed ?? '');
    await page.context().close();

    // The binding file on main holds exactly the access the database has in effect.
    assert.deepEqual(await mainMatchesDatabase(live.server, 'billing-dashboard'), []);
  });
});
