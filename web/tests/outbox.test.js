// The notification outbox in the console (GET /ops/notifications) in a
// real browser: the simulators' webhook receiver fails every post, so a
// request's first message runs out of its attempts and waits in the
// console with what went wrong; the receiver comes back, the operator
// delivers it again after confirming, and the receiver gets it — once,
// signed, with the id it was written with.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { launchBrowser, newPage, skipReason, startServer } from './harness.js';

const skip = skipReason();

async function json(r) {
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null, text };
}

describe('the notification outbox in the console', { skip: skip || false }, () => {
  let server;
  let chrome;
  before(async () => {
    server = await startServer({ extra: 'notify:\n  maxAttempts: 2\n  interval: 200ms\n' });
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
    await server?.stop();
  });

  it('a message that ran out of attempts is listed in words and delivered again once the receiver is back', async () => {
    const faults = (body) =>
      fetch(`${server.sim}/hooks/_control/faults`, { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    assert.equal((await faults({ failNext: { status: 500, count: 1000, name: 'local' } })).status, 200);

    const id = 'op-web-outbox';
    const submitted = await fetch(`${server.base}/api/requests`, {
      method: 'POST',
      headers: { 'X-Auth-Request-User': 'alice', 'Idempotency-Key': id, 'Content-Type': 'application/json' },
      body: JSON.stringify({ targetKey: 'payments-db-readonly', reason: 'outbox test', days: 3 }),
    });
    assert.equal(submitted.status, 202, await submitted.text());

    const page = await newPage(chrome.browser, server.base, 'olivia');
    const posts = [];
    page.on('request', (r) => r.method() === 'POST' && posts.push(new URL(r.url()).pathname));
    await page.goto('/console');
    await page.click('nav.tabs a[href="/console/notifications"]');
    const row = page.locator('[data-testid=dead-letters] tr', { hasText: 'alice asked for access to payments-db-readonly' });
    await row.waitFor({ timeout: 30000 });
    assert.match(await row.innerText(), /2 attempt\(s\): webhook:local: .*500/);
    assert.match(await page.locator('[data-testid=outbox-depth]').innerText(), /ran out of attempts/);
    const eventId = await row.getAttribute('data-event');

    // The receiver is back; the operator delivers it again, after confirming.
    assert.equal((await faults({})).status, 200);
    const replay = row.locator(`[data-testid="replay-${eventId}"]`);
    await replay.getByRole('button', { name: 'Deliver again' }).click();
    assert.deepEqual(posts, [], 'nothing is sent before the confirmation');
    await replay.getByRole('button', { name: /^Yes/ }).click();
    await page.locator('[data-testid=done]', { hasText: 'on its way again' }).waitFor();
    assert.deepEqual(posts, [`/ops/notifications/${eventId}/replay`]);

    let got = [];
    for (const deadline = Date.now() + 20000; got.length === 0 && Date.now() < deadline; ) {
      const all = (await json(await fetch(`${server.sim}/hooks/_control/deliveries?name=local`))).body.items;
      got = all.filter((d) => d.id === eventId && d.status === 200);
      if (got.length === 0) await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(got.length, 1, 'delivered once after the replay');
    assert.equal(got[0].verified, true);
    assert.equal(got[0].type, 'dev.changeflow.request.submitted');
    await page.click('[data-testid=notifications] button:has-text("Look again")');
    await page.locator(`[data-testid=dead-letters] tr[data-event="${eventId}"]`).waitFor({ state: 'detached', timeout: 20000 });
    await page.context().close();
  });
});
