// Package web serves changeflow's single-page app (docs/webapp.md): the built
// files embedded in the binary, with the cache and fallback rules that keep
// pages open across a release working.
//
// The sources live in web/ at the repository root; `npm run build --prefix
// web` writes the built files into dist/ here, and they are committed, so
// `go build` and `go test` never need Node.
package web
