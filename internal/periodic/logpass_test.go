package periodic

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestLogPass pins the outcome log every loop's pass shares: a failure
// warns unless the context ended, a pass that did something logs at
// info, an idle one logs nothing.
func TestLogPass(t *testing.T) {
	cut, cancel := context.WithCancel(t.Context())
	cancel()
	boom := errors.New("boom")
	cases := []struct {
		name string
		ctx  context.Context
		err  error
		did  bool
		want string // "" = nothing logged
	}{
		{"failure warns", t.Context(), boom, true, `level=WARN msg=scan err=boom`},
		{"idle logs nothing", t.Context(), nil, false, ""},
		{"work logs at info", t.Context(), nil, true, `level=INFO msg=revoked n=2`},
		{"a failure cut by shutdown does not warn", cut, boom, false, ""},
		{"work done before the cut still logs", cut, boom, true, `level=INFO msg=revoked n=2`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
				ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey {
						return slog.Attr{}
					}
					return a
				},
			}))
			LogPass(c.ctx, log, c.err, "scan", c.did, "revoked", "n", 2)
			if got := strings.TrimSpace(buf.String()); got != c.want {
				t.Fatalf("logged %q, want %q", got, c.want)
			}
		})
	}
}
