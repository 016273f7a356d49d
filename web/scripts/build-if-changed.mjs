// `make run` calls this: rebuild the embedded app only when its sources
// differ from what the committed build was made from (source-hash.mjs),
// installing the locked dependencies first when they are missing or
// changed. A fresh checkout therefore runs without touching npm.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { committedHash, sourceHash, webDir } from './source-hash.mjs';

const current = sourceHash();
if (current === committedHash()) {
  console.log('web app: build is up to date with web/ sources');
  process.exit(0);
}
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
// node_modules is (re)installed when it is missing or was installed from
// another package-lock.json than the one checked out; the stamp records
// the lock it was installed from.
const lockHash = createHash('sha256').update(readFileSync(join(webDir, 'package-lock.json'))).digest('hex');
const installedStamp = join(webDir, 'node_modules', '.changeflow-lock.sha256');
const installedFrom = existsSync(installedStamp) ? readFileSync(installedStamp, 'utf8').trim() : '';
if (installedFrom !== lockHash) {
  console.log('web app: installing the locked dependencies (npm ci)');
  execFileSync(npm, ['ci', '--no-audit', '--no-fund'], { cwd: webDir, stdio: 'inherit' });
  writeFileSync(installedStamp, `${lockHash}\n`);
}
console.log('web app: sources changed, rebuilding internal/web/dist');
execFileSync(npm, ['run', 'build'], { cwd: webDir, stdio: 'inherit' });
