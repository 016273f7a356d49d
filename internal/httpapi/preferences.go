package httpapi

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"

	"changeflow/internal/domain"
	"changeflow/internal/identity"
	"changeflow/internal/notify"
)

// PreferenceStore keeps what each person chose to hear of
// (*store.Store: NotifyPreferences, NotifyPreferencesSet).
type PreferenceStore interface {
	NotifyPreferences(ctx context.Context, account string) (map[string]bool, error)
	NotifyPreferencesSet(ctx context.Context, account string, set map[string]bool) error
}

// preferencesAuditAction is the audit action of a saved choice.
const preferencesAuditAction = "notify-preferences"

// preferencesView is GET and PUT /api/notifications/preferences: every
// kind a person may hear of, whether they do, and whether they may change
// it.
type preferencesView struct {
	Preferences []notify.Preference `json:"preferences"`
}

func (s *Server) preferenceStore() (PreferenceStore, error) {
	if s.deps.Business.Preferences == nil {
		return nil, domain.Internal("notification preferences: no store wired", nil)
	}
	return s.deps.Business.Preferences, nil
}

// allowSafetyOptOut is notify.allowSafetyOptOut now (false without a
// configuration: the safety messages stay on).
func (s *Server) allowSafetyOptOut() bool {
	if s.deps.Business.Config == nil {
		return false
	}
	return s.deps.Business.Config.Current().NotifyAllowSafetyOptOut()
}

// preferencesOf is account's preferences as notify.Preferences sees them.
func (s *Server) preferencesOf(ctx context.Context, ps PreferenceStore, account string) (preferencesView, error) {
	set, err := ps.NotifyPreferences(ctx, account)
	if err != nil {
		return preferencesView{}, domain.Internal("read notification preferences", err)
	}
	chosen := make(map[notify.Kind]bool, len(set))
	for k, on := range set {
		chosen[notify.Kind(k)] = on
	}
	return preferencesView{Preferences: notify.Preferences(chosen, s.allowSafetyOptOut())}, nil
}

// handlePreferencesGet is GET /api/notifications/preferences: the
// caller's own, nobody else's.
func (s *Server) handlePreferencesGet() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := identity.FromContext(r.Context())
		ps, err := s.preferenceStore()
		if err == nil {
			var v preferencesView
			if v, err = s.preferencesOf(r.Context(), ps, res.Identity.Account); err == nil {
				w.Header().Set("Cache-Control", "no-store")
				respond(w, s.deps.Logger, domain.CodeOK, v)
				return
			}
		}
		writeError(w, r, s.deps.Logger, err)
	})
}

// handlePreferencesPut is PUT /api/notifications/preferences with
// {"<kind>": true|false, …}: the kinds named are set, the others kept.
// Every bad entry is named and nothing is saved; a safety kind the
// operator does not let people turn off is refused when turned off.
func (s *Server) handlePreferencesPut() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := identity.FromContext(r.Context())
		params := map[string]any{}
		v, err := s.preferencesPut(w, r, res.Identity.Account, params)
		outcome := domain.CodeOK
		if err != nil {
			outcome = domain.ErrorCode(err)
		}
		s.audit(context.WithoutCancel(r.Context()), res.Identity, preferencesAuditAction, "preferences:"+res.Identity.Account,
			"prefs-"+uuid.NewString(), params, string(outcome))
		if err != nil {
			writeError(w, r, s.deps.Logger, err)
			return
		}
		respond(w, s.deps.Logger, domain.CodeOK, v)
	})
}

func (s *Server) preferencesPut(w http.ResponseWriter, r *http.Request, account string, params map[string]any) (preferencesView, error) {
	ps, err := s.preferenceStore()
	if err != nil {
		return preferencesView{}, err
	}
	raw, err := readBody(w, r)
	if err != nil {
		return preferencesView{}, err
	}
	body := map[string]any{}
	if err := decodeJSON(raw, &body); err != nil {
		return preferencesView{}, err
	}
	set, err := decodePreferences(body, s.allowSafetyOptOut())
	if err != nil {
		return preferencesView{}, err
	}
	for k, on := range set {
		params[k] = on
	}
	if err := ps.NotifyPreferencesSet(r.Context(), account, set); err != nil {
		return preferencesView{}, domain.Internal("save notification preferences", err)
	}
	return s.preferencesOf(r.Context(), ps, account)
}

// decodePreferences checks a PUT body: each key a personal kind, each
// value a boolean, a locked kind never turned off.
func decodePreferences(body map[string]any, allowSafetyOptOut bool) (map[string]bool, error) {
	var f fieldErrors
	if len(body) == 0 {
		f.add("body", "must name at least one kind, e.g. {\"request.submitted\": false}")
	}
	set := make(map[string]bool, len(body))
	for _, key := range slices.Sorted(maps.Keys(body)) {
		val := body[key]
		k := notify.Kind(strings.TrimSpace(key))
		on, isBool := val.(bool)
		switch {
		case !k.Personal():
			f.add(key, fmt.Sprintf("is not a kind of message a person chooses; one of %s", personalKindList()))
		case !isBool:
			f.add(key, "must be true or false")
		case !on && k.Safety() && !allowSafetyOptOut:
			f.addMessage(key, "stays on",
				"Messages that your access is about to end or has ended stay on; ask the team that runs changeflow if you need them off.")
		default:
			set[string(k)] = on
		}
	}
	return set, f.err()
}

func personalKindList() string {
	names := make([]string, 0, len(notify.PersonalKinds))
	for _, k := range notify.PersonalKinds {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}
