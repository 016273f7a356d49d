package outbox_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/notify"
	"changeflow/internal/notify/outbox"
	"changeflow/internal/notify/webhook"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

const secret = "whsec_" + "c2VjcmV0LW9mLXRoZS1yZWNlaXZlci0wMTIzNDU2Nzg5"

// receiver is a webhook endpoint that checks the Standard Webhooks
// signature itself — HMAC-SHA256 of "id.timestamp.body" with the
// base64-decoded secret, "v1,<base64>" — written here from the
// specification, not with the sender's code, and answers what answer says.
type receiver struct {
	mu     sync.Mutex
	got    []notify.Event
	ids    []string
	answer func(n int) int // the status of the n-th post (1-based)
	posts  int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id, ts, sig := req.Header.Get("webhook-id"), req.Header.Get("webhook-timestamp"), req.Header.Get("webhook-signature")
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		panic(err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	ok := false
	for _, s := range strings.Fields(sig) {
		ok = ok || hmac.Equal([]byte(s), []byte(want))
	}
	if !ok {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.posts++
	status := http.StatusNoContent
	if r.answer != nil {
		status = r.answer(r.posts)
	}
	if status < 300 {
		var e notify.Event
		if err := json.Unmarshal(body, &e); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if e.ID != id {
			http.Error(w, "webhook-id is not the event's id", http.StatusBadRequest)
			return
		}
		r.got, r.ids = append(r.got, e), append(r.ids, id)
	}
	w.WriteHeader(status)
}

func (r *receiver) events() []notify.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]notify.Event(nil), r.got...)
}

func hook(t *testing.T, name string, r *receiver) notify.Channel {
	t.Helper()
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	w, err := webhook.New(webhook.Endpoint{Name: name, URL: srv.URL, Secret: secret}, webhook.Options{Timeout: 2 * time.Second})
	require.NoError(t, err)
	return w
}

// failing is a channel that fails until it is told to stop.
type failing struct {
	mu    sync.Mutex
	fail  bool
	sends int
}

func (f *failing) Name() string           { return "flaky" }
func (f *failing) Wants(notify.Kind) bool { return true }
func (f *failing) Send(context.Context, notify.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sends++
	if f.fail {
		return errors.New("connection refused")
	}
	return nil
}

func deliverer(s *store.Store, owner string, set outbox.Settings) *outbox.Deliverer {
	return &outbox.Deliverer{Store: s, Owner: owner, Settings: func() outbox.Settings { return set },
		Lease: time.Minute, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond}
}

// drain runs passes of d until nothing is left to deliver (every event
// done or dead), returning the errors seen.
func drain(t *testing.T, d *outbox.Deliverer) []error {
	t.Helper()
	var errs []error
	for range 200 {
		if _, err := d.Pass(t.Context()); err != nil {
			errs = append(errs, err)
		}
		st, err := d.Store.OutboxStats(t.Context())
		require.NoError(t, err)
		if st.Pending == 0 {
			return errs
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the outbox did not drain")
	return errs
}

// TestDeliversSignedEventsOnceAndInOrder: the events of a request reach
// a webhook in order, signed (verified independently), as CloudEvents
// with the words and links filled in; a second pass sends nothing again.
func TestDeliversSignedEventsOnceAndInOrder(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		until := time.Date(2031, 1, 2, 3, 4, 0, 0, time.UTC)
		data := func(k notify.Kind) store.OutboxNew {
			return store.OutboxNew{Kind: k, OrderKey: "op-1", Data: store.OutboxData{Request: "GRANT", Data: notify.Data{
				OperationID: "op-1", Subject: "alice", Requester: "alice", TargetKey: "billing", Until: &until}}}
		}
		require.NoError(t, s.OutboxAdd(ctx, data(notify.KindRequestSubmitted), data(notify.KindRequestApproved)))
		require.NoError(t, s.OutboxAdd(ctx, data(notify.KindRequestInEffect)))
		r := &receiver{}
		d := deliverer(s, "i1", outbox.Settings{Channels: []notify.Channel{hook(t, "ops", r)}, MaxAttempts: 3, PublicURL: "https://cf.example/"})
		require.Empty(t, drain(t, d))
		got := r.events()
		require.Len(t, got, 3)
		for i, k := range []notify.Kind{notify.KindRequestSubmitted, notify.KindRequestApproved, notify.KindRequestInEffect} {
			require.Equal(t, k.Type(), got[i].Type, "event %d", i)
			require.Equal(t, "1.0", got[i].SpecVersion)
			require.Equal(t, "op-1", got[i].Subject)
			require.Equal(t, "https://cf.example/requests/op-1", got[i].Data.Link)
		}
		require.Equal(t, "Access of alice to billing is in effect until 2031-01-02 03:04 UTC.", got[2].Data.Summary)
		evs, err := s.OutboxEventsOf(ctx, "op-1")
		require.NoError(t, err)
		for i, e := range evs {
			require.Equal(t, store.OutboxDone, e.Status)
			require.Equal(t, e.EventID, got[i].ID, "the stored id is the delivered one")
		}
		require.Empty(t, drain(t, d))
		require.Len(t, r.events(), 3, "nothing is sent twice")
	})
}

