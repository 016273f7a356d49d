package web

import (
	"embed"
	"fmt"
	"io/fs"
)

// dist holds the built app. "all:" keeps files whose names start with a dot
// or an underscore, which bundlers do produce.
//
//go:embed all:dist
var dist embed.FS

// Embedded returns the handler over the app built into the binary. The
// files cannot change after the build, so the only way this fails is a
// broken build without dist/index.html — which TestEmbeddedAppIsComplete
// catches before a binary ships; hence the panic, as template.Must.
func Embedded() *Handler {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(fmt.Sprintf("web: embedded app: %v", err))
	}
	h, err := New(sub)
	if err != nil {
		panic(fmt.Sprintf("web: embedded app: %v", err))
	}
	return h
}
