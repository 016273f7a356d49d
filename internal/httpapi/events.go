package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// stepEventView is the data of a "step" event: one transition of the
// request's step history (what the ops detail shows, without the actor and
// the note, which are for operators).
type stepEventView struct {
	OperationID string               `json:"operationId"`
	From        stepView             `json:"from"`
	To          stepView             `json:"to"`
	FromStatus  domain.BindingStatus `json:"fromStatus,omitempty"`
	ToStatus    domain.BindingStatus `json:"toStatus,omitempty"`
	At          time.Time            `json:"at"`
}

// handleRequestEvents is GET /api/requests/{operationId}/events: the
// request's state changes as server-sent events (docs/api.md, "Live
// status"). Opening one spends the caller's "events" bucket (the route's
// rate limit, before authorization); authorization and the admin check's
// rate limit are the status read's (readableRequest); and a caller holds
// at most events.maxStreamsPerCaller open streams on the instance (429
// beyond), within events.maxStreams for everyone (503 beyond). The stream opens with a "request" event (the status
// read's data); each later change sends one "step" event per new step
// (id: the step's history id) and then a "request" event with the new
// state. Last-Event-ID resumes: the steps after it are sent first. A
// comment line every events.heartbeat keeps it open; it ends when the
// client goes, at shutdown (EventFeed.Close), or when the request cannot
// be read any more.
func (s *Server) handleRequestEvents() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		feed := s.deps.Business.Events
		if feed == nil {
			writeError(w, r, s.deps.Logger, domain.Internal("request events: no event feed wired", nil))
			return
		}
		after, err := lastEventID(r)
		if err != nil {
			var f fieldErrors
			f.addMessage("Last-Event-ID", "must be an event id this stream sent (a number)",
				"Last-Event-ID must be an event id this stream sent (a number).")
			s.deps.Logger.Debug("request events: bad Last-Event-ID", "err", err)
			writeError(w, r, s.deps.Logger, f.err())
			return
		}
		read, ok := s.readableRequest(w, r)
		if !ok {
			return
		}
		op := read.Operation
		// The caller is whose quota the stream spends: their account (the
		// route needs a login), else their client address — the rate
		// limiter's subject, so both limits count the same person.
		caller := rateLimitKey("", r, feed.config())
		sub, unsubscribe, err := feed.subscribe(op.OperationID, caller)
		if errors.Is(err, errCallerFull) {
			s.rl.countLimited(streamsPerCallerLabel)
			w.Header().Set("Retry-After", strconv.Itoa(streamRetryAfterSeconds))
			writeError(w, r, s.deps.Logger, domain.Errorf(domain.CodeRateLimited,
				"You have too many live status pages open; close some, or this page will update itself a little later.",
				"caller %s: %w", caller, err))
			return
		}
		if err != nil {
			w.Header().Set("Retry-After", strconv.Itoa(streamRetryAfterSeconds))
			writeError(w, r, s.deps.Logger, domain.Errorf(domain.CodeRetryLater,
				"Live status is not available right now; the status can still be read.", "%w", err))
			return
		}
		defer unsubscribe()

		rc := http.NewResponseController(w)
		heartbeat := s.deps.Business.Config.Current().Events().Heartbeat
		// The stream outlives server.writeTimeout by design; each write
		// gets its own deadline instead, so a client that stops reading is
		// still dropped.
		extend := func() { _ = rc.SetWriteDeadline(time.Now().Add(heartbeat + 10*time.Second)) }
		extend()
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no") // a buffering proxy would hold the events
		w.WriteHeader(http.StatusOK)

		st := &eventStream{s: s, w: w, rc: rc, op: op.OperationID, last: after, resume: after > 0}
		if err := st.send(r.Context()); err != nil {
			s.logStreamEnd(op.OperationID, err)
			return
		}
		beat := time.NewTicker(heartbeat)
		defer beat.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-feed.done:
				return
			case <-beat.C:
				extend()
				if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil {
					return
				}
				if err := rc.Flush(); err != nil {
					return
				}
			case <-sub.changed:
				extend()
				if err := st.send(r.Context()); err != nil {
					s.logStreamEnd(op.OperationID, err)
					return
				}
			}
		}
	})
}

