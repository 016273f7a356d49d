// Test harness for the browser tests: the real changeflow binary, built
// from this checkout and started on free ports with a throwaway SQLite
// database and the embedded simulators, and Debian's chromium driven by
// playwright-core. Nothing is downloaded.
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { createServer } from 'node:net';
import { after, before } from 'node:test';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { committedHash, sourceHash, webDir } from '../scripts/source-hash.mjs';

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const chromiumPath = process.env.CHANGEFLOW_CHROMIUM || '/usr/bin/chromium';

/** skipReason is why the browser tests cannot run here, or '' when they
 * can. In CI (CHANGEFLOW_TEST_REQUIRE_SERVICES=1) a missing browser is a
 * failure, not a skip. */
export function skipReason() {
  if (existsSync(chromiumPath)) return '';
  const why = `chromium not found at ${chromiumPath} (apt-get install -y chromium)`;
  if (process.env.CHANGEFLOW_TEST_REQUIRE_SERVICES === '1') {
    throw new Error(`browser tests required (CHANGEFLOW_TEST_REQUIRE_SERVICES=1) but ${why}`);
  }
  console.error(`\n*** SKIPPING the web app's browser tests: ${why} ***\n`);
  return why;
}

/** freePort asks the kernel for a port that is free right now. The
 * simulators need a known address before the server starts, because the
 * configuration names their URLs (the permission service decides the ops
 * routes); the short race with another process is accepted in a test. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** The local profile's configuration, on free ports and a temp database.
 * production: no embedded simulators and no loopback trust — the shape
 * of a production configuration (docs/deploy.md), served on loopback. */
/** testTokens are the servers' secrets: long and distinct, since serve
 * without --local refuses the simulators' published tokens, short ones
 * and shared ones; the embedded simulators use the configured values. */
export const testTokens = {
  committer: 'web-test-committer-4f1c9e2b7a0d3e58',
  approver1: 'web-test-approver1-8a2d5f0c3b6e9a14',
  approver2: 'web-test-approver2-1e7b4c9a2f5d8b03',
  approval: 'web-test-approval-callback-6d3a0f8c1e4b7d92',
  deploy: 'web-test-deploy-callback-2b9e6c3f0a7d4e15',
  gitlab: 'web-test-gitlab-webhook-9c4f1a8e5b2d7c60',
};

function configYAML(dir, applyLimit, simPort, port, production = false, extra = '', approveFirst = true) {
  const sim = `http://127.0.0.1:${simPort}`;
  const yaml = `
server:
  listen: 127.0.0.1:${port}
database:
  driver: sqlite
  dsn: file:${join(dir, 'changeflow.db')}?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate
log:
  level: warn
sim:
  embedded: true
  listen: 127.0.0.1:${simPort}
gitlab:
  baseURL: ${sim}/gitlab/
  projects: [1]
  tokens:
    committer: ${testTokens.committer}
    approver1: ${testTokens.approver1}
    approver2: ${testTokens.approver2}
approval:
  baseURL: ${sim}/approval/
permission:
  baseURL: ${sim}/permission/
oidc:
  issuer: ${sim}/oidc/
callbacks:
  tokens:
    approval: ${testTokens.approval}
    deploy: ${testTokens.deploy}
    gitlab: ${testTokens.gitlab}
identity:
  directoryFile: ${join(dir, 'directory.yaml')}
  trustedProxies: [127.0.0.1/32, "::1/128"]
workflow:
  approveFirst: ${approveFirst}
polling:
  # Decisions reach the service by their callbacks here; the fallback
  # poll of the approval system waits longer than any test, so a test
  # that drops a callback on purpose decides what happens next.
  approval:
    shortInterval: 10m
batch:
  # Rounds every second, so an approved batching request is merged soon.
  interval: 1s
ratelimit:
  window: 60s
  apply:
    limit: ${applyLimit}
access:
  timezone: UTC
targets:
  payments-db-readonly:
    title: Payments DB (read-only)
    file: bindings/payments-db-readonly.yaml
    accessMode: OPEN
    batching: true
    maxDays: 30
  billing-dashboard:
    title: Billing dashboard
    file: bindings/billing-dashboard.yaml
    accessMode: OPEN
    maxDays: 90
    # bob reviews who has access (web/tests/reviews.test.js).
    owners: [bob]
  prod-console:
    title: Production console
    file: bindings/prod-console.yaml
    accessMode: TEST_WINDOW
    window:
      start: "09:00"
      end: "17:00"
    maxDays: 7
  legacy-ftp:
    title: Legacy FTP
    file: bindings/legacy-ftp.yaml
    accessMode: CLOSED
`;
  if (!production) return yaml + extra;
  return yaml.replace('  embedded: true\n', '  embedded: false\n').replace('  trustedProxies: [127.0.0.1/32, "::1/128"]\n', '');
}

