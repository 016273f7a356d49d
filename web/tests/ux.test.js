// Browser tests of what a person meets (docs/webapp.md, "Words for users",
// "Who sees what", "Honest forms", "Layout"): every state the API can
// return in words, "What to do" right for each, a rejection with "Request
// again", "Access until" only once granted, time stamps with their zone;
// the user picker only in the local run; the Operations tab only for
// operators, batches linked to their requests, the configuration grouped
// and searchable; forms that explain a closed target instead of showing,
// check what the server checks with its words, and link a refusal to the
// request concerned; every page at a desktop and a phone width without
// horizontal scroll, screenshots of both. Run: npm test --prefix web.
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { buildRelease, launchBrowser, newPage, repoRoot, skipReason, startServer } from './harness.js';

const skip = skipReason();
const states = JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), 'testdata', 'states.json'), 'utf8'));

/** rawCode matches what a person must never read: an API code such as
 * APPROVAL_SENT, CALLED_BACK or KEEP_WAITING. */
const rawCode = /\b[A-Z]{2,}(?:_[A-Z]+)+\b|\b(?:NONE|VALIDATED|MERGING|MERGED|REJECTED|CLOSED|RECONCILED)\b/;

const shots = process.env.CHANGEFLOW_UPDATE_SCREENSHOTS === '1' ? join(repoRoot, 'docs', 'screenshots') : join(repoRoot, 'web', 'tests', 'artifacts');

