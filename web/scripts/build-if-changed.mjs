// `make run` calls this: rebuild the embedded app only when its sources
// differ from what the committed build was made from (source-hash.mjs),
// installing the locked dependencies first when they are missing or
// changed. A fresh checkout therefore runs without touching npm.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { committedHash, sourceHash, webDir } from './source-hash.mjs';

const current = sourceHash();
if (current === committedHash()) {
  console.log('web app: build is up to date with web/ sources');
  process.exit(0);
}
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const lock = join(webDir, 'package-lock.json');
const installed = join(webDir, 'node_modules', '.package-lock.json');
if (!existsSync(installed) || readFileSync(installed, 'utf8') === '' || !sameDeps(lock, installed)) {
  console.log('web app: installing locked dependencies (npm ci)');
  execFileSync(npm, ['ci', '--no-audit', '--no-fund'], { cwd: webDir, stdio: 'inherit' });
}
console.log('web app: sources changed, rebuilding internal/web/dist');
execFileSync(npm, ['run', 'build'], { cwd: webDir, stdio: 'inherit' });

// sameDeps compares the lock's package versions with what npm installed.
function sameDeps(lockFile, installedFile) {
  try {
    const want = JSON.parse(readFileSync(lockFile, 'utf8')).packages ?? {};
    const have = JSON.parse(readFileSync(installedFile, 'utf8')).packages ?? {};
    return Object.keys(want)
      .filter((k) => k !== '')
      .every((k) => have[k]?.version === want[k].version);
  } catch {
    return false;
  }
}