/** ensureBuild rebuilds the app when web/ changed since the committed
 * build: the binary embeds internal/web/dist, and the tests must run the
 * sources you see. */
function ensureBuild() {
  if (sourceHash() !== committedHash()) {
    execFileSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['run', 'build'], { cwd: webDir, stdio: 'inherit' });
  }
}

function listFiles(dir, out = []) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) listFiles(p, out);
    else out.push(p);
  }
  return out;
}

/** buildRelease builds the binary into a temp directory and returns its
 * path. release '' is the committed build; any other label is a second
 * release of the same sources (vite with CHANGEFLOW_RELEASE=label, so its
 * hashed files have other names), swapped in for internal/web/dist with
 * go build -overlay — the checkout is never touched. */
export function buildRelease(release = '') {
  ensureBuild();
  const dir = mkdtempSync(join(tmpdir(), `changeflow-bin${release ? '-' + release : ''}-`));
  const bin = join(dir, 'changeflow');
  const args = ['build', '-o', bin];
  if (release) {
    const out = join(dir, 'dist');
    execFileSync(join(webDir, 'node_modules', '.bin', 'vite'), ['build', '--outDir', out, '--emptyOutDir', '--logLevel', 'warn'], {
      cwd: webDir,
      stdio: 'inherit',
      env: { ...process.env, CHANGEFLOW_RELEASE: release },
    });
    const committed = join(repoRoot, 'internal', 'web', 'dist');
    const replace = {};
    for (const f of listFiles(committed)) replace[f] = '';
    for (const f of listFiles(out)) replace[join(committed, relative(out, f))] = f;
    writeFileSync(join(dir, 'overlay.json'), JSON.stringify({ Replace: replace }));
    args.push('-overlay', join(dir, 'overlay.json'));
  }
  execFileSync(process.env.GO || 'go', [...args, './cmd/changeflow'], { cwd: repoRoot, stdio: 'inherit' });
  return bin;
}

/** startServer serves a binary (by default the committed build's) with a
 * data directory (by default a new one) on a port (by default a free one).
 * Two releases share one origin and one database by passing the same dir
 * and port. */
/** extra is YAML appended to the configuration: top-level sections the
 * base one does not have (expiry: …), for a test that needs them.
 * approveFirst false serves the legacy flow (the MR first, its approval
 * once its checks pass). */