// eventsOpenMessage is the 429 of the events bucket: a client opening
// streams faster than a person reloads a page.
const eventsOpenMessage = "Live status was opened too often; this page will update itself a little later."

// streamRetryAfterSeconds is the Retry-After of a refused stream: a slot
// frees when a stream ends, which the server notices at the client's
// disconnect or the next heartbeat, so a few seconds, not the rate
// window. The web app polls meanwhile and retries with its own back-off.
const streamRetryAfterSeconds = 5

// streamsPerCallerLabel is the changeflow_rate_limited_total label of a
// stream refused by events.maxStreamsPerCaller (the opening rate is the
// bucket "events").
const streamsPerCallerLabel = "eventsPerCaller"

// logStreamEnd logs why a stream ended early (a client that went away is
// not worth a line).
func (s *Server) logStreamEnd(operationID string, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	s.deps.Logger.Info("live status stream ended", "operation", operationID, "err", err)
}

// lastEventID is the Last-Event-ID header (a browser's EventSource sends
// it on reconnect) or, for clients that cannot set headers, the
// lastEventId query parameter; 0 when absent.
func lastEventID(r *http.Request) (int64, error) {
	v := strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	if v == "" {
		v = r.URL.Query().Get("lastEventId")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("last event id %q", v)
	}
	return n, nil
}

// eventStream writes one request's events.
type eventStream struct {
	s  *Server
	w  http.ResponseWriter
	rc *http.ResponseController
	op string
	// last is the highest step id sent (or resumed after).
	last int64
	// resume: the first send replays the steps after last (Last-Event-ID);
	// without it the stream starts at the current state.
	resume bool
	opened bool
	// sent is the last "request" event's data: a change signalled with no
	// new step of the request's own (its revocation moved the binding it
	// shows, events_feed.go) is sent when the view differs from it.
	sent []byte
}

// send writes what is new since the last send: the steps after last (all
// of them on a resume, none on a fresh first send) and, when there were
// any — or on the first send, or when the view changed without a step of
// the request's own (a grant whose revocation moved on) — the request's
// current view. Nothing new (another change signal for the same state)
// writes nothing.
func (e *eventStream) send(ctx context.Context) error {
	st := e.s.deps.Business.Requests
	steps, err := st.OperationStepList(ctx, e.op)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	newest := e.last
	for _, sp := range steps {
		if sp.ID <= e.last {
			continue
		}
		newest = max(newest, sp.ID)
		if !e.opened && !e.resume {
			continue // a fresh stream starts at the current state
		}
		if err := writeEvent(&buf, "step", sp.ID, stepEvent(sp)); err != nil {
			return err
		}
	}
	op, err := st.OperationGet(ctx, e.op)
	if err != nil {
		return err
	}
	v, err := e.s.requestView(ctx, op, true)
	if err != nil {
		return err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if e.opened && newest == e.last && bytes.Equal(data, e.sent) {
		return nil
	}
	if err := writeEvent(&buf, "request", newest, v); err != nil {
		return err
	}
	e.last, e.opened, e.sent = newest, true, data
	if _, err := e.w.Write(buf.Bytes()); err != nil {
		return err
	}
	return e.rc.Flush()
}

func stepEvent(sp store.OperationStep) stepEventView {
	from, to := domain.StepStatus(sp.FromStep), domain.StepStatus(sp.ToStep)
	return stepEventView{
		OperationID: sp.OperationID,
		From:        stepView{Code: sp.FromStep, Name: from.String()},
		To:          stepView{Code: sp.ToStep, Name: to.String()},
		FromStatus:  sp.FromBinding, ToStatus: sp.ToBinding,
		At: sp.CreatedAt.UTC(),
	}
}

// writeEvent appends one event. JSON has no raw newline, so the data is
// one "data:" line; id 0 (a request without history) sends no id.
func writeEvent(buf *bytes.Buffer, event string, id int64, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	buf.WriteString("event: " + event + "\n")
	if id > 0 {
		buf.WriteString("id: " + strconv.FormatInt(id, 10) + "\n")
	}
	buf.WriteString("data: ")
	buf.Write(b)
	buf.WriteString("\n\n")
	return nil
}
