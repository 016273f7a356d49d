// A person's notification preferences in a real browser
// (docs/notifications.md, "Preferences"): alice turns off the e-mail of
// a request sent, sees the safety messages locked on, saves, and finds
// her choice again after a reload; the server holds it (and bob's are
// his own). Against the real binary. Run: npm test --prefix web.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { newPage, serverAndBrowser, skipReason } from './harness.js';

const skip = skipReason();

describe('notification preferences on the web', { skip: skip || false }, () => {
  const live = serverAndBrowser({ applyLimit: 100 });

  it('alice turns a kind off, the safety messages stay on, and the choice is kept', async () => {
    const page = await newPage(live.chrome.browser, live.server.base, 'alice');
    await page.goto('/');
    await page.click('header nav a[href="/notifications"]');
    const list = page.locator('[data-testid=preferences]');
    await list.waitFor({ timeout: 20000 });

    const box = (kind) => page.locator(`[data-testid=preferences] li[data-kind="${kind}"] input[type=checkbox]`);
    assert.equal(await box('request.submitted').isChecked(), true, 'on until chosen');
    assert.equal(await box('access.expiring').isDisabled(), true, 'a safety message is locked on');
    assert.equal(await box('access.removed').isChecked(), true);
    assert.match(await page.locator('li[data-kind="access.expiring"]').innerText(), /about to end.*always on/);
    assert.equal(await page.locator('[data-testid=preferences-save]').isDisabled(), true, 'nothing changed, nothing to save');

    await box('request.submitted').uncheck();
    await page.click('[data-testid=preferences-save]');
    assert.match(await page.locator('[data-testid=done]').innerText(), /^Saved\./);

    await page.reload();
    await list.waitFor();
    assert.equal(await box('request.submitted').isChecked(), false, 'the choice is kept');
    assert.equal(await box('request.in_effect').isChecked(), true, 'the others are untouched');
    await page.context().close();

    const read = async (who) => {
      const res = await fetch(`${live.server.base}/api/notifications/preferences`, { headers: { 'X-Auth-Request-User': who } });
      assert.equal(res.status, 200);
      const body = await res.json();
      return Object.fromEntries(body.data.preferences.map((p) => [p.kind, p.enabled]));
    };
    assert.equal((await read('alice'))['request.submitted'], false, 'the server holds alice’s choice');
    assert.equal((await read('bob'))['request.submitted'], true, 'bob’s are his own');
  });
});
