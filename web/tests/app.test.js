// Browser tests of the web app against the real binary (docs/webapp.md).
// Run: npm test --prefix web (needs Go and /usr/bin/chromium).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { launchBrowser, newPage, repoRoot, skipReason, sqlite, sqliteSkipReason, startServer, testTokens } from './harness.js';

const skip = skipReason();
const noSqlite = skip ? '' : sqliteSkipReason();

describe('the web app in a real browser', { skip: skip || false }, () => {
  let server;
  let roomy;
  let chrome;
  before(async () => {
    // ratelimit.apply.limit 1: each account may submit once a minute, so
    // a second submission shows the rate-limit message.
    server = await startServer({ applyLimit: 1 });
    // A second server for the scenarios that submit more than once per
    // account (each uses its own account and target).
    roomy = await startServer({ applyLimit: 10 });
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
    await server?.stop();
    await roomy?.stop();
  });

  it('alice picks herself, submits once on a double click, is approved through the simulator, and watches her request reach "In effect" without a reload', async () => {
    const page = await newPage(chrome.browser, server.base);
    const documents = [];
    page.on('request', (r) => r.resourceType() === 'document' && documents.push(r.url()));
    const submits = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && new URL(r.url()).pathname === '/api/requests') submits.push(r);
    });
    // Hold the submission back for a moment, so a second click lands
    // while the first is in flight.
    await page.route('**/api/requests', async (route) => {
      if (route.request().method() === 'POST') await new Promise((r) => setTimeout(r, 400));
      await route.continue();
    });

    await page.goto('/');
    await page.selectOption('select[name=user]', 'alice');
    const rows = page.locator('[data-testid=targets] tbody tr');
    await rows.first().waitFor();
    assert.equal(await rows.count(), 4);
    const closed = page.locator('tr[data-target=legacy-ftp]');
    assert.match(await closed.innerText(), /Closed/);
    assert.match(await closed.innerText(), /This target takes no requests: its owners have closed it\./, 'a closed target says why, in words');
    assert.match(await page.locator('tr[data-target=payments-db-readonly]').innerText(), /Open/);

    const shots = process.env.CHANGEFLOW_UPDATE_SCREENSHOTS === '1' ? join(repoRoot, 'docs', 'screenshots') : join(repoRoot, 'web', 'tests', 'artifacts');
    mkdirSync(shots, { recursive: true });
    await page.screenshot({ path: join(shots, 'targets.png'), fullPage: true });

    await page.click('tr[data-target=payments-db-readonly] a.button');
    await page.waitForURL('**/request/payments-db-readonly');
    await page.fill('textarea[name=reason]', 'quarterly audit');
    await page.fill('input[name=days]', '7');
    // The preview of the change, read from the GitLab simulator.
    const preview = page.locator('[data-testid=preview]');
    await preview.waitFor();
    await preview.locator('summary').click();
    assert.match(await preview.innerText(), /\+ .*subject: "?alice/);
    // Only alice's own entry, and a count of the others instead of them.
    assert.match(await preview.locator('[data-testid=preview-others]').innerText(), /Nobody else|other (person|people)/);
    const operationId = await page.getAttribute('form', 'data-operation-id');
    // Nothing is submitted yet, so no operation is named next to Submit; the
    // hint over the reason says what its box takes.
    assert.equal(await page.locator('[data-testid=operation-id]').count(), 0, 'no operation id before a submission');
    assert.match(await page.locator('[data-testid=reason-count]').innerText(), /it wraps, but takes no line breaks/);
    await page.dblclick('button[type=submit]');
    await page.keyboard.press('Enter');
    await page.locator('[data-testid=submitted]').waitFor();
    await page.waitForTimeout(300);
    assert.equal(submits.length, 1, 'a double click sends one request');
    assert.equal(submits[0].headers()['idempotency-key'], operationId, 'the form instance\'s operationId is the Idempotency-Key');
    assert.equal(await page.isDisabled('button[type=submit]'), true, 'the form stays locked after the submission');
    assert.equal(await page.locator('[data-testid=operation-id]').innerText(), `operation ${operationId}`, 'the submitted operation is named');
    if (process.env.CHANGEFLOW_UPDATE_SCREENSHOTS === '1') await page.screenshot({ path: join(shots, 'submit.png') });

    await page.click('[data-testid=submitted] a[href="/requests"]');
    const mine = page.locator(`[data-testid=my-requests] tr[data-operation-id="${operationId}"]`);
    await mine.waitFor();
    assert.match(await mine.innerText(), /payments-db-readonly/);
    assert.match(await mine.innerText(), /approval|Approval/, 'the status is in words');
    if (process.env.CHANGEFLOW_UPDATE_SCREENSHOTS === '1') await page.screenshot({ path: join(shots, 'my-requests.png') });

    await mine.locator('a').click();
    const detail = page.locator('[data-testid=request-detail]');
    await detail.waitFor();
    assert.match(await detail.innerText(), /Waiting for|Sending for approval|Waiting for approval/);

    // The approver says yes, through the approval simulator's control
    // API (the harness switched it to manual decisions). The form exists
    // once the request waits for approval.
    await detail.locator('.status', { hasText: 'Waiting for approval' }).waitFor({ timeout: 20000 });
    const approvals = await (await fetch(`${server.sim}/approval/_control/approvals`)).json();
    const form = approvals.items.find((a) => a.operationId === operationId);
    assert.ok(form, `an approval form for ${operationId}`);
    const approved = await fetch(`${server.sim}/approval/_control/approvals/${form.approvalId}/approve`, { method: 'POST' });
    assert.equal(approved.status, 200);

    // The page follows on its own: batch round, MR, pipeline, merge,
    // deployment callback — "In effect", with the MR link and no reload.
    await detail.locator('.status.ok', { hasText: 'In effect' }).waitFor({ timeout: 90000 });
    assert.match(await detail.locator('a[href*="/merge_requests/"]').innerText(), /^!\d+$/);
    assert.match(await detail.innerText(), /Access until/);
    assert.equal(documents.length, 1, `no reload on the way: ${documents.join(', ')}`);
    if (process.env.CHANGEFLOW_UPDATE_SCREENSHOTS === '1') await page.screenshot({ path: join(shots, 'request-in-effect.png') });
    await page.context().close();
  });

  it('a rate-limited submission shows the message and when to try again', async () => {
    const page = await newPage(chrome.browser, server.base, 'bob');
    await page.goto('/request/billing-dashboard');
    await page.fill('textarea[name=reason]', 'first');
    await page.click('button[type=submit]');
    await page.locator('[data-testid=submitted]').waitFor();

    await page.goto('/request/payments-db-readonly');
    await page.fill('textarea[name=reason]', 'second within the minute');
    await page.click('button[type=submit]');
    const note = page.locator('[data-testid=rate-limited]');
    await note.waitFor();
    const text = await note.innerText();
    assert.match(text, /Too many submissions, please try again later/);
    assert.match(text, /try again in \d+ s/);
    assert.doesNotMatch(text, /[{}"]/, 'no raw JSON');
    assert.equal(await page.isDisabled('button[type=submit]'), true, 'no retry before Retry-After');
    await page.context().close();
  });

  // A page of the old release asks for a chunk the new release no longer
  // has: the real server answers 404 JSON for it (the chunk's URL is
  // rewritten to a hashed name that does not exist). The guard reloads
  // once; the chunk is still missing, so the second failure, within 30 s,
  // shows "Refresh page" and nothing reloads again.
  for (const [name, pattern, path] of [
    ['a lazily loaded chunk', /\/assets\/console-[^/]+\.js$/, '/console'],
    ['the core script', /\/assets\/index-[^/]+\.js$/, '/'],
  ]) {
    it(`a missing hashed asset (${name}) reloads exactly once, then offers "Refresh page"`, async () => {
      const page = await newPage(chrome.browser, server.base, 'olivia');
      const documents = [];
      page.on('request', (r) => {
        if (r.resourceType() === 'document') documents.push(r.url());
      });
      await page.route(pattern, (route) => route.continue({ url: `${server.base}/assets/gone-abc123.js` }));
      await page.goto(path);
      const button = page.getByRole('button', { name: 'Refresh page' });
      await button.waitFor({ timeout: 10000 });
      await page.waitForTimeout(1500);
      assert.equal(documents.length, 2, `one automatic reload, got ${documents.join(', ')}`);
      assert.match(documents[1], /[?&]__reload=\d+/, 'the reload carries a cache-busting parameter');
      assert.equal(await button.count(), 1);

      // Once the release is whole again, the button's reload works.
      await page.unroute(pattern);
      await button.click();
      await page.waitForLoadState('load');
      if (path === '/console') await page.getByRole('heading', { name: 'Operations console' }).waitFor();
      else await page.getByRole('heading', { name: 'Targets' }).waitFor();
      assert.equal(await page.getByRole('button', { name: 'Refresh page' }).count(), 0);
      await page.context().close();
    });
  }

  for (const [name, agoMs, reloads] of [
    ['5 s', 5000, 0],
    ['31 s', 31000, 1],
  ]) {
    it(`a failure ${name} after the last automatic reload ${reloads ? 'reloads once more' : 'shows "Refresh page" at once'}`, async () => {
      const page = await newPage(chrome.browser, server.base, 'olivia');
      // The previous automatic reload, as the guard records it, set
      // before the page's first script runs (and only on the first load).
      await page.addInitScript((ago) => {
        if (!window.sessionStorage.getItem('test.seeded')) {
          window.sessionStorage.setItem('test.seeded', '1');
          window.sessionStorage.setItem('changeflow.lastAutoReload', String(Date.now() - ago));
        }
      }, agoMs);
      const documents = [];
      page.on('request', (r) => r.resourceType() === 'document' && documents.push(r.url()));
      await page.route(/\/assets\/console-[^/]+\.js$/, (route) => route.continue({ url: `${server.base}/assets/gone-abc123.js` }));
      await page.goto('/console');
      await page.getByRole('button', { name: 'Refresh page' }).waitFor({ timeout: 10000 });
      await page.waitForTimeout(1000);
      assert.equal(documents.length, 1 + reloads, documents.join(', '));
      await page.context().close();
    });
  }

  it('an operator looks a request up in the console: both states, step history, batches, configuration with fallbacks', async () => {
    const submitted = await fetch(`${server.base}/api/requests`, {
      method: 'POST',
      headers: { 'X-Auth-Request-User': 'adam', 'Idempotency-Key': 'web-console-1', 'Content-Type': 'application/json' },
      body: JSON.stringify({ targetKey: 'billing-dashboard', reason: 'console test' }),
    });
    assert.equal(submitted.status, 202);

    const page = await newPage(chrome.browser, server.base, 'olivia');
    await page.goto('/console');
    await page.fill('input[name=operationId]', 'web-console-1');
    await page.click('form button[type=submit]');
    await page.waitForURL('**/console/requests/web-console-1');
    const detail = page.locator('[data-testid=ops-request]');
    await page.locator('[data-testid=step-history] tbody tr').first().waitFor();
    const text = await detail.innerText();
    assert.match(text, /Requested by\s+adam/);
    // The workflow engine runs in the served process, so the request may
    // already have moved on: check the shape of both states and the first
    // history row, which is fixed, not a transient state.
    assert.match(text, /Step \(operation\)\s+[A-Z_]+ \(\d{5}\)/);
    assert.match(text, /Binding\s+\S/);
    assert.match(text, /NONE → CREATE_APPROVAL_SUBMITTING\s+— → APPROVAL_SENDING\s+adam\s+submitted/);
    if (process.env.CHANGEFLOW_UPDATE_SCREENSHOTS === '1') await page.screenshot({ path: join(repoRoot, 'docs', 'screenshots', 'console-request.png'), fullPage: true });

    await page.click('nav.tabs a[href="/console/batches"]');
    await page.getByText(/No batches yet|Batch/).first().waitFor();
    // The operator's tools: a round and reconciliation now, answered in words.
    const round = page.locator('[data-testid=run-round]');
    await round.getByRole('button', { name: 'Run a round now' }).click();
    await round.getByRole('button', { name: 'Yes, run a round now' }).click();
    const done = page.locator('[data-testid=done]');
    await done.waitFor();
    assert.match(await done.innerText(), /^Project 1: (no approved request is waiting|batch #\d+ .*)\.$/);
    const reconcile = page.locator('[data-testid=run-reconcile]');
    await reconcile.getByRole('button', { name: 'Run reconciliation now' }).click();
    await reconcile.getByRole('button', { name: 'Yes, run reconciliation now' }).click();
    await page.locator('[data-testid=done]', { hasText: 'Reconciliation checked' }).waitFor();
    assert.match(await done.innerText(), /^Reconciliation checked \d+ request\(s\): \d+ now in effect, \d+ still waiting\.$/);

    await page.click('nav.tabs a[href="/console/config"]');
    const config = page.locator('[data-testid=config]');
    await config.waitFor();
    assert.match(await config.innerText(), /ratelimit\.apply\.limit/);
    assert.match(await page.locator('main').innerText(), /item\(s\) fell back to a default/);
    await page.context().close();

    // Someone without the rule codes gets the answer in words — what the
    // console needs, where their own pages are — and the API refuses them.
    const alice = await newPage(chrome.browser, server.base, 'alice');
    await alice.goto('/console/config');
    const denied = alice.locator('[data-testid=no-console]');
    await denied.waitFor();
    assert.match(await denied.innerText(), /It needs an operations permission, and your account alice has none\./);
    const refused = await alice.evaluate(async () => (await fetch('/ops/config', { headers: { 'X-Auth-Request-User': 'alice' } })).status);
    assert.equal(refused, 403);
    await alice.context().close();
  });

  it('an operator re-triggers a failed request from the console, and it proceeds', async () => {
    const sim = (path, method, body) =>
      fetch(`${server.sim}/approval/_control/${path}`, {
        method,
        headers: { 'Content-Type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    // The approval system refuses the next form: the request stops at
    // CREATE_FAILED, where only an operator moves it on.
    assert.equal((await sim('faults', 'POST', { failNext: { status: 422, count: 1 } })).status, 200);
    const id = 'web-retrigger-1';
    const submitted = await fetch(`${server.base}/api/requests`, {
      method: 'POST',
      headers: { 'X-Auth-Request-User': 'olivia', 'Idempotency-Key': id, 'Content-Type': 'application/json' },
      body: JSON.stringify({ targetKey: 'billing-dashboard', reason: 'retrigger test' }),
    });
    assert.equal(submitted.status, 202);

    const page = await newPage(chrome.browser, server.base, 'olivia');
    await page.goto(`/console/requests/${id}`);
    const detail = page.locator('[data-testid=ops-request]');
    const retrigger = page.locator('[data-testid=retrigger]');
    await retrigger.waitFor({ timeout: 20000 });
    assert.match(await detail.innerText(), /stopped at CREATE_\w*FAILED/);
    // The request's own fields are named in words, not by their API keys.
    const stopped = await detail.innerText();
    assert.match(stopped, /Next action\s+submit_approval/);
    assert.match(stopped, /Last error\s+\S/);
    assert.doesNotMatch(stopped, /\b(nextAction|lastError|dueAt|leaseOwner)\b/);

    // A refusal is shown in the server's words (faked once: a real one
    // needs the request to move between the look and the click).
    await page.route(`**/ops/requests/${id}/retrigger`, (route) =>
      route.fulfill({
        status: 409,
        contentType: 'application/json',
        body: JSON.stringify({ code: 'REQUEST_IN_PROGRESS', message: 'The request is not stopped: it is waiting for its next step, running, or finished, so there is nothing to retrigger.', data: null }),
      }),
    );
    await retrigger.getByRole('button', { name: 'Re-trigger' }).click();
    await retrigger.getByRole('button', { name: 'Yes, re-trigger' }).click();
    const refusal = retrigger.locator('.note.error');
    await refusal.waitFor();
    assert.match(await refusal.innerText(), /^The request is not stopped: /);
    await page.unroute(`**/ops/requests/${id}/retrigger`);

    // The cause is fixed; the operator re-triggers for real.
    assert.equal((await sim('faults', 'DELETE')).status, 200);
    await retrigger.getByRole('button', { name: 'Re-trigger' }).click();
    assert.match(await retrigger.innerText(), /Re-run this request from submit_approval now\?/);
    await retrigger.getByRole('button', { name: 'Yes, re-trigger' }).click();
    const done = detail.locator('[data-testid=done]');
    await done.waitFor();
    assert.match(await done.innerText(), /Re-triggered: submit_approval runs now \(it had stopped at CREATE_\w*FAILED\)/);
    // … and it proceeds: the form reaches the approval system and the
    // request waits for a decision.
    await detail.locator('dd .status', { hasText: 'Waiting for approval' }).first().waitFor({ timeout: 20000 });
    assert.equal(await retrigger.count(), 0, 'nothing left to re-trigger');
    // Its next look at the approval system is due later: the time is in
    // words, to the second with its zone, never the API's ISO string.
    const due = detail.locator('dt', { hasText: 'Due at' }).locator('xpath=following-sibling::dd[1]');
    await due.waitFor({ timeout: 20000 });
    const dueText = await due.innerText();
    assert.match(dueText, /\d{1,2}:\d{2}:\d{2}/, `Due at: ${dueText}`);
    assert.doesNotMatch(dueText, /\d{4}-\d{2}-\d{2}T/, `Due at: ${dueText}`);
    const forms = await (await sim('approvals', 'GET')).json();
    assert.ok(forms.items.some((a) => a.operationId === id && a.status === 'PENDING'));
    if (process.env.CHANGEFLOW_UPDATE_SCREENSHOTS === '1') await page.screenshot({ path: join(repoRoot, 'docs', 'screenshots', 'console-retriggered.png'), fullPage: true });
    await page.context().close();
  });

  it('an operator settles a blocked batch after confirming, and its request then goes through', async () => {
    // A hand-edited binding file that does not parse blocks the batch
    // built on it (docs/workflow.md "Blocked batches"): no retry fixes it,
    // a person must. Here bob's approved request meets such a file.
    const srv = roomy;
    const file = 'bindings/payments-db-readonly.yaml';
    const commit = async (action, content) => {
      const r = await fetch(`${srv.sim}/gitlab/api/v4/projects/1/repository/commits`, {
        method: 'POST',
        headers: { 'PRIVATE-TOKEN': 'local-maintainer-token', 'Content-Type': 'application/json' },
        body: JSON.stringify({ branch: 'main', commit_message: 'hand edit', actions: [{ action, file_path: file, content }] }),
      });
      assert.equal(r.status, 201, await r.text());
    };
    await commit('create', '- subject: [this is not\n');
    const id = 'web-settle-1';
    const submitted = await fetch(`${srv.base}/api/requests`, {
      method: 'POST',
      headers: { 'X-Auth-Request-User': 'bob', 'Idempotency-Key': id, 'Content-Type': 'application/json' },
      body: JSON.stringify({ targetKey: 'payments-db-readonly', reason: 'settle test' }),
    });
    assert.equal(submitted.status, 202);
    // The approval form appears once the workflow has sent it.
    let form;
    for (const deadline = Date.now() + 20000; !form && Date.now() < deadline; ) {
      const list = await (await fetch(`${srv.sim}/approval/_control/approvals`)).json();
      form = list.items.find((a) => a.operationId === id);
      if (!form) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(form, 'an approval form for the request');
    assert.equal((await fetch(`${srv.sim}/approval/_control/approvals/${form.approvalId}/approve`, { method: 'POST' })).status, 200);

    const page = await newPage(chrome.browser, srv.base, 'olivia');
    const posts = [];
    page.on('request', (r) => r.method() === 'POST' && posts.push(new URL(r.url()).pathname));
    await page.goto('/console/batches');
    const blocked = page.locator('[data-testid=batches] tr', { hasText: 'BLOCKED' });
    await blocked.waitFor({ timeout: 30000 });
    assert.match(await blocked.innerText(), /invalid binding file/);
    const settle = blocked.locator('[data-testid^=settle-]');
    const batchId = (await settle.getAttribute('data-testid')).slice('settle-'.length);

    // The cause is fixed; the operator settles, after confirming.
    await commit('update', '');
    await settle.getByRole('button', { name: 'Settle' }).click();
    assert.match(await settle.innerText(), new RegExp(`Settle batch #${batchId}\\? Its MR is closed if still open`));
    assert.deepEqual(posts, [], 'nothing is sent before the confirmation');
    await settle.getByRole('button', { name: 'Yes, settle' }).click();
    const done = page.locator('[data-testid=done]');
    await done.waitFor();
    assert.equal(await done.innerText(), `Batch #${batchId} settled as FAILED; 1 request(s) wait for the next round.`);
    assert.deepEqual(posts, [`/ops/batches/${batchId}/settle`]);
    await page.locator(`[data-testid=batches] tr`, { hasText: `#${batchId}` }).getByText('FAILED').waitFor();
    assert.equal(await page.locator(`[data-testid=settle-${batchId}]`).count(), 0, 'a settled batch offers no settle');
    if (process.env.CHANGEFLOW_UPDATE_SCREENSHOTS === '1') await page.screenshot({ path: join(repoRoot, 'docs', 'screenshots', 'console-batches.png') });

    // Re-admitted, the request goes through in a later batch.
    const bob = await newPage(chrome.browser, srv.base, 'bob');
    await bob.goto(`/requests/${id}`);
    await bob.locator('[data-testid=request-detail] .status.ok', { hasText: 'In effect' }).waitFor({ timeout: 90000 });
    await bob.context().close();
    await page.context().close();
  });

  it('an operator re-triggers a request that waits for its approval with nothing polling it, and the poll is scheduled', { skip: noSqlite || false }, async () => {
    const srv = roomy;
    const id = 'web-unpolled-1';
    const submitted = await fetch(`${srv.base}/api/requests`, {
      method: 'POST',
      headers: { 'X-Auth-Request-User': 'bob', 'Idempotency-Key': id, 'Content-Type': 'application/json' },
      body: JSON.stringify({ targetKey: 'billing-dashboard', reason: 'unpolled test' }),
    });
    assert.equal(submitted.status, 202);

    const page = await newPage(chrome.browser, srv.base, 'olivia');
    await page.goto(`/console/requests/${id}`);
    const detail = page.locator('[data-testid=ops-request]');
    await detail.locator('dd .status', { hasText: 'Waiting for approval' }).first().waitFor({ timeout: 20000 });
    // What a release before poll_approval left: no action, nothing due.
    // Only while no worker holds the row (a poll may be running); the
    // first poll runs at once, so wait for its lease to go.
    let cleared = '';
    for (const deadline = Date.now() + 20000; cleared !== '1' && Date.now() < deadline; ) {
      cleared = sqlite(srv.db, `UPDATE operation SET next_action = NULL, due_at = NULL WHERE operation_id = '${id}' AND lease_owner IS NULL AND step_status = 10011; SELECT changes();`).trim();
      if (cleared !== '1') await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(cleared, '1', 'the request waits in CREATE_APPROVAL_SUBMITTED with no worker on it');

    const retrigger = detail.locator('[data-testid=retrigger]');
    await retrigger.waitFor({ timeout: 20000 }); // the page polls every 3 s
    assert.match(await detail.locator('.card.actions').innerText(), /nothing asks the approval system about it/);
    await retrigger.getByRole('button', { name: 'Re-trigger' }).click();
    assert.match(await retrigger.innerText(), /Poll the approval system for this request now\?/);
    await retrigger.getByRole('button', { name: /^Yes/ }).click();
    const done = detail.locator('[data-testid=done]');
    await done.getByText(/^Re-triggered: poll_approval runs now/).waitFor({ timeout: 20000 });
    // The poll is scheduled again: the step history records the retrigger.
    await page.locator('[data-testid=step-history]', { hasText: 'retrigger poll_approval from CREATE_APPROVAL_SUBMITTED' }).waitFor({ timeout: 20000 });
    await page.context().close();
  });

  it('an operator replays an approval decision whose application was lost, and the request proceeds', { skip: noSqlite || false }, async () => {
    const srv = roomy;
    const id = 'web-replay-1';
    const submitted = await fetch(`${srv.base}/api/requests`, {
      method: 'POST',
      headers: { 'X-Auth-Request-User': 'adam', 'Idempotency-Key': id, 'Content-Type': 'application/json' },
      body: JSON.stringify({ targetKey: 'billing-dashboard', reason: 'replay test' }),
    });
    assert.equal(submitted.status, 202);
    let form;
    for (const deadline = Date.now() + 20000; !form && Date.now() < deadline; ) {
      const list = await (await fetch(`${srv.sim}/approval/_control/approvals`)).json();
      form = list.items.find((a) => a.operationId === id);
      if (!form) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(form, 'an approval form for the request');

    const page = await newPage(chrome.browser, srv.base, 'olivia');
    const posts = [];
    page.on('request', (r) => r.method() === 'POST' && posts.push(new URL(r.url()).pathname));
    await page.goto(`/console/requests/${id}`);
    const detail = page.locator('[data-testid=ops-request]');
    await detail.locator('dd .status', { hasText: 'Waiting for approval' }).first().waitFor({ timeout: 20000 });
    assert.equal(await page.locator('[data-testid=approval-inbox]').count(), 0, 'no callback received yet');

    // The approver approves, and the decision is recorded in the callback
    // inbox but never applied: what a process killed between recording a
    // callback and applying it leaves (the sender's redelivery is then
    // answered DUPLICATE). The approval system's own callback is dropped,
    // so nothing but the operator moves the request on here
    // (reconciliation would, after reconcile.minAge, 2 minutes; the
    // fallback poll is slowed down in these tests). The replay reads the
    // decision back from the approval system (approval.verifyDecisions),
    // which is why the form must really be approved.
    const dropped = await fetch(`${srv.sim}/approval/_control/deliveries/faults`, { method: 'POST', body: JSON.stringify({ dropNext: 1 }) });
    assert.equal(dropped.status, 200);
    const approved = await fetch(`${srv.sim}/approval/_control/approvals/${form.approvalId}/approve`, { method: 'POST', body: '{}' });
    assert.equal(approved.status, 200);
    const delivery = `lost-${form.approvalId}`;
    sqlite(srv.db, `INSERT INTO approval_callback (delivery_key, operation_id, approval_id, result) VALUES ('${delivery}', '${id}', '${form.approvalId}', 'APPROVED')`);
    const inbox = page.locator('[data-testid=approval-inbox]');
    const replay = inbox.locator(`tr[data-delivery="${delivery}"] [data-testid=replay]`);
    await replay.waitFor({ timeout: 20000 }); // the page polls every 3 s
    assert.match(await inbox.innerText(), /APPROVED/);
    const disposition = inbox.locator(`tr[data-delivery="${delivery}"] [data-testid=disposition]`);
    assert.equal(await disposition.innerText(), 'recorded, not applied yet');

    // "Nothing was replayed" is said in words (faked once: for real it
    // needs the request to move between the look and the click).
    await page.route(`**/ops/requests/${id}/replay-approval`, (route) =>
      route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ code: 'OK', message: '', data: { operationId: id, applied: false } }) }),
    );
    await replay.getByRole('button', { name: 'Replay' }).click();
    await replay.getByRole('button', { name: 'Yes, replay' }).click();
    const done = detail.locator('[data-testid=done]');
    await done.getByText('Nothing was replayed').waitFor();
    assert.equal(await done.innerText(), 'Nothing was replayed: the decision had already been acted on, or the request no longer waits for it.');
    await page.unroute(`**/ops/requests/${id}/replay-approval`);
    posts.length = 0;

    // For real, after confirming.
    await replay.getByRole('button', { name: 'Replay' }).click();
    assert.match(await replay.innerText(), /Apply this APPROVED decision now\? It passes the same check as a delivery/);
    assert.deepEqual(posts, [], 'nothing is sent before the confirmation');
    await replay.getByRole('button', { name: 'Yes, replay' }).click();
    await done.getByText(/^Replayed: /).waitFor();
    assert.equal(await done.innerText(), 'Replayed: the recorded APPROVED decision was applied, and the request moves on.');
    assert.deepEqual(posts, [`/ops/requests/${id}/replay-approval`]);
    if (process.env.CHANGEFLOW_UPDATE_SCREENSHOTS === '1') await page.screenshot({ path: join(repoRoot, 'docs', 'screenshots', 'console-replayed.png'), fullPage: true });

    // … and it proceeds: the step history names the replayed delivery, the
    // button is gone, and the request goes all the way to in effect.
    await page.locator('[data-testid=step-history]', { hasText: delivery }).waitFor({ timeout: 20000 });
    assert.equal(await page.locator('[data-testid=replay]').count(), 0, 'nothing left to replay');
    // … and the inbox says what became of the decision.
    await inbox.locator(`tr[data-delivery="${delivery}"] [data-testid=disposition]`, { hasText: /^applied/ }).waitFor({ timeout: 20000 });
    await detail.locator('dd .status', { hasText: 'In effect' }).first().waitFor({ timeout: 90000 });
    // The deployment's callback for its MR is in the deploy inbox, applied.
    await page.locator('[data-testid=deploy-inbox] [data-testid=deploy-disposition]', { hasText: /^applied/ }).first().waitFor({ timeout: 20000 });
    await page.context().close();
  });

  it('a deploy callback for an MR changeflow never merged changes nothing and is shown in the console with why', async () => {
    const srv = roomy;
    const forged = await fetch(`${srv.base}/callbacks/deploy`, {
      method: 'POST',
      headers: { 'X-Callback-Token': testTokens.deploy, 'Content-Type': 'application/json' },
      body: JSON.stringify({ requestId: 'web-forged-deploy-1', project: 1, mrIid: 99999, status: 'SUCCESS' }),
    });
    assert.equal(forged.status, 200);
    assert.equal((await forged.json()).code, 'IGNORED_STALE');

    const page = await newPage(chrome.browser, srv.base, 'olivia');
    await page.goto('/console/deploy-callbacks');
    const row = page.locator('[data-testid=deploy-inbox-all] tr[data-disposition=UNKNOWN_MR]', { hasText: '1!99999' });
    await row.waitFor({ timeout: 20000 });
    assert.match(await row.locator('[data-testid=deploy-disposition]').innerText(), /^ignored: no request has this MR/);
    assert.match(await row.innerText(), /web-forged-deploy-1/);
    await page.context().close();
  });

  it('with an OIDC issuer configured, a person signs in on the issuer\'s page and the app calls the API with the token', async () => {
    const page = await newPage(chrome.browser, server.base); // nobody picked
    const calls = [];
    page.on('request', (r) => {
      if (new URL(r.url()).pathname.startsWith('/api/requests')) calls.push(r.headers());
    });
    await page.goto('/requests');
    await page.getByRole('button', { name: 'Sign in' }).click();
    // The simulator's login page: no passwords, the local people as buttons.
    await page.waitForURL((u) => u.href.startsWith(`${server.sim}/oidc/authorize?`));
    assert.match(page.url(), /code_challenge_method=S256/);
    await page.click('button[data-sub="bob"]');
    // Back where the person was, the callback (its code spent) replaced.
    await page.waitForURL(`${server.base}/requests`);
    const signedIn = page.locator('[data-testid=signed-in]');
    // What the page was answered, for a failure's report: this test was
    // flaky until a token arriving during the server's first JWKS
    // download was refused (internal/identity TestTokensArrivingDuring…).
    const answers = [];
    page.on('response', (r) => answers.push(`${r.request().method()} ${new URL(r.url()).pathname} ${r.status()}`));
    try {
      // The account the server knows, not the token's email.
      await signedIn.locator('[data-testid=account]', { hasText: /^bob$/ }).waitFor();
      await page.locator('[data-testid=my-requests], main p.muted').first().waitFor();
    } catch (e) {
      throw new Error(`${e.message}\nanswers: ${answers.join(', ')}\nserver log: ${server.logs().slice(-2000)}`);
    }
    assert.equal(await page.locator('main .note.error').count(), 0, 'the API took the token');
    const last = calls.at(-1);
    assert.match(last.authorization ?? '', /^Bearer [\w-]+\.[\w-]+\.[\w-]+$/, 'the ID token is sent as a bearer token');
    assert.equal(last['x-auth-request-user'], undefined, 'no picker header beside the token');
    assert.equal(await page.locator('select[name=user]').count(), 0, 'no user picker while signed in');
    if (process.env.CHANGEFLOW_UPDATE_SCREENSHOTS === '1') await page.screenshot({ path: join(repoRoot, 'docs', 'screenshots', 'signed-in.png') });

    // A reload keeps the session (sessionStorage); signing out ends it.
    await page.reload();
    await signedIn.waitFor();
    await signedIn.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    await page.goto('/requests');
    const note = page.locator('main .note.error');
    await note.waitFor();
    assert.match(await note.innerText(), /You are not signed in/);

    // A callback that this tab did not start is refused in words.
    await page.goto('/login/callback?code=stolen&state=forged');
    await page.getByText('This sign-in was not started here, or was already used. Sign in again.').waitFor();
    assert.equal(await page.locator('[data-testid=signed-in]').count(), 0);
    await page.context().close();
  });

  it('a newcomer takes a request to "In effect" with only the UI and the simulator page it links to', async () => {
    // The second server: every account of the first has used its one
    // submission a minute (ratelimit.apply.limit 1).
    const srv = roomy;
    {
      const page = await newPage(chrome.browser, srv.base);
      await page.goto('/');
      await page.selectOption('select[name=user]', 'alice');
      await page.click('tr[data-target=billing-dashboard] a.button');
      await page.fill('textarea[name=reason]', 'month-end close');
      await page.click('button[type=submit]');
      await page.locator('[data-testid=submitted]').waitFor();
      const operationId = await page.getAttribute('form', 'data-operation-id');
      await page.click('[data-testid=submitted] a[href="/requests"]');
      await page.locator(`tr[data-operation-id="${operationId}"] a`).click();

      // The detail page says the approval is simulated and links to it.
      const link = page.locator('[data-testid=approve-here] a');
      await link.waitFor({ timeout: 20000 });
      assert.equal(await link.getAttribute('href'), `${srv.sim}/approval/_control/ui`);
      assert.equal(await page.locator('[data-testid=simulators] a').first().getAttribute('href'), `${srv.sim}/approval/_control/ui`);
      const [approver] = await Promise.all([page.waitForEvent('popup'), link.click()]);
      const row = approver.locator(`tr[data-operation-id="${operationId}"]`);
      await row.waitFor();
      if (process.env.CHANGEFLOW_UPDATE_SCREENSHOTS === '1') await approver.screenshot({ path: join(repoRoot, 'docs', 'screenshots', 'approval-simulator.png') });
      await row.getByRole('button', { name: 'Approve' }).click();
      await approver.locator(`tr[data-operation-id="${operationId}"] td.APPROVED`).waitFor();
      await approver.close();

      const detail = page.locator('[data-testid=request-detail]');
      await detail.locator('.status.ok', { hasText: 'In effect' }).waitFor({ timeout: 90000 });
      assert.equal(await page.locator('[data-testid=approve-here]').count(), 0, 'no approval link once approved');
      await page.context().close();
    }
  });

  it('a lost answer: the retry carries the same operationId, gets DUPLICATE_SUBMIT, and the form stays locked', async () => {
    // The second server: with apply.limit 1 the retry would be rate
    // limited (rate limiting runs before the idempotency check, docs/api.md).
    const srv = roomy;
    {
      const page = await newPage(chrome.browser, srv.base, 'alice');
      const keys = [];
      await page.route('**/api/requests', async (route) => {
        if (route.request().method() !== 'POST') return route.continue();
        keys.push(route.request().headers()['idempotency-key']);
        if (keys.length === 1) {
          await route.fetch(); // the server accepts it …
          return route.abort('connectionreset'); // … and the answer is lost
        }
        return route.continue();
      });
      await page.goto('/request/payments-db-readonly');
      await page.fill('textarea[name=reason]', 'lost answer');
      await page.click('button[type=submit]');
      await page.locator('.note.error').getByText('Cannot reach changeflow').waitFor();
      assert.equal(await page.isDisabled('button[type=submit]'), false, 'an unknown outcome may be retried');
      await page.click('button[type=submit]');
      const done = page.locator('[data-testid=submitted]');
      await done.waitFor();
      assert.match(await done.innerText(), /already submitted; nothing was sent twice/);
      assert.equal(keys.length, 2);
      assert.equal(keys[0], keys[1], 'one operationId per form instance');
      assert.equal(await page.isDisabled('button[type=submit]'), true);
      await page.context().close();
    }
  });

  it('the request page follows its event stream: each change arrives pushed, with the status polls blocked, up to "In effect"', { skip: noSqlite || false }, async () => {
    const srv = roomy;
    const id = 'web-live-stream-1';
    const submitted = await fetch(`${srv.base}/api/requests`, {
      method: 'POST',
      headers: { 'X-Auth-Request-User': 'olivia', 'Idempotency-Key': id, 'Content-Type': 'application/json' },
      body: JSON.stringify({ targetKey: 'payments-db-readonly', reason: 'live stream test' }),
    });
    assert.equal(submitted.status, 202);
    const page = await newPage(chrome.browser, srv.base, 'olivia');
    const documents = [];
    page.on('request', (r) => r.resourceType() === 'document' && documents.push(r.url()));
    await page.goto(`/requests/${id}`);
    await page.locator('section[data-live=stream]').waitFor({ timeout: 20000 });
    const detail = page.locator('[data-testid=request-detail]');
    await detail.locator('.status', { hasText: 'Waiting for approval' }).waitFor({ timeout: 20000 });
    // From here the status read itself fails: only the stream can move the page.
    let polls = 0;
    await page.route(`**/api/requests/${id}`, (route) => {
      polls++;
      return route.abort();
    });
    const approvals = await (await fetch(`${srv.sim}/approval/_control/approvals`)).json();
    const form = approvals.items.find((a) => a.operationId === id);
    assert.ok(form, `an approval form for ${id}`);
    assert.equal((await fetch(`${srv.sim}/approval/_control/approvals/${form.approvalId}/approve`, { method: 'POST' })).status, 200);
    await detail.locator('.status.ok', { hasText: 'In effect' }).waitFor({ timeout: 90000 });
    assert.equal(await page.getAttribute('section[data-live]', 'data-live'), 'stream');
    assert.equal(polls, 0, 'no status poll while the stream is open');
    assert.equal(documents.length, 1, 'no reload');
    await page.context().close();
  });

  it('when the event stream drops, the request page falls back to polling and still follows to "In effect"', { skip: noSqlite || false }, async () => {
    const srv = roomy;
    const id = 'web-live-drop-1';
    const submitted = await fetch(`${srv.base}/api/requests`, {
      method: 'POST',
      headers: { 'X-Auth-Request-User': 'adam', 'Idempotency-Key': id, 'Content-Type': 'application/json' },
      body: JSON.stringify({ targetKey: 'payments-db-readonly', reason: 'live drop test' }),
    });
    assert.equal(submitted.status, 202);
    const view = (await (await fetch(`${srv.base}/api/requests/${id}`, { headers: { 'X-Auth-Request-User': 'adam' } })).json()).data;
    const page = await newPage(chrome.browser, srv.base, 'adam');
    // The first stream delivers the state and ends (a dropped connection);
    // every reconnect is refused, as by an instance at its stream cap.
    let streams = 0;
    await page.route(`**/api/requests/${id}/events`, (route) => {
      streams++;
      if (streams === 1) {
        return route.fulfill({ status: 200, contentType: 'text/event-stream', body: `event: request\nid: 1\ndata: ${JSON.stringify(view)}\n\n` });
      }
      return route.fulfill({ status: 503, contentType: 'application/json', headers: { 'Retry-After': '5' }, body: JSON.stringify({ code: 'RETRY_LATER', message: '', data: null }) });
    });
    let polls = 0;
    page.on('request', (r) => new URL(r.url()).pathname === `/api/requests/${id}` && polls++);
    await page.goto(`/requests/${id}`);
    const detail = page.locator('[data-testid=request-detail]');
    await detail.waitFor({ timeout: 20000 });
    await page.locator('section[data-live=poll]').waitFor({ timeout: 20000 });
    await detail.locator('.status', { hasText: 'Waiting for approval' }).waitFor({ timeout: 20000 });
    const approvals = await (await fetch(`${srv.sim}/approval/_control/approvals`)).json();
    const form = approvals.items.find((a) => a.operationId === id);
    assert.ok(form, `an approval form for ${id}`);
    assert.equal((await fetch(`${srv.sim}/approval/_control/approvals/${form.approvalId}/approve`, { method: 'POST' })).status, 200);
    await detail.locator('.status.ok', { hasText: 'In effect' }).waitFor({ timeout: 90000 });
    assert.equal(await page.getAttribute('section[data-live]', 'data-live'), 'poll');
    assert.ok(streams >= 2, `the page tried the stream again (${streams})`);
    assert.ok(polls >= 1, 'the status came by polling');
    await page.context().close();
  });

  // The API's answers are faked from here on (page.route) to show states
  // the local run reaches only with the workflow running: hints, an MR
  // link, a status that changes while the page is open, failures.
  it('live status: my requests and the detail update without a reload, with the hint in plain words and the MR link', async () => {
    const page = await newPage(chrome.browser, server.base, 'alice');
    const item = (status, step, hint, extra = {}) => ({
      operationId: 'op-live', subject: 'alice', targetKey: 'payments-db-readonly', status,
      step: { code: 1, name: step }, hint, updatedAt: new Date().toISOString(), ...extra,
    });
    let answer = item('MR_CREATED', 'PIPELINE_RUNNING', 'KEEP_WAITING', { mr: { iid: 7, url: 'http://gitlab.example/config/bindings/-/merge_requests/7' } });
    const envelope = (data) => ({ status: 200, contentType: 'application/json', body: JSON.stringify({ code: 'OK', message: '', data }) });
    await page.route(/\/api\/requests\?/, (route) => route.fulfill(envelope({ items: [answer], nextCursor: '' })));
    await page.route('**/api/requests/op-live', (route) => route.fulfill(envelope(answer)));
    const documents = [];
    page.on('request', (r) => r.resourceType() === 'document' && documents.push(r.url()));

    await page.goto('/requests');
    const row = page.locator('tr[data-operation-id=op-live]');
    await row.getByText('You can keep waiting').waitFor();
    answer = item('HANDLE_FAILED', 'PIPELINE_FAILED', 'CONTACT_MAINTAINERS', { mr: answer.mr });
    await row.getByText('Contact the team that runs changeflow; waiting will not help.').waitFor({ timeout: 10000 });

    await row.locator('a').click();
    const detail = page.locator('[data-testid=request-detail]');
    await detail.waitFor();
    assert.equal(await detail.locator('a[href$="/merge_requests/7"]').innerText(), '!7');
    answer = item('VALIDATED', 'DONE', 'NONE', { mr: answer.mr });
    // The status badge, not the progress line's last label (always there).
    await detail.locator('.status.ok', { hasText: 'In effect' }).waitFor({ timeout: 10000 });
    assert.equal(documents.length, 1, 'no reload on the way');
    await page.context().close();
  });

  it('errors are plain words, never a body: a proxy error page, an internal error, no connection', async () => {
    const page = await newPage(chrome.browser, server.base, 'alice');
    let mode = 'proxy';
    await page.route('**/api/targets', (route) => {
      if (mode === 'proxy') return route.fulfill({ status: 502, contentType: 'text/html', body: '<html><h1>502 Bad Gateway</h1></html>' });
      if (mode === 'internal') {
        return route.fulfill({ status: 500, contentType: 'application/json', body: JSON.stringify({ code: 'INTERNAL_ERROR', message: 'sql: no rows in result set', data: null }) });
      }
      return route.abort('connectionrefused');
    });
    const note = page.locator('.note.error');
    for (const [m, words] of [
      ['proxy', 'The server answered unexpectedly (HTTP 502). Try again in a moment.'],
      ['internal', 'Something went wrong on our side. Try again later; if it keeps happening, contact the maintainers.'],
      ['down', 'Cannot reach changeflow. Check your connection and try again.'],
    ]) {
      mode = m;
      await page.goto('/');
      await note.waitFor();
      assert.equal(await note.innerText(), words);
    }
    await page.context().close();
  });

  it('the curl smoke script passes against the real server', () => {
    const out = execFileSync(join(repoRoot, 'scripts', 'smoke-static.sh'), [server.base], { encoding: 'utf8' });
    assert.match(out, /all static-asset checks passed/);
  });

  it('the server answers a missing asset with a 404 envelope and a page navigation with the app, both no-store', async () => {
    const asset = await fetch(`${server.base}/assets/gone-abc123.js`);
    assert.equal(asset.status, 404);
    assert.equal(asset.headers.get('cache-control'), 'no-store');
    assert.equal((await asset.json()).code, 'NOT_FOUND');
    const page = await fetch(`${server.base}/requests/whatever`, { headers: { Accept: 'text/html' } });
    assert.equal(page.status, 200);
    assert.equal(page.headers.get('cache-control'), 'no-store');
    assert.match(await page.text(), /<div id="app">/);
  });
});
