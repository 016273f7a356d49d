package engine_test

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestABusyCompletionIsWrittenAgainNotRerun: the step has done its work,
// and the write of its outcome finds the database busy (here SQLite's
// write lock held by another connection beyond busy_timeout, which is
// what two engines' commits queueing at a load of 20 produce). The engine
// writes the outcome again while its lease lasts. Before, it dropped the
// write, the row stayed leased until the lease expired, and the step ran a
// second time (TestTwoEnginesRunEachOperationExactlyOnce failed so: "ran
// once", 2). SQLite only: it is where one connection can hold the whole
// database's write lock on cue; MariaDB's busy answers (lock wait timeout,
// a cut connection) reach the same ErrBusy branch.
func TestABusyCompletionIsWrittenAgainNotRerun(t *testing.T) {
	t.Parallel()
	path := storetest.NewMigratedDatabase(t, store.DriverSQLite)
	s := storetest.OpenDSN(t, store.DriverSQLite, path+"?_busy_timeout=100")
	_, err := s.Migrate(t.Context())
	require.NoError(t, err)

	// The holder: a plain connection to the same file.
	raw, err := sql.Open(store.DriverSQLite, path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	holder, err := raw.Conn(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Close() })

	entered, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c := newCounter()
	step := engine.StepFunc{Decl: createDecl, Fn: func(ctx context.Context, w engine.Work) (engine.Outcome, error) {
		c.add(w.Operation.OperationID)
		once.Do(func() { close(entered) })
		<-proceed
		return engine.Done("", engine.Transition{Step: domain.StepCreateMRCreated}), nil
	}}
	// The first failed write, whichever way the engine answers it (written
	// again now; dropped before), releases the lock.
	failed := make(chan string, 1)
	logger := slog.New(&signalHandler{Handler: slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}),
		on: func(msg string) {
			if strings.Contains(msg, "database busy") || msg == "workflow: record outcome" {
				select {
				case failed <- msg:
				default:
				}
			}
		}})
	e := newEngine(t, s, "i1", engine.Options{Lease: 5 * time.Second, Logger: logger}, map[string]engine.Step{"hold": step})
	var mu sync.Mutex
	commits := 0
	committed := make(chan struct{}, 4)
	e.OnCommit(func(context.Context, engine.Committed) {
		mu.Lock()
		commits++
		mu.Unlock()
		committed <- struct{}{}
	})
	submit(t, s, "op-busy", "hold")
	require.NoError(t, e.Start(t.Context()))
	<-entered
	_, err = holder.ExecContext(t.Context(), "BEGIN IMMEDIATE")
	require.NoError(t, err)
	close(proceed)
	select {
	case msg := <-failed:
		t.Logf("the outcome's write failed: %s", msg)
	case <-time.After(2 * time.Minute): // a hang guard only
		t.Fatal("the outcome's write never met the held lock")
	}
	_, err = holder.ExecContext(t.Context(), "ROLLBACK")
	require.NoError(t, err)

	select {
	case <-committed:
	case <-time.After(2 * time.Minute): // a hang guard only
		t.Fatal("the outcome was never committed")
	}
	// A dropped write commits only after the lease expired and the step
	// ran again, so the count at the commit tells the two apart.
	require.Equal(t, 1, c.get("op-busy"), "the step ran once: its outcome was written again, not dropped")
	o := waitOp(t, s, "op-busy", finished)
	require.Equal(t, int(domain.StepCreateMRCreated), o.Step)
	e.Stop()
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, commits)
}

// signalHandler passes records on and tells on each message.
type signalHandler struct {
	slog.Handler
	on func(msg string)
}

func (h *signalHandler) Handle(ctx context.Context, r slog.Record) error {
	h.on(r.Message)
	return h.Handler.Handle(ctx, r)
}

func (h *signalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &signalHandler{Handler: h.Handler.WithAttrs(as), on: h.on}
}

func (h *signalHandler) WithGroup(name string) slog.Handler {
	return &signalHandler{Handler: h.Handler.WithGroup(name), on: h.on}
}
