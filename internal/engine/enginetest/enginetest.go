// Package enginetest holds what the tests of the engine and of the flows
// on it share: a clock the test moves, and line tallies of after-commit
// side effects, which a worker process (one the test kills) appends to and
// the test awaits.
package enginetest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Clock is an injected engine clock (engine.Clock) the test advances.
type Clock struct{ ns atomic.Int64 }

// NewClock returns a clock at 2030-01-01 00:00 UTC.
func NewClock() *Clock {
	c := &Clock{}
	c.ns.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

// Now is the clock's time.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// AppendLine appends line to the tally at path. It panics on an error:
// it runs in a worker process or a hook, where there is no test to fail.
func AppendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		panic(err)
	}
}

// UntilLines waits (20 s at most) until path holds at least n lines: a
// tally written after a commit lags the state the test observed in the
// database, so it is awaited, not read once. The caller then asserts the
// exact count, so a duplicate still fails.
func UntilLines(t *testing.T, path string, n int, msg string) {
	t.Helper()
	var last int
	var lastErr error
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			last, lastErr = 0, nil
		case err != nil:
			lastErr = err
		default:
			last, lastErr = strings.Count(string(b), "\n"), nil
		}
		if lastErr == nil && last >= n {
			return
		}
		if time.Now().After(deadline) {
			require.FailNowf(t, "timed out", "%s: %s holds %d lines, want %d (last error: %v)", msg, filepath.Base(path), last, n, lastErr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// CountLines is how many lines the tally at path holds (0 when it does
// not exist yet).
func CountLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	require.NoError(t, err)
	return strings.Count(string(b), "\n")
}
