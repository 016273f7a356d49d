// Browser test of a failed request's page (docs/webapp.md): its check
// pipeline fails; the page names whom to contact — the ui.contact item —
// instead of an anonymous "the maintainers". Against the real binary and
// its simulators. Run: npm test --prefix web.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { launchBrowser, newPage, skipReason, startServer } from './harness.js';

const skip = skipReason();
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
});
