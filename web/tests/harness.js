// Test harness for the browser tests: the real changeflow binary, built
// from this checkout and started on free ports with a throwaway SQLite
// database and the embedded simulators, and Debian's chromium driven by
// playwright-core. Nothing is downloaded.
import { spawn, execFileSync } from 'node:child_process';
import { createServer } from 'node:net';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
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
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** The local profile's configuration, on free ports and a temp database. */
function configYAML(dir, applyLimit, simPort) {
  const sim = `http://127.0.0.1:${simPort}`;
  return `
server:
  listen: 127.0.0.1:0
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
    committer: local-committer-token
    approver1: local-approver-1-token
    approver2: local-approver-2-token
approval:
  baseURL: ${sim}/approval/
permission:
  baseURL: ${sim}/permission/
oidc:
  issuer: ${sim}/oidc/
callbacks:
  tokens:
    approval: test-callback-token
    deploy: test-callback-token
    gitlab: test-webhook-token
identity:
  directoryFile: ${join(dir, 'directory.yaml')}
  trustedProxies: [127.0.0.1/32, "::1/128"]
workflow:
  approveFirst: true
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
}

/** startServer builds the binary into a temp directory and serves it.
 * The binary embeds internal/web/dist, so the app is rebuilt first when
 * web/ changed since the last build: the tests run the sources you see. */
export async function startServer({ applyLimit = 10 } = {}) {
  if (sourceHash() !== committedHash()) {
    execFileSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['run', 'build'], { cwd: webDir, stdio: 'inherit' });
  }
  const dir = mkdtempSync(join(tmpdir(), 'changeflow-web-'));
  const bin = join(dir, 'changeflow');
  execFileSync(process.env.GO || 'go', ['build', '-o', bin, './cmd/changeflow'], { cwd: repoRoot, stdio: 'inherit' });
  writeFileSync(join(dir, 'directory.yaml'), readFileSync(join(repoRoot, 'cmd/changeflow/local/directory.yaml')));
  const cfg = join(dir, 'changeflow.yaml');
  writeFileSync(cfg, configYAML(dir, applyLimit, await freePort()));

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
  return {
    base,
    logs: () => stderr,
    async stop() {
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
      rmSync(dir, { recursive: true, force: true });
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
 * localStorage) acting as account through the local run's user picker. */
export async function newPage(browser, base, account) {
  const context = await browser.newContext({ baseURL: base, viewport: { width: 1180, height: 720 } });
  if (account) {
    await context.addInitScript((a) => {
      if (!window.localStorage.getItem('changeflow.user')) window.localStorage.setItem('changeflow.user', a);
    }, account);
  }
  const page = await context.newPage();
  return page;
}