export async function startServer({ applyLimit = 10, bin = '', dir = '', port = 0, production = false, extra = '', approveFirst = true } = {}) {
  const ownBin = !bin;
  if (!bin) bin = buildRelease('');
  const ownDir = !dir;
  if (!dir) dir = mkdtempSync(join(tmpdir(), 'changeflow-web-'));
  writeFileSync(join(dir, 'directory.yaml'), readFileSync(join(repoRoot, 'cmd/changeflow/local/directory.yaml')));
  const cfg = join(dir, 'changeflow.yaml');
  const simPort = await freePort();
  writeFileSync(cfg, configYAML(dir, applyLimit, simPort, port, production, extra, approveFirst));

  const child = spawn(bin, ['serve', '--config', cfg], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b) => (stdout += b));
  child.stderr.on('data', (b) => (stderr += b));
  const exited = new Promise((resolve) => child.on('exit', resolve));

  const deadline = Date.now() + 30000;
  let base = '';
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`changeflow exited early (${child.exitCode}):\n${stderr}`);
    const m = /serving on (http:\/\/\S+)/.exec(stdout);
    if (m) {
      try {
        const r = await fetch(`${m[1]}/healthz`);
        if (r.ok) {
          base = m[1];
          break;
        }
      } catch {
        // not yet
      }
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  if (!base) {
    child.kill('SIGKILL');
    throw new Error(`changeflow did not become healthy:\n${stderr}`);
  }
  if (production) {
    return {
      base,
      logs: () => stderr,
      async stop() {
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(t);
        if (ownDir) rmSync(dir, { recursive: true, force: true });
        if (ownBin) rmSync(dirname(bin), { recursive: true, force: true });
      },
    };
  }
  // Approvals are decided by hand in these tests: the served workflow
  // engine would otherwise move requests on after the approval system's
  // automatic 2 s, and the pages' assertions would race it.
  const policy = await fetch(`http://127.0.0.1:${simPort}/approval/_control/policy`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ mode: 'manual' }),
  });
  if (!policy.ok) {
    child.kill('SIGKILL');
    throw new Error(`approval simulator refused the manual policy: ${policy.status}`);
  }
  return {
    base,
    /** sim is the embedded simulators' base URL (…/approval/_control/…). */
    sim: `http://127.0.0.1:${simPort}`,
    /** db is the server's SQLite database file (see sqlite below). */
    db: join(dir, 'changeflow.db'),
    logs: () => stderr,
    async stop() {
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
      if (ownDir) rmSync(dir, { recursive: true, force: true });
      if (ownBin) rmSync(dirname(bin), { recursive: true, force: true });
    },
  };
}

/** launchBrowser starts Debian's chromium headless with the flags this
 * machine needs (no background networking: the network is closed).
 * playwright gives every launch a fresh temporary profile of its own (it
 * refuses --user-data-dir in args). */
export async function launchBrowser() {
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  return {
    browser,
    async close() {
      await browser.close();
    },
  };
}

/** newPage opens a page in a fresh context (own sessionStorage and
 * localStorage) acting as account through the local run's user picker,
 * at a desktop width unless told (390: a phone). */
export async function newPage(browser, base, account, { width = 1180, height = 720 } = {}) {
  // A fixed locale and zone, so the words a test expects ("Dec 8, 2026,
  // 09:00 AM UTC") do not depend on the machine.
  const context = await browser.newContext({ baseURL: base, viewport: { width, height }, locale: 'en-US', timezoneId: 'UTC' });
  if (account) {
    await context.addInitScript((a) => {
      if (!window.localStorage.getItem('changeflow.user')) window.localStorage.setItem('changeflow.user', a);
    }, account);
  }
  const page = await context.newPage();
  return page;
}

export const sqlitePath = process.env.CHANGEFLOW_SQLITE3 || '/usr/bin/sqlite3';

/** sqliteSkipReason is why the tests that write to the server's database
 * behind its back cannot run here, or '' when they can; like a missing
 * browser, a failure in CI (CHANGEFLOW_TEST_REQUIRE_SERVICES=1). */
export function sqliteSkipReason() {
  if (existsSync(sqlitePath)) return '';
  const why = `sqlite3 not found at ${sqlitePath} (apt-get install -y sqlite3)`;
  if (process.env.CHANGEFLOW_TEST_REQUIRE_SERVICES === '1') {
    throw new Error(`sqlite3 required (CHANGEFLOW_TEST_REQUIRE_SERVICES=1) but ${why}`);
  }
  console.error(`\n*** SKIPPING a browser test: ${why} ***\n`);
  return why;
}

/** sqlite runs one SQL statement on a running server's database (WAL, so
 * beside the server's own connections; waits up to 5 s for its write
 * lock). Tests use it to leave the state a crash would have left. */
export function sqlite(db, sql) {
  return execFileSync(sqlitePath, ['-cmd', '.timeout 5000', db, sql], { encoding: 'utf8' });
}

/** entriesOnMain is target's binding file on the simulated GitLab's main,
 * as "subject operationId" lines, sorted: what a test that drives the
 * workflow compares with the database's bindings in effect at its end. */
