package httpapi

import (
	"context"
	"net/http"
	"slices"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/identity"
	"changeflow/internal/notify"
	"changeflow/internal/store"
)

// NotificationStore backs the console's view of the notification outbox
// (docs/notifications.md, "For operators"): *store.Store.
type NotificationStore interface {
	OutboxStats(ctx context.Context) (store.OutboxStats, error)
	OutboxDeadLetters(ctx context.Context, limit int) ([]store.OutboxEvent, error)
	OutboxDisabledChannels(ctx context.Context) (map[string]store.DisabledChannel, error)
	OutboxReplay(ctx context.Context, eventID string) (bool, error)
	OutboxEnableChannel(ctx context.Context, channel string) (bool, error)
}

// deadLettersMax bounds the dead letters one answer lists.
const deadLettersMax = 200

// deadLetterView is one dead letter as the console lists it.
type deadLetterView struct {
	EventID     string      `json:"eventId"`
	Kind        notify.Kind `json:"kind"`
	OperationID string      `json:"operationId,omitempty"`
	Summary     string      `json:"summary"`
	Attempts    int         `json:"attempts"`
	// LastError is what the channels that failed answered, by name.
	LastError string    `json:"lastError"`
	CreatedAt time.Time `json:"createdAt"`
}

// disabledChannelView is a channel whose destination said it is gone.
type disabledChannelView struct {
	Channel    string    `json:"channel"`
	DisabledAt time.Time `json:"disabledAt"`
	Reason     string    `json:"reason"`
}

// notificationsView is GET /ops/notifications's answer.
type notificationsView struct {
	Pending              int                   `json:"pending"`
	Dead                 int                   `json:"dead"`
	OldestPendingSeconds float64               `json:"oldestPendingSeconds"`
	DeadLetters          []deadLetterView      `json:"deadLetters"`
	DisabledChannels     []disabledChannelView `json:"disabledChannels"`
}

// handleOpsNotifications is GET /ops/notifications?limit=: the outbox at a
// glance — how many events wait and for how long, the dead letters
// (newest first, limit 1..200, default 50) with what failed, and the
// channels turned off by a 410.
func (s *Server) handleOpsNotifications() http.Handler {
	return s.opsCall(config.RouteOpsRequestGet, nil, func(r *http.Request) (string, any, error) {
		st := s.deps.Business.Notifications
		if st == nil {
			return "", nil, domain.Internal("ops notifications: no store wired", nil)
		}
		f := &fieldErrors{}
		limit := queryLimit(r.URL.Query().Get("limit"), 50, deadLettersMax, f)
		if err := f.err(); err != nil {
			return "", nil, err
		}
		ctx := r.Context()
		stats, err := st.OutboxStats(ctx)
		if err != nil {
			return "", nil, domain.Internal("ops notifications", err)
		}
		dead, err := st.OutboxDeadLetters(ctx, limit)
		if err != nil {
			return "", nil, domain.Internal("ops notifications", err)
		}
		off, err := st.OutboxDisabledChannels(ctx)
		if err != nil {
			return "", nil, domain.Internal("ops notifications", err)
		}
		v := notificationsView{Pending: stats.Pending, Dead: stats.Dead, OldestPendingSeconds: stats.OldestPending.Seconds(),
			DeadLetters: []deadLetterView{}, DisabledChannels: []disabledChannelView{}}
		for _, e := range dead {
			v.DeadLetters = append(v.DeadLetters, deadLetterView{EventID: e.EventID, Kind: e.Kind, OperationID: e.OperationID,
				Summary: notify.Describe(e.Data.Data, e.Data.Request, "").Summary, Attempts: e.Attempts,
				LastError: e.LastError, CreatedAt: e.CreatedAt.UTC()})
		}
		for _, c := range off {
			v.DisabledChannels = append(v.DisabledChannels, disabledChannelView{Channel: c.Channel, DisabledAt: c.DisabledAt.UTC(), Reason: c.Reason})
		}
		slices.SortFunc(v.DisabledChannels, func(a, b disabledChannelView) int {
			if a.Channel < b.Channel {
				return -1
			}
			return 1
		})
		return "", v, nil
	})
}

// handleOpsNotificationReplay is POST /ops/notifications/{eventId}/replay:
// the dead letter is due again, its attempts reset; the channels that had
// taken it do not hear of it twice. Audited, a write of the retrigger
// class.
func (s *Server) handleOpsNotificationReplay() http.Handler {
	return s.opsWrite(config.RouteOpsRequestRetrigger, []string{"eventId"},
		func(r *http.Request, _ identity.Identity, _ map[string]any) (string, domain.Code, any, error) {
			id := r.PathValue("eventId")
			st := s.deps.Business.Notifications
			if st == nil {
				return id, "", nil, domain.Internal("ops replay notification: no store wired", nil)
			}
			ok, err := st.OutboxReplay(r.Context(), id)
			switch {
			case err != nil:
				return id, "", nil, domain.Internal("ops replay notification", err)
			case !ok:
				return id, "", nil, domain.Errorf(domain.CodeNotFound, "No dead notification has this id; it may have been replayed already.", "replay notification %q", id)
			}
			return id, domain.CodeOK, struct {
				EventID  string `json:"eventId"`
				Replayed bool   `json:"replayed"`
			}{id, true}, nil
		})
}

// handleOpsNotificationChannelEnable is POST
// /ops/notifications/channels/{channel}/enable: a channel a 410 turned
// off hears of new events again (the events delivered meanwhile stay
// skipped for it). Audited, a write of the retrigger class.
func (s *Server) handleOpsNotificationChannelEnable() http.Handler {
	return s.opsWrite(config.RouteOpsRequestRetrigger, []string{"channel"},
		func(r *http.Request, _ identity.Identity, _ map[string]any) (string, domain.Code, any, error) {
			ch := r.PathValue("channel")
			st := s.deps.Business.Notifications
			if st == nil {
				return ch, "", nil, domain.Internal("ops enable channel: no store wired", nil)
			}
			ok, err := st.OutboxEnableChannel(r.Context(), ch)
			switch {
			case err != nil:
				return ch, "", nil, domain.Internal("ops enable channel", err)
			case !ok:
				return ch, "", nil, domain.Errorf(domain.CodeNotFound, "No channel of this name is turned off.", "enable channel %q", ch)
			}
			return ch, domain.CodeOK, struct {
				Channel string `json:"channel"`
				Enabled bool   `json:"enabled"`
			}{ch, true}, nil
		})
}
