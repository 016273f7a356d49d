package web

import (
	"embed"
	"fmt"
	"io/fs"
	"sync"
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
//
// Every call returns the same handler, read and compressed at the first
// call: a Handler is never changed after New (WithConnectSources returns
// a copy), and tests that build hundreds of servers spent seconds of CPU
// compressing the same files again for each.
func Embedded() *Handler { return embedded() }

var embedded = sync.OnceValue(func() *Handler {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(fmt.Sprintf("web: embedded app: %v", err))
	}
	h, err := New(sub)
	if err != nil {
		panic(fmt.Sprintf("web: embedded app: %v", err))
	}
	return h
})
