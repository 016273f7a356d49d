package flowtest

import (
	"maps"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/config"
)

// Targets is the overlay of project 1 with an open target (maxDays 30)
// per key of batching, batching or not as its value says:
// Targets(map[string]bool{"t": false, "tb": true}). No targets leaves the
// configuration's own (none).
func Targets(batching map[string]bool) map[string]any {
	o := map[string]any{"gitlab.projects": []any{"1"}}
	if len(batching) == 0 {
		return o
	}
	targets := map[string]any{}
	for key, b := range batching {
		targets[key] = map[string]any{"accessMode": "OPEN", "batching": b, "maxDays": 30}
	}
	o["targets"] = targets
	return o
}

// Config loads the configuration of overlays over the defaults — a later
// overlay's key replaces an earlier one's — and returns its snapshot the
// way flow.Env.Config wants it. The manager is closed at once: the tests
// read one snapshot and never reload.
func Config(tb testing.TB, overlays ...map[string]any) func() *config.Snapshot {
	tb.Helper()
	o := map[string]any{}
	for _, overlay := range overlays {
		maps.Copy(o, overlay)
	}
	mgr, err := config.Load(tb.Context(), config.Options{Overlay: o})
	require.NoError(tb, err)
	snap := mgr.Current()
	require.NoError(tb, mgr.Close())
	return func() *config.Snapshot { return snap }
}
