// Browser tests of what a person holds, where they look for it
// (docs/webapp.md, "What you hold"): the Targets page shows the access in
// effect and its end, with Renew and Give back that work; "my requests"
// says when each access ends and offers each row's actions; "Request
// again" opens the form filled in like the earlier request; the console's
// step history reads to the second with its zone; a person without
// operations rights who signs in on a console link reads what the console
// needs and where their own pages are. Against the real binary and its
// simulators. Run: npm test --prefix web.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { approve, mainMatchesDatabase, newPage, renewalFilledIn, repoRoot, serverAndBrowser, skipReason, sqliteSkipReason, statusIs, submitRequest } from './harness.js';

const skip = skipReason() || sqliteSkipReason();
const update = process.env.CHANGEFLOW_UPDATE_SCREENSHOTS === '1';

/** shot writes docs/screenshots/<name>.png when asked to
 * (CHANGEFLOW_UPDATE_SCREENSHOTS=1), else under web/tests/artifacts. */
async function shot(page, name) {
  const dir = update ? join(repoRoot, 'docs', 'screenshots') : join(repoRoot, 'web', 'tests', 'artifacts');
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, `${name}.png`), fullPage: true });
}

/** submit posts a request as account straight to the API. */
function submit(server, account, operationId, targetKey, reason, days) {
  return submitRequest(server, account, operationId, { targetKey, reason, days });
}

// A time stamp in words with its zone, to the minute ("Dec 3, 2026,
// 07:15 AM UTC") and to the second.
const stamp = /[A-Z][a-z]{2} \d+, \d{4}, \d\d:\d\d [AP]M UTC/;
const exactStamp = /[A-Z][a-z]{2} \d+, \d{4}, \d\d:\d\d:\d\d [AP]M UTC/;

