import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig, type Plugin } from 'vite';

// The release-safety guard (src/boot/recover.js) must be listening before
// any module of the app is requested, and must work when none of them
// loads, so it is inlined into index.html ahead of the module script
// rather than bundled (docs/webapp.md, "Release safety").
function inlineRecoveryGuard(): Plugin {
  const file = fileURLToPath(new URL('./src/boot/recover.js', import.meta.url));
  return {
    name: 'changeflow-inline-recovery-guard',
    transformIndexHtml: {
      order: 'pre',
      handler: () => [
        { tag: 'script', children: readFileSync(file, 'utf8'), injectTo: 'head-prepend' },
      ],
    },
  };
}

export default defineConfig({
  plugins: [inlineRecoveryGuard()],
  // The release label, empty in the committed build. The browser tests
  // build a second release with CHANGEFLOW_RELEASE=B, so its hashed files
  // differ from the committed ones (tests/release.test.js).
  define: { __RELEASE__: JSON.stringify(process.env.CHANGEFLOW_RELEASE ?? '') },
  build: {
    // Committed and embedded by internal/web (go:embed), so go build and
    // go test never need Node.
    outDir: '../internal/web/dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    sourcemap: false,
    target: 'es2022',
  },
  server: {
    // `npm run dev --prefix web` next to `make run`: the API goes to the
    // local run.
    proxy: { '/api': 'http://127.0.0.1:8080', '/ops': 'http://127.0.0.1:8080' },
  },
});
