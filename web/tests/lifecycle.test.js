// Browser tests of the lifecycle after "in effect" (docs/webapp.md,
// "Giving access back, withdrawing"): a person gives an access back and
// follows its removal to "removed, you can ask again"; withdraws a request
// that waits for its approval; reads a refused withdrawal in words; an
// operator sees a revocation in the console, follows it from its grant and
// re-triggers one whose removal failed. Against the real binary and its
// simulators. Run: npm test --prefix web.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { launchBrowser, newPage, renewalFilledIn, repoRoot, skipReason, sqlite, sqliteSkipReason, startServer } from './harness.js';

const skip = skipReason();
const noSqlite = skip ? '' : sqliteSkipReason();
const update = process.env.CHANGEFLOW_UPDATE_SCREENSHOTS === '1';

/** shot writes docs/screenshots/<name>.png when asked to
 * (CHANGEFLOW_UPDATE_SCREENSHOTS=1), else under web/tests/artifacts. */
async function shot(page, name) {
  const dir = update ? join(repoRoot, 'docs', 'screenshots') : join(repoRoot, 'web', 'tests', 'artifacts');
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, `${name}.png`), fullPage: true });
}

/** control posts to a simulator's control API and wants 200. */
async function control(server, path, body) {
  const r = await fetch(`${server.sim}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body ?? {}),
  });
  assert.equal(r.status, 200, `${path}: ${r.status} ${await r.text()}`);
  return r;
}

/** approvalOf waits for operationId's approval form in the simulator. */
async function approvalOf(server, operationId, status = 'PENDING') {
  for (const deadline = Date.now() + 20000; Date.now() < deadline; ) {
    const list = await (await fetch(`${server.sim}/approval/_control/approvals`)).json();
    const form = list.items.find((a) => a.operationId === operationId && (!status || a.status === status));
    if (form) return form;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`no ${status} approval form for ${operationId}`);
}

/** submit posts a request as account straight to the API. */
async function submit(server, account, operationId, targetKey, reason) {
  const r = await fetch(`${server.base}/api/requests`, {
    method: 'POST',
    headers: { 'X-Auth-Request-User': account, 'Idempotency-Key': operationId, 'Content-Type': 'application/json' },
    body: JSON.stringify({ targetKey, reason }),
  });
  assert.equal(r.status, 202, await r.text());
}

/** inEffect submits and approves a request and waits until it is in
 * effect (the status read, as the page would see it). */
async function inEffect(server, account, operationId, targetKey) {
  await submit(server, account, operationId, targetKey, 'lifecycle test');
  const form = await approvalOf(server, operationId);
  await control(server, `/approval/_control/approvals/${form.approvalId}/approve`);
  await statusIs(server, account, operationId, 'VALIDATED');
}

/** statusIs polls the status read until the request reaches status. */
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

describe('giving access back and withdrawing, in a real browser', { skip: skip || false }, () => {
  let server;
  let chrome;
  before(async () => {
    // The scheduled expiry scan waits longer than any test, so the
    // console's manual scan is the one that finds the expired grant.
    server = await startServer({ applyLimit: 100, extra: 'expiry:\n  interval: 1h\n' });
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
    await server?.stop();
  });

  it('alice gives her access back after confirming, and the page follows the removal to "removed, you can ask again"', async () => {
    const id = 'web-give-back-1';
    await inEffect(server, 'alice', id, 'billing-dashboard');
    const page = await newPage(chrome.browser, server.base, 'alice');
    const posts = [];
    page.on('request', (r) => r.method() === 'POST' && posts.push(new URL(r.url()).pathname));
    await page.goto(`/requests/${id}`);
    const detail = page.locator('[data-testid=request-detail]');
    await detail.locator('.status.ok', { hasText: 'In effect' }).waitFor();
    assert.match(await detail.innerText(), /you have access until .*It ends on its own then/);
    const giveBack = page.locator('[data-testid=give-back]');
    assert.equal(await page.locator('[data-testid=withdraw]').count(), 0, 'nothing to withdraw once in effect');

    // Asked first; a cancel sends nothing.
    await giveBack.getByRole('button', { name: 'Give back access' }).click();
    assert.match(await giveBack.innerText(), /Give back your access to Billing dashboard now\? It ends once the removal is deployed/);
    await giveBack.getByRole('button', { name: 'Cancel' }).click();
    assert.deepEqual(posts, [], 'nothing is sent before the confirmation');
    await giveBack.getByRole('button', { name: 'Give back access' }).click();
    await shot(page, 'give-back');
    await giveBack.getByRole('button', { name: 'Yes, give back access' }).click();
    const done = page.locator('[data-testid=done]');
    await done.waitFor();
    assert.match(await done.innerText(), /^Your access is being given back: it is being removed from the access file/);
    assert.deepEqual(posts, [`/api/requests/${id}/revoke`], 'exactly one POST');

    // The page follows the removal through its MR and deployment by itself.
    await detail.locator('.status', { hasText: 'Access removed; you can ask again' }).waitFor({ timeout: 90000 });
    const text = await detail.innerText();
    assert.match(text, /Your access was removed on [A-Z][a-z]{2} \d+, \d{4}, \d\d:\d\d [AP]M UTC; you can ask again/);
    assert.match(await detail.locator('[data-testid=removed-on]').innerText(), /UTC/);
    assert.equal(await detail.locator('[data-testid=request-again]').getAttribute('href'), `/request/billing-dashboard?again=${id}`);
    assert.equal(await page.locator('[data-testid=give-back]').count(), 0, 'nothing left to give back');
    assert.equal(await detail.locator('[data-testid=access-until]').count(), 0);
    await shot(page, 'request-revoked');

    // The removal is a request of alice's own, linked both ways.
    await detail.locator('[data-testid=revocation-link]').click();
    await page.waitForURL(`**/requests/${id}~revoke`);
    await page.locator('h1', { hasText: 'Removing access to Billing dashboard' }).waitFor();
    const removal = page.locator(`[data-testid=request-detail][data-operation-id="${id}~revoke"]`);
    await removal.waitFor();
    assert.match(await removal.innerText(), /You gave it back\./);
    assert.equal(await removal.locator('[data-testid=grant-link]').getAttribute('href'), `/requests/${id}`);

    // "My requests" lists both, the removal marked as one.
    await page.goto('/requests');
    const grantRow = page.locator(`[data-testid=my-requests] tr[data-operation-id="${id}"]`);
    const removalRow = page.locator(`[data-testid=my-requests] tr[data-operation-id="${id}~revoke"]`);
    await grantRow.waitFor();
    assert.match(await grantRow.innerText(), /Access removed; you can ask again/);
    assert.equal(await grantRow.locator('[data-testid=removal]').count(), 0);
    assert.match(await removalRow.locator('[data-testid=removal]').innerText(), /removal of this access/);
    await page.context().close();
  });

  it('bob withdraws a request that waits for its approval; the approval is withdrawn too, and a refused withdrawal reads in words', async () => {
    const id = 'web-withdraw-1';
    await submit(server, 'bob', id, 'payments-db-readonly', 'withdraw test');
    await approvalOf(server, id);
    const page = await newPage(chrome.browser, server.base, 'bob');
    const posts = [];
    page.on('request', (r) => r.method() === 'POST' && posts.push(new URL(r.url()).pathname));
    await page.goto(`/requests/${id}`);
    const detail = page.locator('[data-testid=request-detail]');
    await detail.locator('.status', { hasText: 'Waiting for approval' }).waitFor();
    assert.equal(await page.locator('[data-testid=give-back]').count(), 0, 'nothing to give back before it is in effect');
    const withdraw = page.locator('[data-testid=withdraw]');
    await withdraw.getByRole('button', { name: 'Withdraw' }).click();
    assert.match(await withdraw.innerText(), /Withdraw your request for Payments DB \(read-only\)\? It will not take effect/);
    assert.deepEqual(posts, [], 'nothing is sent before the confirmation');
    await withdraw.getByRole('button', { name: 'Yes, withdraw' }).click();
    const done = page.locator('[data-testid=done]');
    await done.waitFor();
    assert.equal(await done.innerText(), 'Withdrawn: nothing of this request takes effect.');
    assert.deepEqual(posts, [`/api/requests/${id}/withdraw`], 'exactly one POST');
    // "Withdrawn", not the "Closed" of the other ends (nor of a target).
    await detail.locator('.status', { hasText: /^Withdrawn$/ }).waitFor();
    assert.match(await detail.innerText(), /You withdrew this request\. Request again if you need access after all\./);
    assert.equal(await page.locator('[data-testid=withdraw]').count(), 0, 'nothing left to withdraw');
    // The approval system was told: its form is withdrawn.
    await approvalOf(server, id, 'WITHDRAWN');

    // Too late to withdraw: the server's 409, in words. Faked, because a
    // real one needs a batch round to claim the request between the look
    // and the click.
    const late = 'web-withdraw-2';
    await submit(server, 'bob', late, 'billing-dashboard', 'withdraw too late');
    await approvalOf(server, late);
    let answer = {
      code: 'REQUEST_IN_PROGRESS',
      message: 'The request was already taken into batch 7, whose merge request is under way; it can no longer be withdrawn. Once it takes effect you can give the access back.',
    };
    await page.route(`**/api/requests/${late}/withdraw`, (route) =>
      route.fulfill({ status: 409, contentType: 'application/json', body: JSON.stringify({ ...answer, data: null }) }),
    );
    await page.goto(`/requests/${late}`);
    await detail.locator('.status', { hasText: 'Waiting for approval' }).waitFor();
    const w2 = page.locator('[data-testid=withdraw]');
    await w2.getByRole('button', { name: 'Withdraw' }).click();
    await w2.getByRole('button', { name: 'Yes, withdraw' }).click();
    const refusal = w2.locator('.note.error');
    await refusal.waitFor();
    assert.equal(await refusal.innerText(), answer.message);
    // A merge that won the race: what to do, without the API's path.
    answer = { code: 'ALREADY_IN_EFFECT', message: `The change was merged before it could be withdrawn and takes effect. To end the access, give it back (POST /api/requests/${late}/revoke).` };
    await w2.getByRole('button', { name: 'Withdraw' }).click();
    await w2.getByRole('button', { name: 'Yes, withdraw' }).click();
    await refusal.filter({ hasText: 'no longer' }).waitFor();
    assert.equal(
      await refusal.innerText(),
      'It can no longer be withdrawn: the change was merged and takes effect. Once it is in effect, you can give the access back on this page.',
    );
    assert.doesNotMatch(await page.locator('main').innerText(), /POST \/api|ALREADY_IN_EFFECT/);
    await page.context().close();
  });

  it('an operator follows a grant to its revocation in the console and re-triggers the removal that failed; it is then removed', async () => {
    const id = 'web-revoke-failed-1';
    await inEffect(server, 'adam', id, 'billing-dashboard');
    // The removal's check pipeline fails: the revocation stops in
    // REVOKE_FAILED, the access still granted.
    await control(server, '/gitlab/_control/pipelines', { outcome: 'fail', count: 1 });
    const given = await fetch(`${server.base}/api/requests/${id}/revoke`, { method: 'POST', headers: { 'X-Auth-Request-User': 'adam' } });
    assert.equal(given.status, 202);
    await statusIs(server, 'adam', id, 'REVOKE_FAILED');

    // The owner reads that the access is still theirs.
    const owner = await newPage(chrome.browser, server.base, 'adam');
    await owner.goto(`/requests/${id}`);
    const od = owner.locator('[data-testid=request-detail]');
    await od.locator('.status.bad', { hasText: 'Removing the access stopped; it is still granted' }).waitFor();
    assert.match(await od.innerText(), /Removing your access stopped, so you still have it/);
    await owner.context().close();

    const page = await newPage(chrome.browser, server.base, 'olivia');
    await page.goto(`/console/requests/${id}`);
    const detail = page.locator('[data-testid=ops-request]');
    const rev = detail.locator('[data-testid=revocation]');
    await rev.waitFor();
    assert.match(await rev.innerText(), new RegExp(`${id}~revoke`));
    assert.match(await rev.innerText(), /Removing the access stopped; it is still granted — given back by its owner GIVEN_BACK/);
    await rev.locator('a').click();
    await page.waitForURL(`**/console/requests/${id}~revoke`);
    const of = detail.locator('[data-testid=revocation-of]');
    await of.waitFor();
    assert.match(await of.innerText(), new RegExp(`^${id} — given back by its owner GIVEN_BACK`));
    const retrigger = page.locator('[data-testid=retrigger]');
    await retrigger.waitFor({ timeout: 20000 });
    assert.match(await detail.innerText(), /This is a revocation: until it is re-triggered and deployed, the entry stays in the access file/);
    await retrigger.getByRole('button', { name: 'Re-trigger' }).click();
    await retrigger.getByRole('button', { name: 'Yes, re-trigger' }).click();
    const done = detail.locator('[data-testid=done]');
    await done.waitFor();
    assert.match(await done.innerText(), /^Re-triggered: \w+ runs now \(it had stopped at \w+\)\.$/);
    await statusIs(server, 'adam', id, 'REVOKED');
    await detail.locator('dd .status', { hasText: 'Access removed; you can ask again' }).first().waitFor({ timeout: 20000 });
    await page.context().close();
  });

  it('an operator runs the expiry scan from the console after confirming: an expired grant is found and removed', { skip: noSqlite || false }, async () => {
    const id = 'web-expired-1';
    await inEffect(server, 'olivia', id, 'payments-db-readonly');
    // Its time is up (the database clock decides); only the operator's
    // scan runs before the test ends.
    sqlite(server.db, `UPDATE binding SET expires_at = '2020-01-01 00:00:00.000' WHERE operation_id = '${id}'`);
    const page = await newPage(chrome.browser, server.base, 'olivia');
    const posts = [];
    page.on('request', (r) => r.method() === 'POST' && posts.push(new URL(r.url()).pathname));
    await page.goto('/console/batches');
    const scan = page.locator('[data-testid=run-expiry-scan]');
    await scan.getByRole('button', { name: 'Run expiry scan now' }).click();
    assert.match(await scan.innerText(), /Look for accesses whose time is up now, and start removing each/);
    assert.deepEqual(posts, [], 'nothing is sent before the confirmation');
    await scan.getByRole('button', { name: 'Yes, run expiry scan now' }).click();
    const done = page.locator('[data-testid=done]');
    await done.waitFor();
    assert.equal(await done.innerText(), 'The expiry scan found 1 expired access(es) and started removing 1.');
    assert.deepEqual(posts, ['/ops/expiry/scan']);
    const gone = await statusIs(server, 'olivia', id, 'REVOKED');
    assert.equal(gone.revocationId, `${id}~revoke`);
    await page.goto(`/console/requests/${id}~revoke`);
    assert.match(await page.locator('[data-testid=revocation-of]').innerText(), /expired \(the expiry scan\) EXPIRED/);
    // Nothing else has expired: a second scan says so.
    await page.goto('/console/batches');
    await scan.getByRole('button', { name: 'Run expiry scan now' }).click();
    await scan.getByRole('button', { name: 'Yes, run expiry scan now' }).click();
    await done.waitFor();
    assert.equal(await done.innerText(), 'The expiry scan found no access whose time is up.');
    await page.context().close();
  });

  it('an operator revokes someone\'s access from the console with a reason; without one the server\'s words say why not', async () => {
    const id = 'web-ops-revoke-1';
    await inEffect(server, 'alice', id, 'payments-db-readonly');
    const page = await newPage(chrome.browser, server.base, 'olivia');
    const posts = [];
    page.on('request', (r) => r.method() === 'POST' && posts.push(new URL(r.url()).pathname));
    await page.goto(`/console/requests/${id}`);
    const card = page.locator('[data-testid=ops-revoke-card]');
    await card.waitFor();
    const revoke = card.locator('[data-testid=ops-revoke]');
    await revoke.getByRole('button', { name: 'Revoke access' }).click();
    assert.match(await revoke.innerText(), /Revoke alice's access now\? It ends once the removal is deployed\./);
    assert.deepEqual(posts, [], 'nothing is sent before the confirmation');
    // No reason: the server refuses, in its words.
    await revoke.getByRole('button', { name: 'Yes, revoke access' }).click();
    const refusal = revoke.locator('.note.error');
    await refusal.waitFor();
    assert.match(await refusal.innerText(), /^reason is required: say why the access is revoked/);
    await card.locator('input[name=revoke-reason]').fill('left the team');
    await revoke.getByRole('button', { name: 'Revoke access' }).click();
    await revoke.getByRole('button', { name: 'Yes, revoke access' }).click();
    const done = page.locator('[data-testid=done]');
    await done.waitFor();
    assert.equal(await done.innerText(), `Revoked: ${id}~revoke removes the entry; the access ends once that is deployed.`);
    assert.deepEqual(posts, [`/ops/requests/${id}/revoke`, `/ops/requests/${id}/revoke`]);
    await page.locator('[data-testid=revocation]').waitFor();
    assert.match(await page.locator('[data-testid=revocation]').innerText(), /revoked by an operator OPERATOR: “left the team”/);
    assert.equal(await page.locator('[data-testid=ops-revoke-card]').count(), 0, 'nothing left to revoke');
    await statusIs(server, 'alice', id, 'REVOKED');
    await page.context().close();
  });

  it('alice renews an access in effect once its renewal window is open: the form opens filled in for that target and submits a renewal', async () => {
    // A one-day grant: its renewal window (the last quarter, at least a
    // day) is open from the start.
    const id = 'web-renew-1';
    const r = await fetch(`${server.base}/api/requests`, {
      method: 'POST',
      headers: { 'X-Auth-Request-User': 'alice', 'Idempotency-Key': id, 'Content-Type': 'application/json' },
      body: JSON.stringify({ targetKey: 'billing-dashboard', reason: 'month-end close', days: 1 }),
    });
    assert.equal(r.status, 202, await r.text());
    await control(server, `/approval/_control/approvals/${(await approvalOf(server, id)).approvalId}/approve`);
    const granted = await statusIs(server, 'alice', id, 'VALIDATED');
    assert.ok(granted.renewFrom && Date.parse(granted.renewFrom) <= Date.now(), `renewFrom ${granted.renewFrom}`);

    const page = await newPage(chrome.browser, server.base, 'alice');
    await page.goto(`/requests/${id}`);
    const renew = page.locator('[data-testid=renew]');
    await renew.waitFor();
    assert.match(await page.locator('[data-testid=request-actions]').innerText(), /Your access ends on .* UTC\. Renew it to keep it longer/);
    await renew.click();
    await page.waitForURL(`**/request/billing-dashboard?renew=${id}`);
    await renewalFilledIn(page);
    // Renew only opens the form: nothing is asked for until it is submitted.
    assert.equal((await statusIs(server, 'alice', id, 'VALIDATED')).renewal, undefined, 'a renewal before the form was submitted');
    assert.match(await page.locator('h1').innerText(), /^Renew access$/);
    assert.match(await page.locator('[data-testid=renewing]').innerText(), /Renewing your access, which ends on .*until it is in effect your access stays as it is/);
    assert.equal(await page.inputValue('textarea[name=reason]'), 'month-end close');
    assert.equal(await page.inputValue('input[name=days]'), '1');
    await page.getByRole('button', { name: 'Submit renewal' }).click();
    const sent = page.locator('[data-testid=submitted]');
    await sent.waitFor();
    const renewal = await page.getAttribute('form', 'data-operation-id');
    assert.notEqual(renewal, id, 'a renewal is a request of its own');
    // The access it renews is unchanged meanwhile, and names its renewal.
    const still = await statusIs(server, 'alice', id, 'VALIDATED');
    assert.equal(still.expiresAt, granted.expiresAt);
    assert.equal(still.renewal?.operationId, renewal);
    assert.equal(still.renewFrom, undefined, 'a grant being renewed offers renewing again');
    await page.goto(`/requests/${id}`);
    await page.locator('[data-testid=renewal-link]').waitFor();
    assert.equal(await page.locator('[data-testid=renew]').count(), 0);
    assert.equal(await page.locator('[data-testid=give-back]').count(), 1, 'giving back ends the access while a renewal runs');
    await page.locator('[data-testid=renewal-link]').click();
    await page.waitForURL(`**/requests/${renewal}`);
    await page.locator('[data-testid=renews-link]').waitFor();
    assert.match(await page.locator('h1').innerText(), /^Renewing access to /);
    const wr = page.locator('[data-testid=withdraw]');
    await wr.getByRole('button', { name: 'Withdraw' }).click();
    assert.match(await wr.innerText(), /Withdraw your renewal for Billing dashboard\? Your access stays as it is/);
    await wr.getByRole('button', { name: 'Cancel' }).click();

    // Approved, merged and deployed: the renewal is the access in effect,
    // until its own, later expiry; the grant's page says the renewal is
    // in effect.
    await control(server, `/approval/_control/approvals/${(await approvalOf(server, renewal)).approvalId}/approve`);
    const renewed = await statusIs(server, 'alice', renewal, 'VALIDATED');
    assert.ok(Date.parse(renewed.expiresAt) > Date.parse(granted.expiresAt), `renewed until ${renewed.expiresAt}, was ${granted.expiresAt}`);
    assert.equal((await statusIs(server, 'alice', id, 'VALIDATED')).renewal?.status, 'VALIDATED');
    await page.goto(`/requests/${id}`);
    await page.locator('[data-testid=renewal-link]').waitFor();
    assert.equal(await page.locator('[data-testid=give-back]').count(), 0, 'the renewed grant is acted on through its renewal');
    await page.goto(`/requests/${renewal}`);
    await page.locator('[data-testid=give-back]').waitFor();

    // The renewal renewed in turn, approved and deployed: both older pages
    // say the access was renewed and continues under the newest renewal,
    // until its expiry — not "In effect" until their own — link to it, and
    // offer neither give back nor renew (the server refuses both there).
    // A renewal extends from the access's current end, so the first one
    // runs until two days from now and its own window (its last day) opens
    // tomorrow: the access is moved to 23 hours before its end, as a day
    // passing would.
    const moved = sqlite(server.db, `UPDATE binding SET expires_at = strftime('%Y-%m-%d %H:%M:%f', 'now', '+23 hours') WHERE operation_id = '${renewal}' AND status = 'VALIDATED'; SELECT changes();`).trim();
    assert.equal(moved, '1', 'the first renewal is the access in effect');
    const second = 'web-renew-2';
    await submit(server, 'alice', second, 'billing-dashboard', 'still needed');
    await control(server, `/approval/_control/approvals/${(await approvalOf(server, second)).approvalId}/approve`);
    const carrier = await statusIs(server, 'alice', second, 'VALIDATED');
    assert.equal(carrier.renews, renewal, 'the second renewal renews the first');
    // The binary counts both renewals in effect, once each (after their
    // commits, so read until the count arrives; never more).
    let inEffect = 0;
    for (const deadline = Date.now() + 20000; Date.now() < deadline && inEffect < 2; ) {
      const text = await (await fetch(`${server.base}/metrics`)).text();
      inEffect = Number(/^changeflow_renewals_total\{outcome="IN_EFFECT"\} (\d+)$/m.exec(text)?.[1] ?? 0);
      if (inEffect < 2) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(inEffect, 2, 'changeflow_renewals_total{outcome="IN_EFFECT"}');
    for (const old of [id, renewal]) {
      const v = await statusIs(server, 'alice', old, 'VALIDATED');
      assert.deepEqual(v.renewal, { operationId: second, status: 'VALIDATED', expiresAt: carrier.expiresAt }, `${old}'s renewal`);
      await page.goto(`/requests/${old}`);
      await page.locator('[data-testid=carried-by]').waitFor();
      const detail = page.locator('[data-testid=request-detail]');
      assert.match(await page.locator('[data-testid=renewed]').innerText(), /^Renewed; the access continues under a later request$/);
      assert.doesNotMatch(await detail.innerText(), /In effect/, `${old}'s page says "In effect"`);
      assert.equal(await page.getAttribute('[data-testid=renewal-link]', 'href'), `/requests/${second}`);
      assert.match(await page.locator('[data-testid=renewal]').innerText(), /your access continues under the request that carries it now; give it back or renew it there/);
      assert.match(await page.locator('[data-testid=todo]').innerText(), /^Nothing here: your access was renewed and continues under a later request, now until .* UTC\. Give it back or renew it there\.$/);
      assert.equal(await page.getAttribute('[data-testid=access-until] time', 'datetime'), carrier.expiresAt, 'the access until the carrier\'s expiry');
      assert.equal(await page.locator('[data-testid=give-back]').count(), 0, `${old} offers giving back an access it no longer carries`);
      assert.equal(await page.locator('[data-testid=renew]').count(), 0, `${old} offers renewing an access it no longer carries`);
      await page.locator('[data-testid=carried-by] a').click();
      await page.waitForURL(`**/requests/${second}`);
      await page.locator('[data-testid=give-back]').waitFor();
    }

    // Before the window opens the page says from when, and offers no Renew
    // (faked: a real one needs a grant older than a day; the faked read is
    // of an access in effect with no renewal).
    const later = new Date(Date.now() + 5 * 86400000).toISOString().replace(/\.\d+Z$/, 'Z');
    await page.route(`**/api/requests/${id}`, async (route) => {
      const real = await (await route.fetch()).json();
      await route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ ...real, data: { ...real.data, status: 'VALIDATED', renewFrom: later, renewal: undefined } }) });
    });
    await page.route(`**/api/requests/${id}/events`, (route) => route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ code: 'RETRY_LATER', message: 'busy', data: null }) }));
    await page.goto(`/requests/${id}`);
    await page.locator('[data-testid=renew-from]').waitFor();
    assert.match(await page.locator('[data-testid=renew-from]').innerText(), /^You can renew it from .* UTC, before it ends\.$/);
    assert.equal(await page.locator('[data-testid=renew]').count(), 0);
    await page.context().close();
  });

  it('bob withdraws a renewal and his access stays as it was; giving the access back while a renewal waits ends both', async () => {
    // A one-day grant: its renewal window is open from the start.
    const id = 'web-renew-limits-1';
    const target = 'payments-db-readonly';
    const post = (opId, body) =>
      fetch(`${server.base}/api/requests`, {
        method: 'POST',
        headers: { 'X-Auth-Request-User': 'bob', 'Idempotency-Key': opId, 'Content-Type': 'application/json' },
        body: JSON.stringify({ targetKey: target, reason: 'quarterly audit', days: 1, ...body }),
      });
    assert.equal((await post(id)).status, 202);
    await control(server, `/approval/_control/approvals/${(await approvalOf(server, id)).approvalId}/approve`);
    const granted = await statusIs(server, 'bob', id, 'VALIDATED');
    const renewal = 'web-renew-limits-r1';
    assert.equal((await post(renewal)).status, 202);
    await approvalOf(server, renewal);

    const page = await newPage(chrome.browser, server.base, 'bob');
    const posts = [];
    page.on('request', (r) => r.method() === 'POST' && posts.push(new URL(r.url()).pathname));
    await page.goto(`/requests/${renewal}`);
    const detail = page.locator('[data-testid=request-detail]');
    await page.locator('[data-testid=renews-link]').waitFor();
    const withdraw = page.locator('[data-testid=withdraw]');
    await withdraw.getByRole('button', { name: 'Withdraw' }).click();
    assert.match(await withdraw.innerText(), /Withdraw your renewal for .*\? Your access stays as it is and still ends when it was going to/);
    assert.deepEqual(posts, [], 'nothing is sent before the confirmation');
    await withdraw.getByRole('button', { name: 'Yes, withdraw' }).click();
    const done = page.locator('[data-testid=done]');
    await done.waitFor();
    assert.equal(await done.innerText(), 'Withdrawn: your access stays as it was, until it ends as before.');
    assert.deepEqual(posts, [`/api/requests/${renewal}/withdraw`], 'exactly one POST');
    await detail.locator('.status', { hasText: /^Withdrawn$/ }).waitFor();
    assert.equal(await page.locator('[data-testid=withdraw]').count(), 0, 'nothing left to withdraw');
    await approvalOf(server, renewal, 'WITHDRAWN');
    // The access is exactly as it was: in effect, the same expiry.
    const after = await statusIs(server, 'bob', id, 'VALIDATED');
    assert.equal(after.expiresAt, granted.expiresAt);
    assert.equal(after.renewal, undefined);

    // A second renewal waits for its approval; the access is given back
    // from the grant's page: the renewal is closed with it.
    const second = 'web-renew-limits-r2';
    assert.equal((await post(second)).status, 202);
    await approvalOf(server, second);
    await page.goto(`/requests/${id}`);
    await page.locator('[data-testid=renewal-link]').waitFor();
    const giveBack = page.locator('[data-testid=give-back]');
    // A renewal too far along: the server's refusal reads in words chosen
    // by its data.reason, never by its message, which here says something
    // else on purpose (faked: the real ones need the renewal's MR, merge
    // or failure to happen between the look and the click).
    for (const [reason, words] of [
      ['renewal_has_change', /^Its renewal already has its own change under way\. Withdraw the renewal first/],
      ['renewal_stopped', /^Its renewal stopped on a failure and waits for an operator\./],
      ['renewal_merging', /^Its renewal is being merged and can no longer be stopped\./],
      ['renewal_expired', /^Your access has already expired, and its renewal is being closed\./],
    ]) {
      const refused = {
        code: 'REQUEST_IN_PROGRESS',
        message: 'The renewal stopped on a failure; withdraw it first (POST /api/requests/x/withdraw).',
        data: { reason },
      };
      await page.route(`**/api/requests/${id}/revoke`, (route) =>
        route.fulfill({ status: 409, contentType: 'application/json', body: JSON.stringify(refused) }),
      );
      await giveBack.getByRole('button', { name: 'Give back access' }).click();
      await giveBack.getByRole('button', { name: 'Yes, give back access' }).click();
      await giveBack.locator('.note.error').filter({ hasText: words }).waitFor();
      await page.unroute(`**/api/requests/${id}/revoke`);
    }
    assert.doesNotMatch(await page.locator('main').innerText(), /POST \/api|REQUEST_IN_PROGRESS/);
    await giveBack.getByRole('button', { name: 'Give back access' }).click();
    assert.match(await giveBack.innerText(), /Give back your access to .* now and drop its renewal\?/);
    await giveBack.getByRole('button', { name: 'Yes, give back access' }).click();
    await done.waitFor();
    assert.match(await done.innerText(), /^Your access is being given back/);
    await statusIs(server, 'bob', id, 'REVOKED');
    const cut = await statusIs(server, 'bob', second, 'CLOSED');
    assert.equal(cut.step.name, 'RENEW_REVOKED');
    await approvalOf(server, second, 'WITHDRAWN');
    await page.goto(`/requests/${second}`);
    await detail.locator('.status', { hasText: /^Closed$/ }).waitFor();
    assert.match(await detail.innerText(), /Closed: the access was given back or revoked before the renewal took effect/);
    await page.context().close();
  });

  it('the console lists expired entries changeflow did not write, per file, and says it will not remove them', async () => {
    // Added by hand on main: one expired, one live.
    const file = 'bindings/prod-console.yaml';
    const content = '- subject: "hal"\n  expiresAt: "2020-01-02T03:04:05Z"\n  operationId: "added-by-hand"\n' +
      '- subject: "lena"\n  expiresAt: "2099-01-01T00:00:00Z"\n  operationId: "also-by-hand"\n';
    const commit = await fetch(`${server.sim}/gitlab/api/v4/projects/1/repository/commits`, {
      method: 'POST',
      headers: { 'PRIVATE-TOKEN': 'local-maintainer-token', 'Content-Type': 'application/json' },
      body: JSON.stringify({ branch: 'main', commit_message: 'hand edit', actions: [{ action: 'create', file_path: file, content }] }),
    });
    assert.equal(commit.status, 201, await commit.text());

    const page = await newPage(chrome.browser, server.base, 'olivia');
    await page.goto('/console');
    await page.getByRole('link', { name: 'Expired, not ours' }).click();
    const view = page.locator('[data-testid=unowned]');
    const card = view.locator('.card[data-target=prod-console]');
    await card.waitFor();
    assert.match(await view.innerText(), /changeflow will not remove them: it removes only the entries its own requests wrote/);
    assert.match(await card.innerText(), /Production console/);
    const rows = card.locator('tbody tr');
    assert.equal(await rows.count(), 1, 'the live entry is not listed');
    const hal = card.locator('tr[data-subject=hal]');
    assert.match(await hal.innerText(), /added-by-hand/);
    assert.match(await hal.innerText(), /Jan 2, 2020, 03:04 AM UTC/);
    assert.match(await hal.innerText(), /no request of changeflow’s has this operationId/);
    // The other files were read and hold nothing to decide.
    assert.match(await view.locator('[data-testid=unowned-clean]').innerText(), /Nothing to decide in: .*Billing dashboard/);
    await shot(page, 'console-unowned');
    await page.context().close();
  });
});