// TestRetriesThenDeadLettersAndReplays: a receiver that answers 500 gets
// the event again with the same id until notify.maxAttempts, then it is a
// dead letter; the channel that took it is not sent it again; a replay
// delivers it once the receiver is back. A 410 disables the endpoint.
func TestRetriesThenDeadLettersAndReplays(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		require.NoError(t, s.OutboxAdd(ctx, store.OutboxNew{Kind: notify.KindBatchBlocked, OrderKey: "batch:4",
			Data: store.OutboxData{Data: notify.Data{BatchID: 4, Project: "cfg"}}}))
		good := &receiver{}
		flaky := &failing{fail: true}
		d := deliverer(s, "i1", outbox.Settings{Channels: []notify.Channel{hook(t, "good", good), flaky}, MaxAttempts: 3})
		errs := drain(t, d)
		require.Empty(t, errs)
		require.Equal(t, 3, flaky.sends, "three attempts")
		require.Len(t, good.events(), 1, "the channel that took it hears of it once")
		dead, err := s.OutboxDeadLetters(ctx, 10)
		require.NoError(t, err)
		require.Len(t, dead, 1)
		require.Contains(t, dead[0].LastError, "flaky: connection refused")

		flaky.mu.Lock()
		flaky.fail = false
		flaky.mu.Unlock()
		ok, err := s.OutboxReplay(ctx, dead[0].EventID)
		require.NoError(t, err)
		require.True(t, ok)
		require.Empty(t, drain(t, d))
		require.Equal(t, 4, flaky.sends)
		require.Len(t, good.events(), 1)
		st, err := s.OutboxStats(ctx)
		require.NoError(t, err)
		require.Zero(t, st.Pending+st.Dead)

		// 410: disabled, said so, and the event completes.
		gone := &receiver{answer: func(int) int { return http.StatusGone }}
		d = deliverer(s, "i1", outbox.Settings{Channels: []notify.Channel{hook(t, "gone", gone)}, MaxAttempts: 3})
		require.NoError(t, s.OutboxAdd(ctx, store.OutboxNew{Kind: notify.KindBatchBlocked, OrderKey: "batch:5", Data: store.OutboxData{Data: notify.Data{BatchID: 5}}}))
		require.Empty(t, drain(t, d))
		off, err := s.OutboxDisabledChannels(ctx)
		require.NoError(t, err)
		require.Contains(t, off, "webhook:gone")
		require.NoError(t, s.OutboxAdd(ctx, store.OutboxNew{Kind: notify.KindBatchBlocked, OrderKey: "batch:6", Data: store.OutboxData{Data: notify.Data{BatchID: 6}}}))
		require.Empty(t, drain(t, d))
		require.Equal(t, 1, gone.posts, "a disabled endpoint is not called again")
		st, err = s.OutboxStats(ctx)
		require.NoError(t, err)
		require.Zero(t, st.Pending+st.Dead)
	})
}

// TestTwoInstancesDeliverEachEventOnce: two deliverers draining one
// outbox at once send each event once.
func TestTwoInstancesDeliverEachEventOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		var evs []store.OutboxNew
		for i := range 60 {
			evs = append(evs, store.OutboxNew{Kind: notify.KindBatchBlocked, OrderKey: "batch:" + string(rune('a'+i%7)),
				Data: store.OutboxData{Data: notify.Data{BatchID: int64(i)}}})
		}
		require.NoError(t, s.OutboxAdd(ctx, evs...))
		r := &receiver{}
		ch := hook(t, "both", r)
		var wg sync.WaitGroup
		for _, owner := range []string{"i1", "i2"} {
			d := deliverer(s, owner, outbox.Settings{Channels: []notify.Channel{ch}, MaxAttempts: 3})
			d.Batch = 5
			wg.Go(func() { require.Empty(t, drain(t, d)) })
		}
		wg.Wait()
		seen := map[string]bool{}
		for _, id := range r.ids {
			require.False(t, seen[id], "event %s delivered twice", id)
			seen[id] = true
		}
		require.Len(t, seen, 60)
	})
}
