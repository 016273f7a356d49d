// Browser tests of the step bar and of words that must follow the live
// state (docs/webapp.md, "The step bar"): the bar is the server's, decided
// from the request's real history, so in the legacy flow a failed check
// pipeline fails the checks and never shows the approval (never asked
// for) done; a grant given back reads "Access removed" on its page and in
// the console, never "In effect"; the "being given back" banner goes once
// the access is removed, without a reload; a renewal in effect no longer
// says the access "stays as it is until this renewal is in effect".
// Against the real binary and its simulators, in both flows. Run: npm
// test --prefix web.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { mainMatchesDatabase, newPage, serverAndBrowser, skipReason, sqliteSkipReason } from './harness.js';

const skip = skipReason() || sqliteSkipReason();
const target = 'billing-dashboard';

async function post(url, body, headers = {}) {
  const r = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body ?? {}) });
  return { status: r.status, json: await r.json().catch(() => null) };
}

async function until(what, fn, timeout = 90000) {
  let last;
  for (const deadline = Date.now() + timeout; Date.now() < deadline; ) {
    last = await fn();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.fail(`never: ${what}`);
}

async function submit(server, account, operationId, body) {
  const r = await post(`${server.base}/api/requests`, { targetKey: target, reason: 'step bar test', ...body }, {
    'X-Auth-Request-User': account,
    'Idempotency-Key': operationId,
  });
  assert.equal(r.status, 202, JSON.stringify(r.json));
}

async function approve(server, operationId) {
  const form = await until(`${operationId}'s approval form`, async () => {
    const list = await (await fetch(`${server.sim}/approval/_control/approvals`)).json();
    return list.items.find((a) => a.operationId === operationId && a.status === 'PENDING');
  });
  assert.equal((await post(`${server.sim}/approval/_control/approvals/${form.approvalId}/approve`)).status, 200);
}

async function view(server, account, operationId) {
  const r = await fetch(`${server.base}/api/requests/${encodeURIComponent(operationId)}`, { headers: { 'X-Auth-Request-User': account } });
  return (await r.json()).data;
}

async function statusIs(server, account, operationId, status) {
  let last;
  return until(
    `${operationId} at ${status}`,
    async () => {
      last = await view(server, account, operationId);
      return last?.status === status ? last : null;
    },
    90000,
  ).catch(() => assert.fail(`${operationId} never reached ${status}; last ${JSON.stringify(last)}`));
}

/** bar reads a step bar on the page as "KEY:STATE …" from its items. */
async function bar(scope) {
  const items = scope.locator('[data-testid=progress] li');
  const out = [];
  for (let i = 0; i < (await items.count()); i++) {
    const li = items.nth(i);
    out.push(`${await li.getAttribute('data-key')}:${await li.getAttribute('data-state')}`);
  }
  return out.join(' ');
}

/** barIs waits until the bar in scope reads want (the page follows the
 * request by itself). */
async function barIs(scope, want, what) {
  let got = '';
  for (const deadline = Date.now() + 30000; Date.now() < deadline; ) {
    got = await bar(scope);
    if (got === want) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.fail(`${what}: the bar reads\n  ${got}\nwant\n  ${want}`);
}

/** labelOf is a step's words on the bar. */
async function labelOf(scope, key) {
  return (await scope.locator(`[data-testid=progress] li[data-key=${key}]`).innerText()).trim();
}

/** mainMatches: the binding file on main holds exactly the access the
 * database has in effect. */
async function mainMatches(server) {
  await mainMatchesDatabase(server, target);
}

describe('the step bar in the legacy flow, in a real browser', { skip: skip || false }, () => {
  const live = serverAndBrowser({ applyLimit: 100, approveFirst: false });

  it('a failed check pipeline fails the checks; the approval, never asked for, is not shown done', async () => {
    const id = 'steps-legacy-failed';
    assert.equal((await post(`${live.server.sim}/gitlab/_control/pipelines`, { outcome: 'fail', count: 1 })).status, 200);
    await submit(live.server, 'alice', id);
    const failed = await statusIs(live.server, 'alice', id, 'CREATE_FAILED');
    assert.equal(failed.step.name, 'CREATE_PIPELINE_FAILED');
    const want = 'PROPOSED:DONE CHECKS:FAILED APPROVAL:TODO MERGED:TODO DEPLOYED:TODO';

    const page = await newPage(live.chrome.browser, live.server.base, 'alice');
    await page.goto(`/requests/${id}`);
    const detail = page.locator('[data-testid=request-detail]');
    await barIs(detail, want, 'the request page');
    // The legacy flow's order: the change first, its approval after.
    assert.equal(await labelOf(detail, 'PROPOSED'), 'Change proposed');
    assert.equal(await detail.locator('[data-testid=progress] li.done').innerText(), 'Change proposed');
    assert.equal(await detail.locator('[data-testid=progress] li.failed').innerText(), 'Checks');
    assert.equal(await detail.locator('[data-testid=progress] li[data-key=APPROVAL]').getAttribute('class'), 'todo');
    await page.context().close();

    const ops = await newPage(live.chrome.browser, live.server.base, 'olivia');
    await ops.goto(`/console/requests/${id}`);
    const card = ops.locator('[data-testid=ops-request] .card').filter({ has: ops.locator('[data-testid=progress]') });
    await barIs(card, want, 'the console');
    await ops.context().close();
  });

  it('a legacy grant goes through its steps in its order to in effect, then given back to "Access removed"', async () => {
    const id = 'steps-legacy-grant';
    await submit(live.server, 'bob', id);
    await statusIs(live.server, 'bob', id, 'APPROVAL_SENT');
    const page = await newPage(live.chrome.browser, live.server.base, 'bob');
    await page.goto(`/requests/${id}`);
    const detail = page.locator('[data-testid=request-detail]');
    await barIs(detail, 'PROPOSED:DONE CHECKS:DONE APPROVAL:CURRENT MERGED:TODO DEPLOYED:TODO', 'with the approvers');
    await approve(live.server, id);
    await barIs(detail, 'PROPOSED:DONE CHECKS:DONE APPROVAL:DONE MERGED:DONE DEPLOYED:DONE', 'in effect');
    await detail.locator('.status.ok', { hasText: 'In effect' }).waitFor();

    const giveBack = page.locator('[data-testid=give-back]');
    await giveBack.getByRole('button', { name: 'Give back access' }).click();
    await giveBack.getByRole('button', { name: 'Yes, give back access' }).click();
    await detail.locator('.status', { hasText: 'Access removed; you can ask again' }).waitFor({ timeout: 90000 });
    await barIs(detail, 'PROPOSED:DONE CHECKS:DONE APPROVAL:DONE MERGED:DONE DEPLOYED:DONE REMOVED:DONE', 'removed');
    await page.context().close();
    await mainMatches(live.server);
  });
});

describe('the step bar and live words in the approve-first flow, in a real browser', { skip: skip || false }, () => {
  const live = serverAndBrowser({ applyLimit: 100 });

  it('a grant given back: the banner goes once the access is removed, without a reload; its page and the console say "Access removed"', async () => {
    const id = 'steps-give-back';
    await submit(live.server, 'alice', id);
    const page = await newPage(live.chrome.browser, live.server.base, 'alice');
    await page.goto(`/requests/${id}`);
    const detail = page.locator('[data-testid=request-detail]');
    await barIs(detail, 'APPROVAL:CURRENT PROPOSED:TODO CHECKS:TODO MERGED:TODO DEPLOYED:TODO', 'waiting for approval');
    await approve(live.server, id);
    await barIs(detail, 'APPROVAL:DONE PROPOSED:DONE CHECKS:DONE MERGED:DONE DEPLOYED:DONE', 'in effect');

    // A mark on the window: were the page reloaded, it would be gone.
    await page.evaluate(() => {
      window.stepsMark = 'not reloaded';
    });
    const giveBack = page.locator('[data-testid=give-back]');
    await giveBack.getByRole('button', { name: 'Give back access' }).click();
    await giveBack.getByRole('button', { name: 'Yes, give back access' }).click();
    const done = page.locator('[data-testid=done]');
    await done.waitFor();
    assert.match(await done.innerText(), /^Your access is being given back/);
    await detail.locator('.status', { hasText: 'Access removed; you can ask again' }).waitFor({ timeout: 90000 });
    await done.waitFor({ state: 'detached', timeout: 10000 });
    assert.equal(await page.evaluate(() => window.stepsMark), 'not reloaded', 'the page was reloaded');
    assert.doesNotMatch(await page.locator('main').innerText(), /being given back/);
    await barIs(detail, 'APPROVAL:DONE PROPOSED:DONE CHECKS:DONE MERGED:DONE DEPLOYED:DONE REMOVED:DONE', 'the grant removed');
    assert.equal(await labelOf(detail, 'REMOVED'), 'Access removed');
    assert.doesNotMatch(await detail.innerText(), /In effect/, 'a removed access reads "In effect"');

    // Its removal has a bar of its own: no approval, a removal proposed.
    await page.goto(`/requests/${id}~revoke`);
    const removal = page.locator(`[data-testid=request-detail][data-operation-id="${id}~revoke"]`);
    await barIs(removal, 'PROPOSED:DONE CHECKS:DONE MERGED:DONE REMOVED:DONE', 'the removal');
    assert.equal(await labelOf(removal, 'PROPOSED'), 'Removal proposed');
    await page.context().close();

    // The console's view of the grant: the same bar, the binding's real
    // state, and never "In effect" for this request.
    const ops = await newPage(live.chrome.browser, live.server.base, 'olivia');
    await ops.goto(`/console/requests/${id}`);
    const card = ops.locator('[data-testid=ops-request] .card').filter({ has: ops.locator('[data-testid=progress]') });
    await barIs(card, 'APPROVAL:DONE PROPOSED:DONE CHECKS:DONE MERGED:DONE DEPLOYED:DONE REMOVED:DONE', 'the console');
    const own = card.locator('dt', { hasText: "This request's status" }).locator('xpath=following-sibling::dd[1]');
    assert.equal((await own.innerText()).trim(), 'Access removed; you can ask again');
    const binding = card.locator('dt', { hasText: 'Binding' }).locator('xpath=following-sibling::dd[1]');
    assert.match(await binding.innerText(), /^Access removed; you can ask again/);
    assert.equal(await card.locator('.status', { hasText: 'In effect' }).count(), 0, 'the console says "In effect"');
    await ops.context().close();
    await mainMatches(live.server);
  });

  it('an operator revokes: the console banner goes once the access is removed, without a reload', async () => {
    const id = 'steps-ops-revoke';
    await submit(live.server, 'bob', id);
    await approve(live.server, id);
    await statusIs(live.server, 'bob', id, 'VALIDATED');
    const ops = await newPage(live.chrome.browser, live.server.base, 'olivia');
    await ops.goto(`/console/requests/${id}`);
    const revokeCard = ops.locator('[data-testid=ops-revoke-card]');
    await revokeCard.waitFor();
    await ops.evaluate(() => {
      window.stepsMark = 'not reloaded';
    });
    await revokeCard.locator('input[name=revoke-reason]').fill('left the team');
    const revoke = ops.locator('[data-testid=ops-revoke]');
    await revoke.getByRole('button', { name: 'Revoke access' }).click();
    await revoke.getByRole('button', { name: 'Yes, revoke access' }).click();
    const done = ops.locator('[data-testid=done]');
    await done.waitFor();
    assert.match(await done.innerText(), /^Revoked: /);
    await statusIs(live.server, 'bob', id, 'REVOKED');
    await done.waitFor({ state: 'detached', timeout: 10000 });
    assert.equal(await ops.evaluate(() => window.stepsMark), 'not reloaded', 'the page was reloaded');
    const card = ops.locator('[data-testid=ops-request] .card').filter({ has: ops.locator('[data-testid=progress]') });
    await barIs(card, 'APPROVAL:DONE PROPOSED:DONE CHECKS:DONE MERGED:DONE DEPLOYED:DONE REMOVED:DONE', 'the console');
    await ops.context().close();
    await mainMatches(live.server);
  });

  it('a renewal: "stays as it is until this renewal is in effect" only until it is; then the renewal says it carries the access', async () => {
    // A one-day grant: its renewal window is open from the start.
    const id = 'steps-renew-grant';
    await submit(live.server, 'adam', id, { days: 1 });
    await approve(live.server, id);
    await statusIs(live.server, 'adam', id, 'VALIDATED');
    const renewal = 'steps-renew-renewal';
    await submit(live.server, 'adam', renewal, { days: 1 });
    const waiting = await statusIs(live.server, 'adam', renewal, 'APPROVAL_SENT');
    assert.equal(waiting.renews, id, 'a renewal of the grant');

    const page = await newPage(live.chrome.browser, live.server.base, 'adam');
    await page.goto(`/requests/${renewal}`);
    const detail = page.locator('[data-testid=request-detail]');
    await barIs(detail, 'APPROVAL:CURRENT PROPOSED:TODO CHECKS:TODO MERGED:TODO DEPLOYED:TODO', 'the renewal waiting');
    const renews = detail.locator('dt', { hasText: 'Renews' }).locator('xpath=following-sibling::dd[1]');
    assert.equal((await renews.innerText()).trim(), 'your access in effect, which stays as it is until this renewal is in effect');

    await approve(live.server, renewal);
    await barIs(detail, 'APPROVAL:DONE PROPOSED:DONE CHECKS:DONE MERGED:DONE DEPLOYED:DONE', 'the renewal in effect');
    await detail.locator('.status.ok', { hasText: 'In effect' }).waitFor();
    assert.equal((await renews.innerText()).trim(), 'your earlier request; this renewal carries its access now');
    assert.doesNotMatch(await detail.innerText(), /stays as it is until this renewal is in effect/);

    // The grant it renewed: in effect, then renewed.
    await page.goto(`/requests/${id}`);
    await barIs(page.locator('[data-testid=request-detail]'), 'APPROVAL:DONE PROPOSED:DONE CHECKS:DONE MERGED:DONE DEPLOYED:DONE RENEWED:DONE', 'the renewed grant');
    await page.context().close();
    await mainMatches(live.server);
  });
});
