// The fingerprint of everything the build reads, so that a stale committed
// build is caught without Node: `npm run build` writes it next to the
// build (internal/web/dist.sha256), TestCommittedBuildMatchesSources in
// internal/web recomputes it in Go, and build-if-changed.mjs (make run)
// rebuilds only when it differs.
//
// Definition (mirrored in internal/web/freshness_test.go): the files
// index.html, package.json, package-lock.json, tsconfig.json,
// vite.config.ts and everything under src/ and public/, by their path
// relative to web/ with "/" separators, sorted; the fingerprint is the
// SHA-256 of the lines "<path> <sha256 of the content, hex>\n".
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export const webDir = join(dirname(fileURLToPath(import.meta.url)), '..');
export const stampFile = join(webDir, '..', 'internal', 'web', 'dist.sha256');

const topFiles = ['index.html', 'package.json', 'package-lock.json', 'tsconfig.json', 'vite.config.ts'];
const trees = ['src', 'public'];

function walk(dir, out) {
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else out.push(p);
  }
}

export function sourceHash() {
  const files = topFiles.map((f) => join(webDir, f)).filter((f) => existsSync(f));
  for (const t of trees) walk(join(webDir, t), files);
  const rel = files.map((f) => relative(webDir, f).split(sep).join('/')).sort();
  const h = createHash('sha256');
  for (const r of rel) {
    h.update(`${r} ${createHash('sha256').update(readFileSync(join(webDir, r))).digest('hex')}\n`);
  }
  return h.digest('hex');
}

export function committedHash() {
  return existsSync(stampFile) ? readFileSync(stampFile, 'utf8').trim() : '';
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const h = sourceHash();
  if (process.argv.includes('--write')) writeFileSync(stampFile, `${h}\n`);
  console.log(h);
}
