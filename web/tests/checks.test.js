// The console's deployment checks (GET /ops/checks, the report
// `changeflow doctor` prints) in a real browser: green where the
// simulated GitLab protects changeflow/*, red with what to change once a
// maintainer removes the protection.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { launchBrowser, newPage, skipReason, startServer } from './harness.js';

const skip = skipReason();

describe('the deployment checks in the console', { skip: skip || false }, () => {
  let server;
  let chrome;
  before(async () => {
    server = await startServer({});
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
    await server?.stop();
  });

  it('an operator sees changeflow/* protected, and a problem with what to change once the protection is removed', async () => {
    const page = await newPage(chrome.browser, server.base, 'olivia');
    await page.goto('/console');
    await page.click('nav.tabs a[href="/console/checks"]');
    const row = page.locator('[data-testid=checks] tr[data-check=protected-branch]');
    await row.waitFor({ timeout: 20000 });
    assert.equal(await row.getAttribute('data-status'), 'ok', await row.innerText());
    assert.equal(await page.locator('[data-testid=checks] tr[data-check=bot-accounts]').getAttribute('data-status'), 'ok');

    const r = await fetch(`${server.sim}/gitlab/api/v4/projects/1/protected_branches/${encodeURIComponent('changeflow/*')}`, {
      method: 'DELETE',
      headers: { 'PRIVATE-TOKEN': 'local-maintainer-token' },
    });
    assert.equal(r.status, 204);
    await page.click('button:has-text("Check again")');
    await page.locator('[data-testid=checks] tr[data-check=protected-branch][data-status=fail]').waitFor({ timeout: 20000 });
    const text = await page.locator('[data-testid=checks] tr[data-check=protected-branch]').innerText();
    assert.match(text, /Problem/);
    assert.match(text, /no protection rule covers changeflow\//);
    assert.match(text, /Settings → Repository → Protected branches/);
    assert.match(await page.locator('[data-testid=checks-verdict]').innerText(), /problem\(s\) to fix/);
    await page.context().close();
  });
});
