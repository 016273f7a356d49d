// The release scenario of docs/webapp.md ("Release safety") with two real builds on one origin:
// a page opened on release A survives the server being replaced by
// release B, whose hashed files have other names.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildRelease, freePort, launchBrowser, newPage, skipReason, startServer } from './harness.js';

const skip = skipReason();

describe('a release while a page is open', { skip: skip || false }, () => {
  let binA;
  let binB;
  let chrome;
  let dir;
  const servers = [];
  before(async () => {
    binA = buildRelease('');
    binB = buildRelease('B');
    dir = mkdtempSync(join(tmpdir(), 'changeflow-release-'));
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
    for (const s of servers) await s.stop();
    for (const b of [binA, binB]) if (b) rmSync(dirname(b), { recursive: true, force: true });
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a lazily loaded route of release A, asked for after the swap to B, reloads exactly once and works on B', async () => {
    const port = await freePort();
    const a = await startServer({ bin: binA, dir, port });
    servers.push(a);
    const page = await newPage(chrome.browser, a.base, 'olivia');
    const documents = [];
    page.on('request', (r) => r.resourceType() === 'document' && documents.push(r.url()));
    await page.goto('/');
    await page.locator('[data-testid=targets]').waitFor();
    assert.equal(await page.locator('.brand[data-release]').count(), 0, 'release A is the committed build');

    // The release: A stops, B serves the same origin and database.
    await a.stop();
    servers.pop();
    const b = await startServer({ bin: binB, dir, port });
    servers.push(b);

    // A's page opens the console, whose chunk only A had.
    await page.click('header nav a[href="/console"]');
    await page.locator('section[data-release=B]').waitFor({ timeout: 10000 });
    await page.getByRole('heading', { name: 'Operations console' }).waitFor();
    assert.equal(documents.length, 2, `one automatic reload, got ${documents.join(', ')}`);
    assert.match(documents[1], /\/console\?__reload=\d+$/);
    assert.equal(new URL(page.url()).search, '', 'the cache-busting parameter is dropped once the page runs');
    assert.equal(await page.getByRole('button', { name: 'Refresh page' }).count(), 0);
    await page.waitForTimeout(1000);
    assert.equal(documents.length, 2, 'no further reload');
    await page.context().close();
  });
});
