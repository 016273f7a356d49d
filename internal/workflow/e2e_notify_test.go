package workflow_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/notify"
	"changeflow/internal/notify/outbox"
	"changeflow/internal/notify/webhook"
	"changeflow/internal/sim/simtoken"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/withdraw"
)

// eventsOf are the kinds of id's events in the outbox, in the order written.
func (w *revokeWorld) eventsOf(id string) []notify.Kind {
	w.t.Helper()
	evs, err := w.st.OutboxEventsOf(w.t.Context(), id)
	require.NoError(w.t, err)
	var out []notify.Kind
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

// TestNotificationsOfEachJourney: a grant, a rejection, a withdrawal, a
// renewal with its expiry reminder, a give-back and an expiry each write
// exactly their events, in order, through the real flows; delivered to
// the simulators' webhook receiver (which checks each signature with its
// own code), each event arrives once, verified, with the id it was
// written with. The files on main are what the database says.
func TestNotificationsOfEachJourney(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		ctx := t.Context()
		const (
			submitted = notify.KindRequestSubmitted
			approved  = notify.KindRequestApproved
		)

		w.granted("nt-g1", "amy", tSingle)
		require.Equal(t, []notify.Kind{submitted, approved, notify.KindRequestInEffect}, w.eventsOf("nt-g1"))

		w.submit("nt-rj", "bob", tSingle, true)
		w.until("nt-rj", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		w.decide("nt-rj", "reject")
		w.until("nt-rj", "rejected", at(domain.StepCloseRejected, domain.BindingRejected))
		require.Equal(t, []notify.Kind{submitted, notify.KindRequestRejected}, w.eventsOf("nt-rj"))

		w.submit("nt-wd", "carl", tSingle, true)
		w.until("nt-wd", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		_, err := withdraw.Withdrawer{Flow: withdrawFlow(w.world.deps), Engine: w.eng}.Withdraw(ctx, "nt-wd", "carl")
		require.NoError(t, err)
		w.until("nt-wd", "withdrawn", func(o store.Operation, b store.Binding) bool {
			return b.Status == domain.BindingClosed && o.NextAction == "" && o.LeaseOwner == ""
		})
		require.Equal(t, []notify.Kind{submitted, notify.KindRequestWithdrawn}, w.eventsOf("nt-wd"))

		// Two hours left of an access in effect for a week: the 24h
		// reminder, once however often the scan runs; then the renewal,
		// in effect.
		w.expireIn("nt-g1", 2*time.Hour)
		weekAgo, arg := st.Dialect().NowAdd(-7 * 24 * time.Hour)
		_, err = st.DB().ExecContext(ctx, "UPDATE access_interval SET from_at = "+weekAgo+" WHERE operation_id = 'nt-g1'", arg)
		require.NoError(t, err)
		for range 3 {
			_, err := st.OutboxRemindExpiring(ctx, []time.Duration{72 * time.Hour, 24 * time.Hour}, 100)
			require.NoError(t, err)
		}
		require.Equal(t, []notify.Kind{submitted, approved, notify.KindRequestInEffect, notify.KindAccessExpiring}, w.eventsOf("nt-g1"))
		w.mustRenew("nt-r1", "amy", tSingle, "nt-g1")
		w.until("nt-r1", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingRenewing))
		w.decide("nt-r1", "approve")
		w.until("nt-r1", "in effect", at(domain.StepCalledBack, domain.BindingValidated))
		require.Equal(t, []notify.Kind{submitted, approved, notify.KindRenewalInEffect}, w.eventsOf("nt-r1"))
		n, err := st.OutboxRemindExpiring(ctx, []time.Duration{72 * time.Hour, 24 * time.Hour}, 100)
		require.NoError(t, err)
		require.Zero(t, n, "the renewal's expiry is a week away: no reminder")

		// Given back: the removal tells that the access was removed.
		res, err := revoker(w.deps).Revoke(ctx, "nt-r1", domain.RevokeGivenBack, "given back by its owner", "amy")
		require.NoError(t, err)
		require.True(t, res.Created)
		w.eng.Wake()
		w.until(domain.RevocationID("nt-r1"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		require.Equal(t, []notify.Kind{notify.KindAccessRemoved}, w.eventsOf(domain.RevocationID("nt-r1")))

		// Expired: the same.
		w.granted("nt-g2", "dora", tSingle)
		w.expire("nt-g2")
		require.Equal(t, 1, w.scan().Revoked)
		w.eng.Wake()
		w.until(domain.RevocationID("nt-g2"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		require.Equal(t, []notify.Kind{notify.KindAccessRemoved}, w.eventsOf(domain.RevocationID("nt-g2")))

		// Delivered to the simulators' receiver: each event once, signed,
		// with its stored id, a request's events in their order.
		hook, err := webhook.New(webhook.Endpoint{Name: "local", URL: w.simTS.URL + "/hooks/local", Secret: simtoken.NotifyWebhook}, webhook.Options{})
		require.NoError(t, err)
		d := &outbox.Deliverer{Store: st, Owner: "e2e", Settings: func() outbox.Settings {
			return outbox.Settings{Channels: []notify.Channel{hook}, MaxAttempts: 3, PublicURL: "http://cf.test"}
		}}
		require.Eventually(t, func() bool {
			_, err := d.Pass(ctx)
			require.NoError(t, err)
			s, err := st.OutboxStats(ctx)
			require.NoError(t, err)
			return s.Pending == 0
		}, 30*time.Second, 10*time.Millisecond)
		got := map[string]bool{}
		var order []string
		for _, dl := range w.sim.Hooks.Deliveries() {
			require.Equal(t, "local", dl.Name)
			require.True(t, dl.Verified, "delivery %s verified", dl.ID)
			require.False(t, dl.Duplicate, "delivery %s once", dl.ID)
			got[dl.ID] = true
			order = append(order, dl.ID)
		}
		var want int
		for _, id := range []string{"nt-g1", "nt-rj", "nt-wd", "nt-r1", domain.RevocationID("nt-r1"), "nt-g2", domain.RevocationID("nt-g2")} {
			evs, err := st.OutboxEventsOf(ctx, id)
			require.NoError(t, err)
			last := -1
			for _, e := range evs {
				require.Equal(t, store.OutboxDone, e.Status, "%s %s", id, e.Kind)
				require.True(t, got[e.EventID], "%s %s delivered as %s", id, e.Kind, e.EventID)
				i := slices.Index(order, e.EventID)
				require.Greater(t, i, last, "%s: its events arrive in order", id)
				last = i
				want++
			}
		}
		require.Len(t, order, want, "no other delivery")

		w.filesExact("nt-g1", "nt-r1", "nt-g2")
	})
}

// kindsByOrder are the kinds of the events of order key k, in order.
func kindsByOrder(t *testing.T, st *store.Store, k string) []notify.Kind {
	t.Helper()
	rows, err := st.DB().QueryContext(t.Context(), "SELECT kind FROM outbox_event WHERE order_key = ? ORDER BY id", k)
	require.NoError(t, err)
	defer rows.Close()
	var out []notify.Kind
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, notify.Kind(s))
	}
	require.NoError(t, rows.Err())
	return out
}

// TestNotificationsOfAFailureAndABlockedBatch: a request whose check
// pipeline fails tells its requester it failed, with what to do, once; a
// batch a bot may not approve tells the operators it is blocked, once
// (its members hear nothing of the batch's mechanics); once settled and
// re-run they are in effect, each told once. The files on main are what the database says.
func TestNotificationsOfAFailureAndABlockedBatch(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "fail", "count": 1}, nil)
		w.submit("nt-pf", "carol", tSingle, false)
		w.until("nt-pf", "pipeline failed", at(domain.StepCreatePipelineFailed, domain.BindingCreateFailed))
		require.Equal(t, []notify.Kind{notify.KindRequestSubmitted, notify.KindRequestFailed}, kindsByOrder(t, st, "nt-pf"))
		evs, err := st.OutboxEventsOf(t.Context(), "nt-pf")
		require.NoError(t, err)
		d := notify.Describe(evs[1].Data.Data, evs[1].Data.Request, "")
		require.Contains(t, d.WhatToDo, "withdraw it on its page and ask again")
	})
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		ids := []string{"nt-k1", "nt-k2"}
		r := w.blockedOnAForbiddenBot(ids...)
		require.Equal(t, []notify.Kind{notify.KindBatchBlocked}, kindsByOrder(t, st, "batch:"+itoa(r.BatchID)))
		for _, id := range ids {
			require.Equal(t, []notify.Kind{notify.KindRequestSubmitted, notify.KindRequestApproved}, kindsByOrder(t, st, id),
				"%s: the batch's block is the operators' to hear of, not each member's", id)
		}

		w.reload(nil)
		_, err := batchFlow(w.deps).SettleBatch(t.Context(), r.BatchID, "OPS", "bot fixed", "olivia")
		require.NoError(t, err)
		w.roundsUntilIdle()
		for _, id := range ids {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			require.Equal(t, []notify.Kind{notify.KindRequestSubmitted, notify.KindRequestApproved, notify.KindRequestInEffect},
				kindsByOrder(t, st, id), "%s: in effect once, after the settlement", id)
		}
		require.Equal(t, []notify.Kind{notify.KindBatchBlocked}, kindsByOrder(t, st, "batch:"+itoa(r.BatchID)), "one block, one event")
		w.filesExact(ids...)
	})
}