describe('what you hold, in a real browser', { skip: skip || false }, () => {
  const live = serverAndBrowser({ applyLimit: 100 });

  it('the Targets page shows alice\'s access and its end; Renew opens the renewal, Give back removes the access', async () => {
    const id = 'tg-held';
    // One day: its renewal window (the last quarter, at least a day) is
    // open from the start.
    await submit(live.server, 'alice', id, 'billing-dashboard', 'month-end close', 1);
    await approve(live.server, id);
    const granted = await statusIs(live.server, 'alice', id, 'VALIDATED');

    const page = await newPage(live.chrome.browser, live.server.base, 'alice');
    await page.goto('/');
    const row = page.locator('tr[data-target=billing-dashboard]');
    const yours = row.locator('[data-testid=yours]');
    await yours.waitFor();
    assert.match(await yours.innerText(), new RegExp(`^You have access until ${stamp.source}\\. Your request$`));
    assert.equal(await yours.locator('time').getAttribute('datetime'), granted.expiresAt);
    assert.equal(await row.locator('[data-testid=yours-link]').getAttribute('href'), `/requests/${id}`);
    assert.equal(await row.locator('[data-testid=request-access]').count(), 0, 'no "Request access" on what alice holds');
    // Nothing held elsewhere: the target offers a request; a closed one
    // says so in its own words, not a request's "Closed".
    const other = page.locator('tr[data-target=payments-db-readonly]');
    assert.equal(await other.locator('[data-testid=request-access]').count(), 1);
    assert.equal(await other.locator('[data-testid=yours]').count(), 0);
    assert.match(await page.locator('tr[data-target=legacy-ftp] .access').innerText(), /^Closed to requests$/);
    await shot(page, 'targets-held');
    // At a phone's width the row and its buttons fit the window.
    const phone = await newPage(live.chrome.browser, live.server.base, 'alice', { width: 390, height: 800 });
    await phone.goto('/');
    await phone.locator('tr[data-target=billing-dashboard] [data-testid=give-back]').waitFor();
    const { scroll, client } = await phone.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
    assert.ok(scroll <= client, `the Targets page is ${scroll} px wide in a ${client} px window`);
    await shot(phone, 'targets-held-phone');
    await phone.context().close();

    // Renew opens the renewal form, filled in like the access; submitting
    // it is the confirmation.
    await row.locator('[data-testid=renew]').click();
    await page.waitForURL(`**/request/billing-dashboard?renew=${id}`);
    await renewalFilledIn(page);
    assert.equal(await page.inputValue('textarea[name=reason]'), 'month-end close');
    assert.equal(await page.inputValue('input[name=days]'), '1');
    const renewal = await page.getAttribute('form', 'data-operation-id');
    await page.getByRole('button', { name: 'Submit renewal' }).click();
    await page.locator('[data-testid=submitted]').waitFor();
    await statusIs(live.server, 'alice', id, (d) => d?.renewal?.operationId === renewal);

    // Back on the targets: the access, its renewal under way, no second
    // Renew; Give back says it drops the renewal.
    await page.goto('/');
    await row.locator('[data-testid=yours-renewal]').waitFor();
    assert.match(await yours.innerText(), new RegExp(`^You have access until ${stamp.source}; its renewal is under way\\.`));
    assert.equal(await row.locator('[data-testid=yours-renewal]').getAttribute('href'), `/requests/${renewal}`);
    assert.equal(await row.locator('[data-testid=renew]').count(), 0, 'no Renew while a renewal runs');
    const giveBack = row.locator('[data-testid=give-back]');
    const posts = [];
    page.on('request', (r) => r.method() === 'POST' && posts.push(new URL(r.url()).pathname));
    await giveBack.getByRole('button', { name: 'Give back access' }).click();
    assert.match(await giveBack.innerText(), /Give back your access to Billing dashboard now and drop its renewal\?/);
    assert.deepEqual(posts, [], 'nothing is sent before the confirmation');
    await giveBack.getByRole('button', { name: 'Yes, give back access' }).click();
    // The row follows at once: the access is being removed, nothing to act on.
    await row.locator('[data-testid=yours-removal]').waitFor();
    assert.deepEqual(posts, [`/api/requests/${id}/revoke`], 'exactly one POST, on the request that carries the access');
    assert.match(await yours.innerText(), /; it is being removed \(follow the removal\)\./);
    assert.equal(await row.locator('[data-testid=give-back]').count(), 0);
    assert.equal(await row.locator('[data-testid=yours-removal]').getAttribute('href'), `/requests/${id}~revoke`);

    // Removed and deployed: the target offers a new request again.
    await statusIs(live.server, 'alice', id, 'REVOKED');
    await page.reload();
    await row.locator('[data-testid=request-access]').waitFor();
    assert.equal(await row.locator('[data-testid=yours]').count(), 0);
    await statusIs(live.server, 'alice', renewal, 'CLOSED');
    await page.context().close();
  });

  it('"my requests" says when each access ends and offers what each row allows; a withdrawn request reads "Withdrawn" and asks again filled in', async () => {
    await submit(live.server, 'bob', 'tg-bob-held', 'billing-dashboard', 'invoice run', 2);
    await approve(live.server, 'tg-bob-held');
    const held = await statusIs(live.server, 'bob', 'tg-bob-held', 'VALIDATED');
    await submit(live.server, 'bob', 'tg-bob-wait', 'payments-db-readonly', 'audit prep', 3);
    await statusIs(live.server, 'bob', 'tg-bob-wait', 'APPROVAL_SENT');

    const page = await newPage(live.chrome.browser, live.server.base, 'bob');
    await page.goto('/requests');
    const heldRow = page.locator('tr[data-operation-id=tg-bob-held]');
    const waitRow = page.locator('tr[data-operation-id=tg-bob-wait]');
    await heldRow.locator('[data-testid=row-until] time').waitFor();
    // In effect: its end, Give back, and from when it can be renewed
    // (two days: the window is the last day).
    assert.equal(await heldRow.locator('[data-testid=row-until] time').getAttribute('datetime'), held.expiresAt);
    assert.match(await heldRow.locator('[data-testid=row-until]').innerText(), stamp);
    assert.equal(await heldRow.locator('[data-testid=give-back]').count(), 1);
    assert.match(await heldRow.locator('[data-testid=renew-from]').innerText(), new RegExp(`^renew from ${stamp.source}$`));
    assert.equal(await heldRow.locator('[data-testid=withdraw], [data-testid=request-again]').count(), 0);
    // Waiting: how long it asks for, and Withdraw only.
    assert.match(await waitRow.locator('[data-testid=row-until]').innerText(), /^3 days asked for$/);
    assert.equal(await waitRow.locator('[data-testid=give-back], [data-testid=renew], [data-testid=request-again]').count(), 0);
    await shot(page, 'my-requests-actions');

    const withdraw = waitRow.locator('[data-testid=withdraw]');
    await withdraw.getByRole('button', { name: 'Withdraw' }).click();
    assert.match(await withdraw.innerText(), /Withdraw your request for Payments DB \(read-only\)\? It will not take effect/);
    await withdraw.getByRole('button', { name: 'Yes, withdraw' }).click();
    await waitRow.locator('.status', { hasText: /^Withdrawn$/ }).waitFor();
    assert.match(await waitRow.locator('[data-testid=todo]').innerText(), /You withdrew this request/);
    assert.equal(await waitRow.locator('[data-testid=withdraw]').count(), 0);
    const again = waitRow.locator('[data-testid=request-again]');
    assert.equal(await again.getAttribute('href'), '/request/payments-db-readonly?again=tg-bob-wait');

    // Request again: the form filled in like the earlier request, for bob.
    await again.click();
    await page.waitForURL('**/request/payments-db-readonly?again=tg-bob-wait');
    await page.locator('[data-testid=asking-again]').waitFor();
    assert.match(await page.locator('[data-testid=asking-again]').innerText(), new RegExp(`^Filled in like your earlier request of ${stamp.source}`));
    assert.match(await page.locator('[data-testid=for-account]').innerText(), /^For bob:/);
    assert.equal(await page.inputValue('textarea[name=reason]'), 'audit prep');
    assert.equal(await page.inputValue('input[name=days]'), '3');
    const anew = await page.getAttribute('form', 'data-operation-id');
    assert.notEqual(anew, 'tg-bob-wait');
    await page.getByRole('button', { name: 'Submit request' }).click();
    await page.locator('[data-testid=submitted]').waitFor();
    const asked = await statusIs(live.server, 'bob', anew, 'APPROVAL_SENT');
    assert.equal(asked.reason, 'audit prep');
    assert.equal(asked.days, 3);
    await page.context().close();
  });

  it('the console\'s step history reads to the second, with its time zone', async () => {
    const page = await newPage(live.chrome.browser, live.server.base, 'olivia');
    await page.goto('/console/requests/tg-bob-held');
    const cells = page.locator('[data-testid=step-history] tbody tr td:first-child');
    await cells.first().waitFor();
    const times = await cells.allInnerTexts();
    assert.ok(times.length >= 3, `a history: ${times}`);
    for (const t of times) assert.match(t, new RegExp(`^${exactStamp.source}$`));
    await page.context().close();
  });

  it('a person without operations rights who signs in on a console link reads what the console needs and where to go', async () => {
    const page = await newPage(live.chrome.browser, live.server.base); // nobody picked
    await page.goto('/console/batches');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL((u) => u.href.startsWith(`${live.server.sim}/oidc/authorize?`));
    await page.click('button[data-sub="alice"]');
    await page.waitForURL(`${live.server.base}/console/batches`);
    const words = page.locator('[data-testid=no-console]');
    await words.waitFor();
    const text = await words.innerText();
    assert.match(text, /The operations console is for the people who run changeflow\. It needs an operations permission, and your account alice has none\./);
    assert.match(text, /If you need it, ask the team that runs changeflow\./);
    assert.doesNotMatch(await page.locator('main').innerText(), /Access denied/);
    assert.equal(await words.locator('a[href="/targets"]').count(), 1);
    assert.equal(await words.locator('a[href="/requests"]').count(), 1);
    assert.equal(await page.locator('header nav a[href="/console"]').count(), 0, 'no Operations tab');
    await words.locator('a[href="/requests"]').click();
    await page.waitForURL(`${live.server.base}/requests`);
    await page.locator('[data-testid=my-requests], main p.muted').first().waitFor();
    await page.context().close();

    // The binding files on main hold exactly what the database has in effect.
    assert.deepEqual(await mainMatchesDatabase(live.server, 'billing-dashboard'), ['bob tg-bob-held']);
    assert.deepEqual(await mainMatchesDatabase(live.server, 'payments-db-readonly'), []);
  });
});
