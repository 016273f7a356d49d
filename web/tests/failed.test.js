// Browser test of a failed request's page (docs/webapp.md): its check
// pipeline fails; the page names whom to contact — the ui.contact item —
// instead of an anonymous "the maintainers", and offers Withdraw: the
// owner gives up on it (its MR closed) and asks again at once. An
// operator closes another failed request from the console with a reason,
// and the console shows the runbook. billing-dashboard batches in the
// harness, so each failed request is the culprit its batch left stopped
// (its MR the batch's): the case a batch id once made a refusal. Against
// the real binary and its simulators; ends by comparing the binding file
// on main with the database. Run: npm test --prefix web.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { launchBrowser, newPage, skipReason, sqlite, sqliteSkipReason, startServer } from './harness.js';

const skip = skipReason() || sqliteSkipReason();
const contact = 'the platform team, #platform on chat';

async function post(url, body, headers = {}) {
  const r = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body ?? {}) });
  return { status: r.status, json: await r.json().catch(() => null) };
}

async function until(what, fn, timeout = 60000) {
  let last;
  for (const deadline = Date.now() + timeout; Date.now() < deadline; ) {
    last = await fn();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.fail(`never: ${what}`);
}

const gitlabHeaders = { 'PRIVATE-TOKEN': 'local-maintainer-token' };

/** approveWhenAsked approves id's form in the approval simulator. */
async function approveWhenAsked(server, id) {
  const form = await until(`an approval form for ${id}`, async () => {
    const list = await (await fetch(`${server.sim}/approval/_control/approvals`)).json();
    return list.items.find((a) => a.operationId === id && a.status === 'PENDING');
  });
  assert.equal((await post(`${server.sim}/approval/_control/approvals/${form.approvalId}/approve`)).status, 200);
}

async function statusOf(server, account, id) {
  const r = await fetch(`${server.base}/api/requests/${encodeURIComponent(id)}`, { headers: { 'X-Auth-Request-User': account } });
  return (await r.json()).data;
}

/** mrOf is the state of the MR id names (its batch's, on a batching
 * target), from the GitLab simulator's state. */
async function mrOf(server, account, id) {
  const iid = (await statusOf(server, account, id)).mr?.iid;
  assert.ok(iid, `${id} names an MR`);
  const state = await (await fetch(`${server.sim}/gitlab/_control/state`)).json();
  const mr = state.projects.flatMap((p) => p.merge_requests).find((m) => m.iid === iid);
  assert.ok(mr, `MR !${iid} is in GitLab`);
  return mr.state;
}

/** entriesOnMain is a binding file on main as "subject operationId" lines. */
async function entriesOnMain(server, file) {
  const r = await fetch(`${server.sim}/gitlab/api/v4/projects/1/repository/files/${encodeURIComponent(file)}/raw?ref=main`, { headers: gitlabHeaders });
  if (r.status === 404) return [];
  assert.equal(r.status, 200);
  const out = [];
  for (const m of (await r.text()).matchAll(/subject: "?([^"\n]+)"?\n(?:.*\n)*?\s+operationId: "?([^"\n]+)"?/g)) out.push(`${m[1]} ${m[2]}`);
  return out.sort();
}

describe('a failed request names whom to contact, in a real browser', { skip: skip || false }, () => {
  let server;
  let chrome;
  before(async () => {
    server = await startServer({ applyLimit: 100, extra: `ui:\n  contact: "${contact}"\n` });
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
    await server?.stop();
  });

  it('alice reads whom to contact on her failed request', async () => {
    const id = 'web-failed-1';
    assert.equal((await post(`${server.sim}/gitlab/_control/pipelines`, { outcome: 'fail', count: 1 })).status, 200);
    const sub = await post(`${server.base}/api/requests`, { targetKey: 'billing-dashboard', reason: 'failing pipeline' }, { 'X-Auth-Request-User': 'alice', 'Idempotency-Key': id });
    assert.equal(sub.status, 202);
    const form = await until('an approval form', async () => {
      const list = await (await fetch(`${server.sim}/approval/_control/approvals`)).json();
      return list.items.find((a) => a.operationId === id && a.status === 'PENDING');
    });
    assert.equal((await post(`${server.sim}/approval/_control/approvals/${form.approvalId}/approve`)).status, 200);
    await until('CREATE_FAILED', async () => {
      const r = await fetch(`${server.base}/api/requests/${id}`, { headers: { 'X-Auth-Request-User': 'alice' } });
      return (await r.json()).data?.status === 'CREATE_FAILED';
    }, 90000);

    const page = await newPage(chrome.browser, server.base, 'alice');
    await page.goto(`/requests/${id}`);
    const detail = page.locator('[data-testid=request-detail]');
    const todo = detail.locator('[data-testid=todo]');
    await todo.filter({ hasText: contact }).waitFor();
    assert.match(await todo.innerText(), /^Contact the platform team, #platform on chat; waiting will not help\.$/);
    assert.doesNotMatch(await detail.innerText(), /maintainers/);
    await page.context().close();
  });

  it('alice withdraws her failed request and asks again at once', async () => {
    const id = 'web-failed-1';
    const page = await newPage(chrome.browser, server.base, 'alice');
    const posts = [];
    page.on('request', (r) => r.method() === 'POST' && posts.push(new URL(r.url()).pathname));
    await page.goto(`/requests/${id}`);
    const detail = page.locator('[data-testid=request-detail]');
    await detail.locator('[data-testid=todo]').filter({ hasText: contact }).waitFor();
    const actions = page.locator('[data-testid=request-actions]');
    assert.match(await actions.innerText(), /Rather not wait for the operators\? Withdraw this request: its proposed change is closed, and you can ask again at once\./);
    const withdraw = page.locator('[data-testid=withdraw]');
    await withdraw.getByRole('button', { name: 'Withdraw' }).click();
    assert.match(await withdraw.innerText(), /Withdraw your stopped request for Billing dashboard\? Its proposed change is closed; you can ask again right after\./);
    assert.deepEqual(posts, [], 'nothing is sent before the confirmation');
    await withdraw.getByRole('button', { name: 'Yes, withdraw' }).click();
    const done = page.locator('[data-testid=done]');
    await done.waitFor();
    assert.equal(await done.innerText(), 'Withdrawn: nothing of this request takes effect. You can ask again now.');
    assert.deepEqual(posts, [`/api/requests/${id}/withdraw`], 'exactly one POST');
    await detail.locator('.status', { hasText: 'Withdrawn' }).waitFor();
    assert.match(await detail.innerText(), /You withdrew this request\. Request again if you need access after all\./);
    assert.equal(await page.locator('[data-testid=withdraw]').count(), 0, 'nothing left to withdraw');
    assert.equal(await mrOf(server, 'alice', id), 'closed', 'its MR is closed');

    // Request again: the form for the same target, accepted at once.
    await detail.locator('[data-testid=request-again]').click();
    await page.waitForURL(/\/request\/billing-dashboard(\?again=web-failed-1)?$/);
    await page.fill('textarea[name=reason]', 'after the failed one');
    const again = await page.getAttribute('form', 'data-operation-id');
    await page.click('button[type=submit]');
    await page.locator('[data-testid=submitted]').waitFor();
    await approveWhenAsked(server, again);
    await until('the new request in effect', async () => (await statusOf(server, 'alice', again))?.status === 'VALIDATED', 90000);
    await page.context().close();
  });

  it('an operator closes a failed request with a reason, and finds the runbook', async () => {
    const id = 'web-failed-bob';
    assert.equal((await post(`${server.sim}/gitlab/_control/pipelines`, { outcome: 'fail', count: 1 })).status, 200);
    const sub = await post(`${server.base}/api/requests`, { targetKey: 'billing-dashboard', reason: 'failing too' }, { 'X-Auth-Request-User': 'bob', 'Idempotency-Key': id });
    assert.equal(sub.status, 202);
    await approveWhenAsked(server, id);
    await until('CREATE_FAILED', async () => (await statusOf(server, 'bob', id))?.status === 'CREATE_FAILED', 90000);

    const page = await newPage(chrome.browser, server.base, 'olivia');
    const posts = [];
    page.on('request', (r) => r.method() === 'POST' && posts.push(new URL(r.url()).pathname));
    await page.goto(`/console/requests/${id}`);
    const card = page.locator('[data-testid=ops-close-card]');
    await card.waitFor({ timeout: 20000 });
    const close = page.locator('[data-testid=ops-close]');
    // Without a reason the server refuses, in words, and nothing moves.
    await close.getByRole('button', { name: 'Close request' }).click();
    assert.match(await close.innerText(), /Close bob's request now\? Its merge request is closed and nothing of it takes effect\./);
    await close.getByRole('button', { name: 'Yes, close request' }).click();
    await close.locator('.error, [role=alert]').first().waitFor();
    assert.match(await close.innerText(), /reason/i);
    assert.equal((await statusOf(server, 'bob', id)).status, 'CREATE_FAILED');
    await page.fill('input[name=close-reason]', 'the change breaks the checks');
    await close.getByRole('button', { name: 'Close request' }).click();
    await close.getByRole('button', { name: 'Yes, close request' }).click();
    const done = page.locator('[data-testid=done]');
    await done.waitFor();
    assert.equal(await done.innerText(), 'Closed: its merge request is closed and nothing of it takes effect.');
    assert.deepEqual(posts, [`/ops/requests/${id}/close`, `/ops/requests/${id}/close`]);
    const closed = await statusOf(server, 'bob', id);
    assert.equal(closed.status, 'CLOSED');
    assert.equal(closed.step.name, 'CLOSE_CANCELLED');
    assert.equal(await mrOf(server, 'bob', id), 'closed');
    const history = page.locator('[data-testid=step-history]');
    await history.filter({ hasText: 'the change breaks the checks' }).waitFor();
    assert.match(await history.innerText(), /olivia/);
    assert.equal(await page.locator('[data-testid=ops-close-card]').count(), 0, 'nothing left to close');

    // The runbook, from the console's tab: the binary's own copy.
    await page.click('[data-testid=runbook-tab]');
    await page.waitForURL('**/console/runbook');
    const runbook = page.locator('[data-testid=runbook]');
    await runbook.locator('h2', { hasText: 'Runbook: a request that needs a person' }).waitFor();
    assert.match(await runbook.locator('table').first().innerText(), /Re-trigger/);
    assert.ok((await runbook.locator('code', { hasText: 'CREATE_PIPELINE_FAILED' }).count()) > 0);
    await page.context().close();

    // The binding file on main holds exactly the access the database has in effect.
    const inDb = sqlite(server.db, "SELECT subject_id || ' ' || operation_id FROM binding WHERE target_key = 'billing-dashboard' AND status = 'VALIDATED' ORDER BY 1")
      .trim()
      .split('\n')
      .filter(Boolean);
    assert.deepEqual(await entriesOnMain(server, 'bindings/billing-dashboard.yaml'), inDb);
    assert.equal(inDb.length, 1);
    assert.match(inDb[0], /^alice /);
  });
});
