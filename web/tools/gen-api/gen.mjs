// Writes web/src/api.gen.ts, the API's types, from docs/openapi.yaml —
// the same description the Go tests hold every answer to — so the app's
// types cannot drift from what the server sends. With --check it writes
// nothing and fails when the checked-in file differs from what the
// generator makes now (make test runs it, like a stale build).
import { readFileSync, writeFileSync } from 'node:fs';
import openapiTS, { astToString } from 'openapi-typescript';

const spec = new URL('../../../docs/openapi.yaml', import.meta.url);
const out = new URL('../../src/api.gen.ts', import.meta.url);

const header = `// Generated from docs/openapi.yaml by openapi-typescript
// (web/tools/gen-api/gen.mjs): do not edit. After changing the API
// description, run \`npm run gen:api --prefix web\` and commit the result.

`;

const text = header + astToString(await openapiTS(spec));

if (process.argv.includes('--check')) {
  let have = '';
  try {
    have = readFileSync(out, 'utf8');
  } catch {
    // A missing file is stale too.
  }
  if (have !== text) {
    console.error('web/src/api.gen.ts differs from docs/openapi.yaml: run `npm run gen:api --prefix web` and commit it');
    process.exit(1);
  }
  console.log('web/src/api.gen.ts matches docs/openapi.yaml');
} else {
  writeFileSync(out, text);
  console.log('wrote web/src/api.gen.ts');
}