export async function entriesOnMain(server, file) {
  const r = await fetch(`${server.sim}/gitlab/api/v4/projects/1/repository/files/${encodeURIComponent(file)}/raw?ref=main`, {
    headers: { 'PRIVATE-TOKEN': 'local-maintainer-token' },
  });
  if (r.status === 404) return [];
  assert.equal(r.status, 200);
  const text = await r.text();
  const out = [];
  for (const m of text.matchAll(/subject: "?([^"\n]+)"?\n(?:.*\n)*?\s+operationId: "?([^"\n]+)"?/g)) out.push(`${m[1]} ${m[2]}`);
  return out.sort();
}

/** mainMatchesDatabase checks the end of a test that drives the workflow:
 * target's binding file on main holds exactly the access the database
 * has in effect (VALIDATED), entry by entry; it returns those entries
 * ("subject operationId", sorted) for the test's own expectations. The
 * test must have let every change settle first (nothing renewing or
 * being removed). */
export async function mainMatchesDatabase(server, target) {
  const inDb = sqlite(server.db, `SELECT subject_id || ' ' || operation_id FROM binding WHERE target_key = '${target}' AND status = 'VALIDATED' ORDER BY 1`)
    .trim()
    .split('\n')
    .filter(Boolean);
  assert.deepEqual(await entriesOnMain(server, `bindings/${target}.yaml`), inDb, `the binding file of ${target} on main and the database`);
  return inDb;
}

/** serverAndBrowser starts a server (startServer's options) and chromium
 * before the enclosing describe's tests and stops both after them. The
 * returned object holds them (server, chrome) once the tests run: hooks
 * cannot hand values back any other way. */
export function serverAndBrowser(options = {}) {
  const live = { server: null, chrome: null };
  before(async () => {
    live.server = await startServer(options);
    live.chrome = await launchBrowser();
  });
  after(async () => {
    await live.chrome?.close();
    await live.server?.stop();
  });
  return live;
}

/** submitRequest posts a request as account straight to the API (body:
 * targetKey, reason, days …) and expects it taken. */
export async function submitRequest(server, account, operationId, body) {
  const r = await fetch(`${server.base}/api/requests`, {
    method: 'POST',
    headers: { 'X-Auth-Request-User': account, 'Idempotency-Key': operationId, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(r.status, 202, await r.text());
}

/** approve approves operationId's pending form in the approval simulator,
 * waiting up to 20 s for the form to be asked. */
export async function approve(server, operationId) {
  for (const deadline = Date.now() + 20000; Date.now() < deadline; ) {
    const list = await (await fetch(`${server.sim}/approval/_control/approvals`)).json();
    const form = list.items.find((a) => a.operationId === operationId && a.status === 'PENDING');
    if (form) {
      const r = await fetch(`${server.sim}/approval/_control/approvals/${form.approvalId}/approve`, { method: 'POST', body: '{}' });
      assert.equal(r.status, 200, await r.text());
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`no approval form for ${operationId}`);
}

// renewalFilledIn waits for the renewal form to show its note and to be
// filled in like the access it renews. The fill is an effect that runs
// after the render showing the note, so under load it can lag the note:
// reading the fields at once raced it (an empty reason, seen in CI).
export async function renewalFilledIn(page, timeout = 10000) {
  await page.locator('[data-testid=renewing]').waitFor();
  await page.waitForFunction(() => document.querySelector('textarea[name=reason]')?.value !== '', null, { timeout });
}

/** statusIs polls account's status read of operationId until want holds
 * (a status, or a predicate on the read) and returns that read. */
export async function statusIs(server, account, operationId, want, timeout = 90000) {
  const pred = typeof want === 'function' ? want : (d) => d?.status === want;
  let last;
  for (const deadline = Date.now() + timeout; Date.now() < deadline; ) {
    const r = await fetch(`${server.base}/api/requests/${encodeURIComponent(operationId)}`, { headers: { 'X-Auth-Request-User': account } });
    last = (await r.json()).data;
    if (pred(last)) return last;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.fail(`${operationId} never reached ${want}; last ${JSON.stringify(last)}`);
}
