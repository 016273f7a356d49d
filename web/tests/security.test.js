// The console's security events (GET /ops/security-events) in a real
// browser: empty in words at first; then a person with push rights (the
// simulator's developer account) prepares changeflow's branch for a
// request before it is asked for, changeflow refuses to build on it, and
// the operator sees the event listed with the request linked, the branch,
// the foreign commit and author, and what changeflow did.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { launchBrowser, newPage, skipReason, sqlite, sqliteSkipReason, startServer } from './harness.js';

const skip = skipReason() || sqliteSkipReason();

async function json(r) {
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null, text };
}

describe('the security events in the console', { skip: skip || false }, () => {
  let server;
  let chrome;
  before(async () => {
    // A request of its own MR (the harness's billing dashboard batches by
    // default), so the event names the request.
    process.env.CHANGEFLOW_TARGETS_BILLING_DASHBOARD_BATCHING = 'false';
    server = await startServer({});
    delete process.env.CHANGEFLOW_TARGETS_BILLING_DASHBOARD_BATCHING;
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
    await server?.stop();
  });

  it('an operator sees a push onto changeflow’s branch listed, with what changeflow did', async () => {
    const page = await newPage(chrome.browser, server.base, 'olivia');
    await page.goto('/console');
    await page.click('nav.tabs a[href="/console/security"]');
    await page.locator('[data-testid=security-none]').waitFor({ timeout: 20000 });
    assert.match(await page.locator('[data-testid=security-none]').innerText(), /No security event/);

    // The attack: where GitLab does not protect changeflow/*, the
    // developer commits a file nobody reviews onto the branch changeflow
    // will use for the request with this operationId.
    const id = 'op-web-foreign';
    const gl = `${server.sim}/gitlab/api/v4/projects/1`;
    const unprotect = await fetch(`${gl}/protected_branches/${encodeURIComponent('changeflow/*')}`, {
      method: 'DELETE',
      headers: { 'PRIVATE-TOKEN': 'local-maintainer-token' },
    });
    assert.equal(unprotect.status, 204);
    const push = await json(
      await fetch(`${gl}/repository/commits`, {
        method: 'POST',
        headers: { 'PRIVATE-TOKEN': 'local-developer-token', 'Content-Type': 'application/json' },
        body: JSON.stringify({
          branch: `changeflow/op-${id}`,
          start_branch: 'main',
          commit_message: 'add a file nobody reviews',
          actions: [
            {
              action: 'create',
              file_path: 'bindings/sneak.yaml',
              content: '- subject: "mallory"\n  expiresAt: "2099-01-01T00:00:00Z"\n  operationId: "forged"\n',
            },
          ],
        }),
      }),
    );
    assert.equal(push.status, 201, push.text);

    // The request with that operationId, approved.
    const submitted = await fetch(`${server.base}/api/requests`, {
      method: 'POST',
      headers: { 'X-Auth-Request-User': 'alice', 'Idempotency-Key': id, 'Content-Type': 'application/json' },
      body: JSON.stringify({ targetKey: 'billing-dashboard', reason: 'security events test' }),
    });
    assert.equal(submitted.status, 202, await submitted.text());
    let form;
    for (const deadline = Date.now() + 20000; !form && Date.now() < deadline; ) {
      const list = (await json(await fetch(`${server.sim}/approval/_control/approvals`))).body;
      form = list.items.find((a) => a.operationId === id && a.status === 'PENDING');
      if (!form) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(form, 'the approval form');
    const decided = await fetch(`${server.sim}/approval/_control/approvals/${form.approvalId}/approve`, { method: 'POST' });
    assert.equal(decided.status, 200);

    // Listed once changeflow found the branch, on "Look again".
    const row = page.locator(`[data-testid=security-events] tr[data-resource="${id}"]`);
    for (const deadline = Date.now() + 60000; (await row.count()) === 0 && Date.now() < deadline; ) {
      await page.click('button:has-text("Look again")');
      await new Promise((r) => setTimeout(r, 500));
    }
    if ((await row.count()) === 0) {
      const evs = await (await fetch(`${server.base}/ops/security-events`, { headers: { 'X-Auth-Request-User': 'olivia' } })).text();
      const req = await (await fetch(`${server.base}/api/requests/${id}`, { headers: { 'X-Auth-Request-User': 'alice' } })).text();
      assert.fail(`no event listed for ${id}: events ${evs}; the request ${req}`);
    }
    assert.equal(await row.getAttribute('data-kind'), 'foreign_branch');
    const text = await row.innerText();
    assert.match(text, /A branch changeflow did not create/);
    assert.match(text, new RegExp(`changeflow/op-${id}`));
    assert.match(text, new RegExp(push.body.id.slice(0, 12)));
    assert.match(text, /Dev Eloper/);
    assert.match(text, /Did not build on that branch/);
    assert.equal(await page.locator('[data-testid=security-none]').count(), 0);

    // The request is linked to its console page, and still took effect.
    await row.locator('[data-testid=security-request]').click();
    await page.waitForURL(`**/console/requests/${id}`);
    let status;
    for (const deadline = Date.now() + 90000; status !== 'VALIDATED' && Date.now() < deadline; ) {
      const r = await json(await fetch(`${server.base}/api/requests/${id}`, { headers: { 'X-Auth-Request-User': 'alice' } }));
      status = r.body?.data?.status;
      if (status !== 'VALIDATED') await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(status, 'VALIDATED');
    const file = await fetch(`${gl}/repository/files/${encodeURIComponent('bindings/billing-dashboard.yaml')}/raw?ref=main`, {
      headers: { 'PRIVATE-TOKEN': 'local-maintainer-token' },
    });
    const onMain = await file.text();
    assert.match(onMain, new RegExp(`operationId: "${id}"`));
    assert.doesNotMatch(onMain, /mallory/);
    const sneak = await fetch(`${gl}/repository/files/${encodeURIComponent('bindings/sneak.yaml')}?ref=main`, {
      headers: { 'PRIVATE-TOKEN': 'local-maintainer-token' },
    });
    assert.equal(sneak.status, 404, 'the person’s file never reaches main');

    // The binding file on main equals the database: one entry per
    // VALIDATED binding of the target (subject, operationId, expiry to the
    // second), nothing else.
    const entries = [...onMain.matchAll(/- subject: "([^"]*)"\n\s+expiresAt: "([^"]*)"\n\s+operationId: "([^"]*)"/g)]
      .map((m) => `${m[1]} ${m[3]} ${new Date(m[2]).toISOString().slice(0, 19)}`)
      .sort();
    assert.equal(entries.length, (onMain.match(/- subject:/g) ?? []).length, `every entry read:\n${onMain}`);
    const rows = sqlite(
      server.db,
      "SELECT subject_id || ' ' || operation_id || ' ' || expires_at FROM binding WHERE target_key = 'billing-dashboard' AND status = 'VALIDATED'",
    )
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        const [subject, op, ...at] = l.split(' ');
        return `${subject} ${op} ${new Date(`${at.join('T')}Z`).toISOString().slice(0, 19)}`;
      })
      .sort();
    assert.deepEqual(entries, rows);
    await page.context().close();
  });
});
