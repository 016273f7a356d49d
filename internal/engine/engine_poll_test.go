package engine_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/engine"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestPollIntervalSourceIsReadBeforeEveryWait: with PollInterval an hour,
// only a PollIntervalSource answering a short interval lets the idle
// poller find a row that became due after its first look (nothing wakes
// it). The source is first read after that first look, so the row is
// submitted only then.
func TestPollIntervalSourceIsReadBeforeEveryWait(t *testing.T) {
	t.Parallel()
	storetest.RaceOnSQLite(t, func(t *testing.T, s *store.Store) {
		firstWait := make(chan struct{})
		var once sync.Once
		c := newCounter()
		e := newEngine(t, s, "i1", engine.Options{
			PollInterval: time.Hour,
			PollIntervalSource: func() time.Duration {
				once.Do(func() { close(firstWait) })
				return 10 * time.Millisecond
			},
		}, map[string]engine.Step{"ok": okStep(c, "")})
		require.NoError(t, e.Start(t.Context()))
		select {
		case <-firstWait:
		case <-time.After(10 * time.Second):
			t.Fatal("the poller never read its interval source")
		}
		submit(t, s, "op-late", "ok")
		select {
		case op := <-c.ch:
			require.Equal(t, "op-late", op)
		case <-time.After(10 * time.Second):
			t.Fatal("a row due after the first look was never run: the source's interval was not used")
		}
	})
}

// TestPollIntervalSourceFallsBack: a non-positive answer of the source
// keeps PollInterval, and without a source the default is one second.
func TestPollIntervalSourceFallsBack(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, s *store.Store) {
		e := newEngine(t, s, "i1", engine.Options{
			PollInterval:       300 * time.Millisecond,
			PollIntervalSource: func() time.Duration { return 0 },
		}, nil)
		require.Equal(t, 300*time.Millisecond, e.PollInterval())

		d, err := engine.New(engine.Options{Store: s, Owner: "i2", Workers: 1, Lease: time.Minute})
		require.NoError(t, err)
		require.Equal(t, time.Second, d.PollInterval())
	})
}
