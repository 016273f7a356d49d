package outbox_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/notify"
	"changeflow/internal/notify/mail"
	"changeflow/internal/notify/outbox"
	"changeflow/internal/notify/webhook"
	simmail "changeflow/internal/sim/mail"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// inEffect is alice's "in effect" event of op.
func inEffect(op string) store.OutboxNew {
	return store.OutboxNew{Kind: notify.KindRequestInEffect, OrderKey: op, Data: store.OutboxData{Request: "GRANT",
		Data: notify.Data{OperationID: op, Subject: "alice", Requester: "alice", TargetKey: "billing"}}}
}

// TestAReceiverThatTimesOutOrIsDownGetsRetriesThenADeadLetter: a webhook
// that answers too late (past the channel's timeout) and one that drops
// every connection are each tried notify.maxAttempts times, with the
// backoff between, and then wait as dead letters naming what happened;
// once the receiver answers again, a replay delivers.
func TestAReceiverThatTimesOutOrIsDownGetsRetriesThenADeadLetter(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		var (
			mode  atomic.Int32 // 0 answers, 1 is slow, 2 drops the connection
			posts atomic.Int32
		)
		good := &receiver{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			posts.Add(1)
			switch mode.Load() {
			case 1:
				select {
				case <-time.After(2 * time.Second):
				case <-r.Context().Done():
				}
				return
			case 2:
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					_ = conn.Close()
				}
				return
			}
			good.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		ch, err := webhook.New(webhook.Endpoint{Name: "edge", URL: srv.URL, Secret: secret}, webhook.Options{Timeout: 150 * time.Millisecond, BreakerFailures: 100})
		require.NoError(t, err)
		d := deliverer(s, "i1", outbox.Settings{Channels: []notify.Channel{ch}, MaxAttempts: 3})

		for _, c := range []struct {
			mode int32
			op   string
		}{{1, "slow"}, {2, "down"}} {
			mode.Store(c.mode)
			before := posts.Load()
			require.NoError(t, s.OutboxAdd(ctx, inEffect(c.op)))
			require.Empty(t, drain(t, d))
			require.Equal(t, int32(3), posts.Load()-before, "%s: three attempts", c.op)
			evs, err := s.OutboxEventsOf(ctx, c.op)
			require.NoError(t, err)
			require.Equal(t, store.OutboxDead, evs[0].Status, c.op)
			require.Contains(t, evs[0].LastError, "webhook:edge:", c.op)

			mode.Store(0)
			ok, err := s.OutboxReplay(ctx, evs[0].EventID)
			require.NoError(t, err)
			require.True(t, ok)
			require.Empty(t, drain(t, d))
			var ids []string
			for _, e := range good.events() {
				ids = append(ids, e.ID)
			}
			require.Contains(t, ids, evs[0].EventID, "%s: delivered after the replay", c.op)
		}
	})
}

// TestMailRefusedThenAcceptedLosesNothing: the SMTP server (the
// simulators', a real SMTP exchange over TCP) refuses the first two
// transactions, then takes the third: the requester gets the message
// exactly once, and the event is done after three attempts.
func TestMailRefusedThenAcceptedLosesNothing(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		smtp := simmail.New(simmail.Options{})
		require.NoError(t, smtp.Listen("127.0.0.1:0"))
		t.Cleanup(func() { _ = smtp.Close() })
		smtp.SetFaults(simmail.Faults{RefuseNext: simmail.RefuseNext{Count: 2, Code: 451}})
		host, port, err := net.SplitHostPort(smtp.Addr())
		require.NoError(t, err)
		p, err := strconv.Atoi(port)
		require.NoError(t, err)
		m, err := mail.New(mail.Settings{Host: host, Port: p, From: "changeflow <changeflow@corp.example>"}, mail.Options{
			Lookup: func(_ context.Context, account string) (string, bool, error) {
				return account + "@corp.example", true, nil
			},
		})
		require.NoError(t, err)
		d := deliverer(s, "i1", outbox.Settings{Channels: []notify.Channel{m}, MaxAttempts: 5})
		require.NoError(t, s.OutboxAdd(ctx, inEffect("mailed")))
		require.Empty(t, drain(t, d))

		msgs := smtp.Messages()
		require.Len(t, msgs, 1, "one message however often it was refused")
		require.Equal(t, []string{"alice@corp.example"}, msgs[0].EnvelopeTo)
		evs, err := s.OutboxEventsOf(ctx, "mailed")
		require.NoError(t, err)
		require.Equal(t, store.OutboxDone, evs[0].Status)
		require.Equal(t, 3, evs[0].Attempts, "refused twice, taken the third time")
	})
}
