package gitlab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"
)

// WebhookPath is where webhooks go, relative to the Deliverer's base URL.
const WebhookPath = "/callbacks/gitlab"

// hookEvent is one webhook event, kept for redelivery. EventUUID and
// IdempotencyKey stay the same on every (re)delivery; X-Gitlab-Webhook-UUID
// is new per request (gitlab-api-and-reliability.md).
type hookEvent struct {
	Seq            int             `json:"seq"`
	Event          string          `json:"event"` // X-Gitlab-Event
	EventUUID      string          `json:"event_uuid"`
	IdempotencyKey string          `json:"idempotency_key"`
	Deliveries     int             `json:"deliveries"`
	CreatedAt      time.Time       `json:"created_at"`
	Body           json.RawMessage `json:"body"`
	// token is the X-Gitlab-Token of the hook that subscribed when the
	// event happened; set once, before the event is shared.
	token string
}

// emit records a webhook event of p and queues its delivery when one of
// p's hooks subscribes to it, with that hook's token. Caller holds p.mu.
func (s *Server) emit(p *project, event string, payload any) {
	body, err := json.Marshal(payload)
	if err != nil {
		s.log.Warn("webhook encode", "err", err)
		return
	}
	h := p.hookFor(event)
	s.mu.Lock()
	ev := &hookEvent{
		Seq: len(s.events) + 1, Event: event, EventUUID: newUUID(), IdempotencyKey: newUUID(),
		CreatedAt: s.now(), Body: body,
	}
	if h != nil {
		ev.token = h.Token
	}
	s.events = append(s.events, ev)
	s.mu.Unlock()
	if h != nil {
		s.deliver(ev)
	}
}

// deliver queues one delivery of ev (first or repeated).
func (s *Server) deliver(ev *hookEvent) {
	if s.opts.Deliver == nil {
		return
	}
	s.mu.Lock()
	ev.Deliveries++
	s.mu.Unlock()
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitLab/17.4.0-sim")
	h.Set("X-Gitlab-Event", ev.Event)
	h.Set("X-Gitlab-Token", ev.token)
	h.Set("X-Gitlab-Event-UUID", ev.EventUUID)
	h.Set("X-Gitlab-Webhook-UUID", newUUID())
	h.Set("X-Gitlab-Instance", s.baseURL)
	h.Set("Idempotency-Key", ev.IdempotencyKey)
	body := ev.Body
	s.hooks.push(func(ctx context.Context) {
		s.opts.Deliver.Deliver(ctx, WebhookPath, h, body)
	})
}

// redeliver sends event seq again; seq 0 means the latest.
func (s *Server) redeliver(seq int) bool {
	s.mu.Lock()
	var ev *hookEvent
	if seq == 0 && len(s.events) > 0 {
		ev = s.events[len(s.events)-1]
	} else if seq > 0 && seq <= len(s.events) {
		ev = s.events[seq-1]
	}
	s.mu.Unlock()
	if ev == nil {
		return false
	}
	s.deliver(ev)
	return true
}

// mrHook emits a Merge Request Hook. action is one of GitLab's: open,
// close, reopen, update, approved, approval, unapproved, unapproval, merge.
// Caller holds p.mu.
func (s *Server) mrHook(ctx context.Context, p *project, m *mergeRequest, action string, by *user, oldrev string) {
	if by == nil {
		by = m.Author
	}
	attrs := map[string]any{
		"id": m.ID, "iid": m.IID, "title": m.Title, "description": m.Description,
		"state": m.State, "action": action,
		"merge_status":          s.mergeStatus(ctx, p, m),
		"detailed_merge_status": s.detailedStatus(ctx, p, m),
		"source_branch":         m.SourceBranch, "target_branch": m.TargetBranch,
		"source_project_id": p.ID, "target_project_id": p.ID,
		"author_id":        m.Author.ID,
		"last_commit":      map[string]any{"id": m.SHA},
		"merge_commit_sha": nullable(m.MergeCommitSHA),
		"url":              s.mrURL(p, m),
		"created_at":       m.CreatedAt, "updated_at": m.UpdatedAt,
	}
	if oldrev != "" {
		attrs["oldrev"] = oldrev
	}
	s.emit(p, "Merge Request Hook", map[string]any{
		"object_kind":       "merge_request",
		"event_type":        "merge_request",
		"user":              s.userJSON(by),
		"project":           s.hookProject(p),
		"repository":        map[string]any{"name": p.Name, "homepage": s.projectURL(p)},
		"object_attributes": attrs,
	})
}

// pipelineHook emits a Pipeline Hook. Caller holds p.mu.
func (s *Server) pipelineHook(ctx context.Context, p *project, pl *pipeline) {
	m := p.mr(pl.MRIID)
	attrs := map[string]any{
		"id": pl.ID, "iid": pl.IID, "ref": pl.Ref, "sha": pl.SHA, "before_sha": pl.BeforeSHA,
		"source": "merge_request_event", "status": pl.Status, "detailed_status": pl.Status,
		"stages": []string{"test"}, "created_at": pl.CreatedAt, "finished_at": timePtr(pl.FinishedAt),
		"duration": durationSeconds(pl), "url": s.pipelineURL(p, pl),
	}
	payload := map[string]any{
		"object_kind":       "pipeline",
		"object_attributes": attrs,
		"user":              s.userJSON(pl.User),
		"project":           s.hookProject(p),
		"commit":            map[string]any{"id": pl.SHA},
		"builds":            []any{},
	}
	if m != nil {
		payload["merge_request"] = map[string]any{
			"id": m.ID, "iid": m.IID, "title": m.Title, "source_branch": m.SourceBranch,
			"target_branch": m.TargetBranch, "state": m.State,
			"detailed_merge_status": s.detailedStatus(ctx, p, m), "url": s.mrURL(p, m),
		}
	}
	s.emit(p, "Pipeline Hook", payload)
}

func (s *Server) hookProject(p *project) map[string]any {
	return map[string]any{
		"id": p.ID, "name": p.Name, "path_with_namespace": p.Path,
		"web_url": s.projectURL(p), "default_branch": p.DefaultBranch,
	}
}

// newUUID returns a random RFC 4122 version 4 UUID.
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