/** sim calls a simulator's control API. */
async function simCall(server, path, body) {
  const r = await fetch(`${server.sim}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body ?? {}),
  });
  assert.equal(r.status, 200, `${path}: ${r.status}`);
}

/** approve decides operationId's approval form by hand (the harness
 * switched the simulator to manual decisions). */
async function approve(server, operationId) {
  let form;
  for (let i = 0; i < 100 && !form; i++) {
    const list = await (await fetch(`${server.sim}/approval/_control/approvals`)).json();
    form = list.items.find((a) => a.operationId === operationId && a.status === 'PENDING');
    if (!form) await new Promise((r) => setTimeout(r, 200));
  }
  assert.ok(form, `an approval form for ${operationId}`);
  await simCall(server, `/approval/_control/approvals/${form.approvalId}/approve`);
}

/** submit posts a request as account straight to the API. */
async function submit(server, account, operationId, targetKey, reason, extra = {}) {
  return fetch(`${server.base}/api/requests`, {
    method: 'POST',
    headers: { 'X-Auth-Request-User': account, 'Idempotency-Key': operationId, 'Content-Type': 'application/json' },
    body: JSON.stringify({ targetKey, reason, ...extra }),
  });
}

/** noHorizontalScroll fails when the page is wider than the window. */
async function noHorizontalScroll(page, what) {
  const { scroll, client } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
  assert.ok(scroll <= client, `${what}: the page is ${scroll} px wide in a ${client} px window`);
}

const envelope = (data) => ({ status: 200, contentType: 'application/json', body: JSON.stringify({ code: 'OK', message: '', data }) });

/** view is a request as GET /api/requests/{id} answers it. */
function view(i, p, extra = {}) {
  const step = states.steps.find((s) => s.name === p.step);
  return {
    operationId: `op-${i}`,
    subject: 'alice',
    targetKey: 'payments-db-readonly',
    targetTitle: 'Payments DB (read-only)',
    reason: 'quarterly audit',
    days: 7,
    status: p.status,
    step: { code: step.code, name: step.name },
    hint: p.hint,
    createdAt: '2026-12-01T09:00:00Z',
    updatedAt: '2026-12-01T09:30:00Z',
    expiresAt: '2026-12-08T09:00:00Z',
    ...extra,
  };
}

describe('words for users, in a real browser', { skip: skip || false }, () => {
  let bin;
  let server;
  let production;
  let chrome;
  before(async () => {
    bin = buildRelease('');
    // Generous: the form tests send refused bodies, which the rate limit counts.
    server = await startServer({ bin, applyLimit: 100 });
    production = await startServer({ bin, production: true });
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
    await server?.stop();
    await production?.stop();
    if (bin) rmSync(dirname(bin), { recursive: true, force: true });
  });

  it('every (step, state) pair the API can return reads in words in "my requests": no code, a status, and the right "What to do"', async () => {
    const page = await newPage(chrome.browser, server.base, 'alice');
    const items = states.pairs.map((p, i) => view(i, p));
    await page.route(/\/api\/requests\?/, (route) => route.fulfill(envelope({ items, nextCursor: '' })));
    await page.goto('/requests');
    const rows = page.locator('[data-testid=my-requests] tbody tr');
    await rows.first().waitFor();
    assert.equal(await rows.count(), states.pairs.length);
    const seen = await rows.evaluateAll((trs) =>
      trs.map((tr) => ({
        id: tr.getAttribute('data-operation-id'),
        text: tr.innerText,
        status: tr.querySelector('.status')?.textContent ?? '',
        todo: tr.querySelector('[data-testid=todo]')?.textContent ?? '',
        again: tr.querySelector('[data-testid=request-again]')?.getAttribute('href') ?? '',
      })),
    );
    for (const [i, p] of states.pairs.entries()) {
      const r = seen.find((x) => x.id === `op-${i}`);
      const what = `${p.step} / ${p.status} / ${p.hint}`;
      assert.ok(r, what);
      assert.doesNotMatch(r.text, rawCode, `${what}: a raw code in "${r.text}"`);
      assert.ok(r.status && r.status !== 'In progress', `${what}: the state has no words of its own ("${r.status}")`);
      assert.ok(r.todo.length > 10, `${what}: no "What to do"`);
      // Ended requests (in effect, rejected, closed, access removed) say
      // what their end means; every other one with this hint says it.
      if (p.hint === 'CONTACT_MAINTAINERS' && !['VALIDATED', 'REJECTED', 'CLOSED', 'REVOKED'].includes(p.status)) {
        assert.match(r.todo, /Contact the team that runs changeflow/, what); // ui.contact's fallback
      }
      if (['VALIDATED', 'REJECTED', 'CLOSED'].includes(p.status) || p.hint !== 'NONE' || /FAILED$/.test(p.status)) {
        assert.doesNotMatch(r.todo, /on its way/, `${what}: "${r.todo}"`);
      }
      if (p.status === 'VALIDATED') assert.match(r.todo, /you have access until/, what);
      if (p.status === 'REVOKED') assert.match(r.todo, /Your access was removed on .*UTC; you can ask again/, what);
      if (p.status === 'REVOKE_FAILED') assert.match(r.todo, /so you still have it/, what);
      if (p.status === 'REJECTED' || p.status === 'CLOSED' || p.status === 'REVOKED') {
        assert.equal(r.again, `/request/payments-db-readonly?again=op-${i}`, `${what}: "Request again" links to the target's form, filled in like it`);
      } else {
        assert.equal(r.again, '', `${what}: no "Request again" while the request is not over`);
      }
    }
    // The target by its title, the time stamp with its zone.
    assert.match(seen[0].text, /Payments DB \(read-only\)/);
    assert.match(seen[0].text, /UTC|GMT/, `the time stamp names its zone: ${seen[0].text}`);
    await page.context().close();
  });

  it('every step reads in words on the request page, with the title, reason and days; "Access until" only once in effect', async () => {
    const page = await newPage(chrome.browser, server.base, 'alice');
    let answer = null;
    await page.route(/\/api\/requests\/op-step-/, (route) => route.fulfill(envelope(answer)));
    await page.goto('/targets');
    const detail = page.locator('[data-testid=request-detail]');
    for (const [i, s] of states.steps.entries()) {
      // A pair the API gives for this step: its own binding when it names
      // one, else the first.
      const p = states.pairs.find((x) => x.step === s.name && x.status === 'VALIDATED' && /CALLED_BACK|RECONCILED/.test(s.name)) ??
        states.pairs.find((x) => x.step === s.name && x.status === 'MERGING') ?? states.pairs.find((x) => x.step === s.name);
      answer = { ...view(i, p), operationId: `op-step-${i}` };
      await page.evaluate((to) => {
        window.history.pushState(null, '', to);
        window.dispatchEvent(new Event('changeflow:navigate'));
      }, `/requests/op-step-${i}`);
      await page.locator(`[data-testid=request-detail][data-operation-id=op-step-${i}]`).waitFor();
      const text = await detail.innerText();
      assert.doesNotMatch(text, rawCode, `${s.name}: a raw code in "${text}"`);
      assert.ok((await detail.locator('[data-testid=step]').innerText()).length > 5, `${s.name}: the step has no words`);
      assert.match(text, /Payments DB \(read-only\)/);
      assert.match(await detail.locator('[data-testid=reason]').innerText(), /^quarterly audit$/);
      assert.match(await detail.locator('[data-testid=days]').innerText(), /^7$/);
      assert.equal(await detail.locator('[data-testid=access-until]').count(), p.status === 'VALIDATED' ? 1 : 0,
        `${s.name} / ${p.status}: "Access until" only once in effect`);
    }
    assert.match(await page.locator('h1').innerText(), /^Access to Payments DB \(read-only\)$/);
    await page.context().close();
  });

  it('a real rejection: the request page says so in words, offers "Request again" and no "Access until"; the target, reason and days are the ones asked', async () => {
    const page = await newPage(chrome.browser, server.base, 'bob');
    await page.goto('/request/billing-dashboard');
    await page.fill('textarea[name=reason]', 'invoice check');
    await page.fill('input[name=days]', '3');
    const operationId = await page.getAttribute('form', 'data-operation-id');
    await page.click('button[type=submit]');
    await page.locator('[data-testid=submitted] a', { hasText: 'Follow it' }).click();
    const detail = page.locator('[data-testid=request-detail]');
    await detail.locator('.status', { hasText: 'Waiting for approval' }).waitFor({ timeout: 20000 });
    const waiting = await detail.innerText();
    assert.match(waiting, /Billing dashboard/);
    assert.match(waiting, /invoice check/);
    assert.match(await detail.locator('[data-testid=days]').innerText(), /^3$/);
    assert.doesNotMatch(waiting, /Access until/, 'no "Access until" before access is granted');
    assert.doesNotMatch(waiting, rawCode, waiting);
    assert.match(await detail.locator('[data-testid=todo]').innerText(), /waits for the approvers/);

    const approvals = await (await fetch(`${server.sim}/approval/_control/approvals`)).json();
    const form = approvals.items.find((a) => a.operationId === operationId);
    assert.ok(form, `an approval form for ${operationId}`);
    const rejected = await fetch(`${server.sim}/approval/_control/approvals/${form.approvalId}/reject`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ comment: 'not for this quarter' }),
    });
    assert.equal(rejected.status, 200);
    await detail.locator('.status.bad', { hasText: 'Rejected' }).waitFor({ timeout: 20000 });
    await detail.locator('[data-testid=approver-comment]', { hasText: '“not for this quarter”' }).waitFor();
    const text = await detail.innerText();
    assert.match(text, /The approver said no/);
    assert.doesNotMatch(text, /on its way|Access until/);
    assert.doesNotMatch(text, rawCode, text);
    await detail.locator('[data-testid=request-again]').click();
    await page.waitForURL(`**/request/billing-dashboard?again=${operationId}`);
    // Filled in like the rejected request: its reason and days.
    await page.locator('[data-testid=asking-again]').waitFor();
    assert.equal(await page.inputValue('textarea[name=reason]'), 'invoice check');
    assert.equal(await page.inputValue('input[name=days]'), '3');
    await page.context().close();
  });

  it('the user picker is the local run\'s only: a production configuration on loopback shows none and never sends its header', async () => {
    for (const [name, srv, picker] of [
      ['the local run', server, true],
      ['a production configuration', production, false],
    ]) {
      const page = await newPage(chrome.browser, srv.base, 'alice');
      const headers = [];
      page.on('request', (r) => {
        const u = r.headers()['x-auth-request-user'];
        if (u) headers.push(`${r.url()}: ${u}`);
      });
      await page.goto('/');
      await page.locator('[data-testid=welcome], [data-testid=targets]').first().waitFor();
      // The app config has arrived once "Sign in" shows (both have OIDC).
      await page.locator('button', { hasText: 'Sign in' }).waitFor();
      assert.equal(await page.locator('select[name=user]').count(), picker ? 1 : 0, `${name}: picker`);
      if (picker) {
        await page.locator('[data-testid=targets]').waitFor();
        assert.ok(headers.length > 0, `${name}: the picked user is sent`);
      } else {
        await page.waitForTimeout(300);
        assert.deepEqual(headers, [], `${name}: the picker's header is never sent`);
        assert.match(await page.locator('[data-testid=welcome]').innerText(), /Sign in/);
      }
      await page.context().close();
    }
  });

  it('a sign-in the directory does not know sees who to ask, and no page', async () => {
    // carol is nobody of the local directory: /api/me answers 403
    // UNKNOWN_ACCOUNT and the app shows its words instead of the pages.
    const page = await newPage(chrome.browser, server.base, 'carol');
    const me = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/me');
    await page.goto('/');
    const answer = await me;
    assert.equal(answer.status(), 403);
    assert.equal((await answer.json()).code, 'UNKNOWN_ACCOUNT');
    const banner = page.locator('[data-testid=unknown-account]');
    await banner.waitFor();
    assert.match(await banner.innerText(), /does not know your account.*Ask the team that runs changeflow/s);
    assert.doesNotMatch(await page.locator('main').innerText(), /UNKNOWN_ACCOUNT|403/);
    assert.equal(await page.locator('[data-testid=targets]').count(), 0, 'no targets page behind the banner');
    await page.context().close();
  });

  it('the Operations tab shows only for callers who hold an operations rule, and the API still refuses the others', async () => {
    for (const [account, shown] of [
      ['alice', false],
      ['olivia', true],
      ['adam', true],
    ]) {
      const page = await newPage(chrome.browser, server.base, account);
      const me = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/me');
      await page.goto('/');
      await (await me).finished();
      await page.locator('[data-testid=targets]').waitFor();
      await page.waitForTimeout(100);
      assert.equal(await page.locator('header nav a', { hasText: 'Operations' }).count(), shown ? 1 : 0, `${account}: Operations tab`);
      if (!shown) {
        // Typing the address is no way around it: the page says in words
        // what the console needs, and the console's calls are refused.
        await page.goto('/console/batches');
        await page.locator('[data-testid=no-console]', { hasText: 'It needs an operations permission' }).waitFor();
        const refused = await page.evaluate(async (a) => {
          const r = await fetch('/ops/batches', { headers: { 'X-Auth-Request-User': a } });
          return [r.status, (await r.json()).code];
        }, account);
        assert.deepEqual(refused, [403, 'ACCESS_DENIED'], `${account}: the console's calls`);
      }
      await page.context().close();
    }
  });

  it('a closed target, a target outside its window and an unknown key are explained before anyone types: no form', async () => {
    const page = await newPage(chrome.browser, server.base, 'alice');
    // The window's state depends on the clock; the server's answer for a
    // target outside it is faked in the server's own words.
    await page.route('**/api/targets', async (route) => {
      const res = await route.fetch();
      const env = await res.json();
      for (const t of env.data.items) {
        if (t.key === 'prod-console') Object.assign(t, { open: false, why: 'outside the test window 09:00–17:00 UTC' });
      }
      await route.fulfill({ response: res, json: env });
    });
    for (const [path, words] of [
      ['/request/legacy-ftp', /^Closed to requests\. This target takes no requests: its owners have closed it\.$/],
      ['/request/prod-console', /^Test window \(closed now\)\. Requests are accepted only inside the test window 09:00–17:00 UTC; come back then\.$/],
      ['/request/no-such-target', /There is no target no-such-target\. Pick one from the targets\./],
    ]) {
      await page.goto(path);
      await page.locator('[data-testid=no-form]').waitFor();
      assert.match(await page.locator('[data-testid=no-form] .note').innerText(), words, path);
      assert.equal(await page.locator('form, textarea, input[name=days]').count(), 0, `${path}: no form to fill in for nothing`);
    }
    await page.context().close();
  });

  it('the form says the maximum days up front and checks what the server checks, in the server\'s words, refusing a long reason instead of cutting it', async () => {
    const page = await newPage(chrome.browser, server.base, 'alice');
    const posts = [];
    page.on('request', (r) => r.method() === 'POST' && new URL(r.url()).pathname === '/api/requests' && posts.push(r));
    await page.goto('/request/payments-db-readonly');
    assert.match(await page.locator('[data-testid=max-days]').innerText(), /up to 30 days/);
    assert.equal(await page.getAttribute('input[name=days]', 'max'), '30');
    assert.match(await page.locator('form').innerText(), /1 to 30; leave empty for 30/);

    // What the server answers to the same bodies: the browser must say the same.
    const server400 = async (body) => {
      const r = await submit(server, 'alice', `probe-${Math.random()}`, 'payments-db-readonly', body.reason, body.days === undefined ? {} : { days: body.days });
      assert.equal(r.status, 400);
      return (await r.json()).message;
    };
    const long = 'x'.repeat(501);
    for (const [reason, days, field] of [
      ['audit', '31', 'days'],
      ['audit', '0', 'days'],
      [long, '', 'reason'],
      ['line one\nline two', '', 'reason'],
      ['   ', '', 'reason'],
    ]) {
      await page.fill('textarea[name=reason]', reason);
      await page.fill('input[name=days]', days);
      await page.click('button[type=submit]');
      const shown = await page.locator(`[data-testid=${field}-error]`).innerText();
      const said = await server400({ reason, days: days === '' ? undefined : Number(days) });
      assert.equal(shown, said, `${JSON.stringify(reason).slice(0, 20)}/${days}: the browser says what the server says`);
      assert.equal(await page.inputValue('textarea[name=reason]'), reason, 'nothing is cut');
    }
    assert.match(await page.locator('[data-testid=reason-count]').innerText(), /of at most 500 characters/);
    assert.equal(posts.length, 0, 'nothing invalid was sent');

    // A refusal only the server can make: its field message beside the field.
    await page.route('**/api/requests', (route) =>
      route.request().method() === 'POST'
        ? route.fulfill({
            status: 400,
            contentType: 'application/json',
            body: JSON.stringify({ code: 'INVALID_ARGUMENT', message: 'days must be between 1 and 5 for this target.', data: { fields: [{ field: 'days', problem: 'must be between 1 and 5 for this target' }] } }),
          })
        : route.continue(),
    );
    await page.fill('textarea[name=reason]', 'audit');
    await page.fill('input[name=days]', '7');
    await page.click('button[type=submit]');
    assert.equal(await page.locator('[data-testid=days-error]').innerText(), 'days must be between 1 and 5 for this target.');
    assert.equal(await page.isDisabled('button[type=submit]'), false, 'the form stays usable');
    await page.context().close();
  });

  it('REQUEST_IN_PROGRESS and ALREADY_IN_EFFECT link to the request concerned, with the date in words', async () => {
    const page = await newPage(chrome.browser, server.base, 'alice');
    await page.goto('/request/billing-dashboard');
    await page.fill('textarea[name=reason]', 'first');
    const first = await page.getAttribute('form', 'data-operation-id');
    await page.click('button[type=submit]');
    await page.locator('[data-testid=submitted]').waitFor();

    await page.goto('/request/billing-dashboard');
    await page.fill('textarea[name=reason]', 'second');
    await page.click('button[type=submit]');
    const refused = page.locator('[data-testid=refused]');
    await refused.waitFor();
    assert.match(await refused.innerText(), /already on its way/);
    assert.equal(await refused.locator('[data-testid=refused-link]').getAttribute('href'), `/requests/${first}`);
    assert.doesNotMatch(await refused.innerText(), /REQUEST_IN_PROGRESS|[{}]/);

    // In effect: the server's 409 names the request and until when.
    await page.route('**/api/requests', (route) =>
      route.request().method() === 'POST'
        ? route.fulfill({
            status: 409,
            contentType: 'application/json',
            body: JSON.stringify({
              code: 'ALREADY_IN_EFFECT',
              message: 'You already have this access until 2026-12-08T09:00:00Z. You can renew it from 2026-12-06T09:00:00Z.',
              data: { operationId: 'op-granted', expiresAt: '2026-12-08T09:00:00Z', renewFrom: '2026-12-06T09:00:00Z' },
            }),
          })
        : route.continue(),
    );
    await page.goto('/request/payments-db-readonly');
    await page.fill('textarea[name=reason]', 'third');
    await page.click('button[type=submit]');
    await refused.waitFor();
    const text = await refused.innerText();
    assert.match(text, /You already have this access, until December 8, 2026 \(Dec 8, 2026, 09:00 AM UTC\)/);
    assert.doesNotMatch(text, /2026-12-08T/, 'the date in words, not RFC 3339');
    // Before its renewal window opens: from when it can be renewed, in words.
    assert.match(await refused.locator('[data-testid=refused-renew-from]').innerText(), /^You can renew it from .*UTC\.\s*$/);
    assert.doesNotMatch(text, /2026-12-06T/);
    await refused.locator('[data-testid=refused-link]').click();
    await page.waitForURL('**/requests/op-granted');
    await page.context().close();
  });

  it('operators: batches list their requests as links, each batch links to its page, a request\'s batch links to it; the configuration is grouped and searchable; the look-up box fits an operationId', async () => {
    const id = 'ux-batch-1';
    assert.equal((await submit(server, 'adam', id, 'payments-db-readonly', 'batch links', { days: 2 })).status, 202);
    await approve(server, id);
    let batchId = 0;
    for (let i = 0; i < 150 && !batchId; i++) {
      const v = await (await fetch(`${server.base}/api/requests/${id}`, { headers: { 'X-Auth-Request-User': 'adam' } })).json();
      batchId = v.data.batchId ?? 0;
      if (!batchId) await new Promise((r) => setTimeout(r, 200));
    }
    assert.ok(batchId > 0, 'the request joined a batch');

    const page = await newPage(chrome.browser, server.base, 'olivia');
    await page.goto('/console/batches');
    const row = page.locator(`[data-testid=batches] tr[data-batch="${batchId}"]`);
    await row.waitFor();
    assert.equal(await row.locator(`[data-testid=members] a[href="/console/requests/${id}"]`).innerText(), id);
    await row.locator(`a[href="/console/batches/${batchId}"]`).click();
    const detail = page.locator('[data-testid=batch-detail]');
    await detail.getByText(`Batch #${batchId}`).waitFor();
    await detail.locator(`a[href="/console/requests/${id}"]`).click();
    await page.waitForURL(`**/console/requests/${id}`);
    await page.locator('[data-testid=ops-request] [data-testid=batch-link]').click();
    await page.waitForURL(`**/console/batches/${batchId}`);

    // The person's own page links the batch for an operator (adam, admin).
    const adam = await newPage(chrome.browser, server.base, 'adam');
    await adam.goto(`/requests/${id}`);
    await adam.locator('[data-testid=batch-link]').click();
    await adam.waitForURL(`**/console/batches/${batchId}`);
    await adam.context().close();

    // The look-up box shows a whole operationId.
    await page.goto('/console');
    await page.fill('input[name=operationId]', '3f2b7c1e-9a4d-4c2b-8e1f-0a9b8c7d6e5f');
    const fits = await page.locator('input[name=operationId]').evaluate((el) => el.scrollWidth <= el.clientWidth);
    assert.ok(fits, 'the look-up box fits an operationId');

    // The configuration: groups, folding, search.
    await page.goto('/console/config');
    const config = page.locator('[data-testid=config]');
    await config.locator('details[data-group=ratelimit]').waitFor();
    const groups = await config.locator('details.group').count();
    assert.ok(groups >= 5, `grouped by the keys' first segment (${groups} groups)`);
    await page.getByRole('button', { name: 'Fold all', exact: true }).click();
    assert.equal(await config.locator('details.group[open]').count(), 0, 'every group folds');
    await config.locator('details[data-group=ratelimit] summary').click();
    assert.equal(await config.locator('details.group[open]').count(), 1, 'one group unfolds');
    await page.fill('input[name=config-search]', 'apply.limit');
    const rows = config.locator('tr[data-key]');
    await config.locator('tr[data-key="ratelimit.apply.limit"]').waitFor();
    for (const key of await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-key')))) {
      assert.match(key, /apply\.limit/, 'the search leaves only matching items');
    }
    await page.fill('input[name=config-search]', 'no-such-item-anywhere');
    await config.getByText('No item matches.').waitFor();
    await page.context().close();
  });

  it('every page fits a phone (390 px) and a desktop without horizontal scroll; one first-visit banner; screenshots of both widths', async () => {
    mkdirSync(shots, { recursive: true });
    const id = 'ux-layout-1';
    assert.equal((await submit(server, 'alice', id, 'payments-db-readonly', 'a reason long enough to wrap on a phone, with a-very-long-unbroken-token-that-must-wrap-too', { days: 5 })).status, 202);
    for (const [width, label] of [
      [1180, 'desktop'],
      [390, 'phone'],
    ]) {
      // First visit: nobody picked yet, one banner.
      const fresh = await newPage(chrome.browser, server.base, '', { width, height: 800 });
      await fresh.goto('/');
      await fresh.locator('[data-testid=welcome]').waitFor();
      assert.equal(await fresh.locator('main .note').count(), 1, `${label}: one first-visit banner`);
      await noHorizontalScroll(fresh, `${label} first visit`);
      await fresh.context().close();

      for (const [account, path, name, ready] of [
        ['alice', '/', 'targets', '[data-testid=targets]'],
        ['alice', '/request/payments-db-readonly', 'submit', 'form'],
        ['alice', '/request/legacy-ftp', 'closed-target', '[data-testid=no-form]'],
        ['alice', '/requests', 'my-requests', '[data-testid=my-requests]'],
        ['alice', `/requests/${id}`, 'request', '[data-testid=request-detail]'],
        ['olivia', `/console/requests/${id}`, 'console-request', '[data-testid=step-history]'],
        ['olivia', '/console/batches', 'console-batches', '[data-testid=run-round]'],
        ['olivia', '/console/config', 'console-config', '[data-testid=config]'],
        ['olivia', '/console/deploy-callbacks', 'console-deploy', 'section h1'],
        ['olivia', '/console/unowned', 'console-unowned', '[data-testid=unowned-clean]'],
        ['alice', '/nowhere', 'not-found', 'section h1'],
      ]) {
        const page = await newPage(chrome.browser, server.base, account, { width, height: 800 });
        await page.goto(path);
        await page.locator(ready).first().waitFor();
        await page.waitForTimeout(150);
        assert.equal(await page.locator('main .note[data-testid=welcome]').count(), 0, `${label} ${name}: no banner once someone acts`);
        await noHorizontalScroll(page, `${label} ${name}`);
        // The configuration's picture shows its groups folded: unfolded
        // it is a hundred rows (checked for width above).
        if (name === 'console-config') await page.getByRole('button', { name: 'Fold all', exact: true }).click();
        await page.screenshot({ path: join(shots, `${name}-${label}.png`), fullPage: true });
        await page.context().close();
      }
    }
  });
});
