package httpapi

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/identity"
)

// opsCall runs an ops read and records it: every ops call writes one
// audit record (docs/api.md, "Operations endpoints") with the query and path parameters, the
// reserved __authenticatedOperator set by the server after them
// (opsParams), masked and truncated (auditParams). The outcome is the
// answer's code. Reads are not idempotent actions, so each call is its
// own record (a fresh key).
func (s *Server) opsCall(action string, pathParams []string, run func(r *http.Request) (resource string, data any, err error)) http.Handler {
	return s.opsCallWriting(action, pathParams, run, func(w http.ResponseWriter, _ *http.Request, data any) {
		respond(w, s.deps.Logger, domain.CodeOK, data)
	})
}

// opsCallWriting is opsCall with its own writer of a success (a download
// such as GET /ops/reviews/{id}?format=csv); errors answer the envelope.
func (s *Server) opsCallWriting(action string, pathParams []string, run func(r *http.Request) (resource string, data any, err error),
	write func(w http.ResponseWriter, r *http.Request, data any)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := identity.FromContext(r.Context())
		client := map[string]any{}
		for k, v := range r.URL.Query() {
			if len(v) == 1 {
				client[k] = v[0]
			} else {
				client[k] = v
			}
		}
		for _, p := range pathParams {
			client[p] = r.PathValue(p)
		}
		params := opsParams(client, res.Identity)
		resource, data, err := run(r)
		outcome := domain.CodeOK
		if err != nil {
			outcome = domain.ErrorCode(err)
		}
		s.audit(context.WithoutCancel(r.Context()), res.Identity, action, resource, "ops-"+uuid.NewString(), params, string(outcome))
		if err != nil {
			writeError(w, r, s.deps.Logger, err)
			return
		}
		write(w, r, data)
	})
}

// handleOpsConfig is GET /ops/config: every configuration item's
// effective value (secrets masked), its source, and whether and why it
// fell back — from the snapshot in force.
func (s *Server) handleOpsConfig() http.Handler {
	return s.opsCall(config.RouteOpsConfigGet, nil, func(r *http.Request) (string, any, error) {
		if s.deps.Business.Config == nil {
			return "config", nil, domain.Internal("ops config: no configuration source wired", nil)
		}
		snap := s.deps.Business.Config.Current()
		items := snap.Effective()
		fell := 0
		for _, it := range items {
			if it.FellBack {
				fell++
			}
		}
		unknown := snap.Unknown()
		if unknown == nil {
			unknown = []string{}
		}
		return "config", struct {
			Version  uint64              `json:"version"`
			LoadedAt time.Time           `json:"loadedAt"`
			FellBack int                 `json:"fellBack"`
			Unknown  []string            `json:"unknownKeys"`
			Items    []config.Resolution `json:"items"`
		}{snap.Version(), snap.LoadedAt().UTC(), fell, unknown, items}, nil
	})
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// encodeIDCursor is an opaque page cursor over the last row id of a page;
// the prefix keeps one listing's cursor from being accepted by another.
func encodeIDCursor(prefix string, id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(prefix + strconv.FormatInt(id, 10)))
}

// decodeIDCursor reads a cursor made by encodeIDCursor with the same prefix.
func decodeIDCursor(prefix, what, c string) (int64, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(raw) <= len(prefix) || string(raw[:len(prefix)]) != prefix {
		return 0, errors.New(what + ": malformed")
	}
	id, err := strconv.ParseInt(string(raw[len(prefix):]), 10, 64)
	if err != nil || id <= 0 {
		return 0, errors.New(what + ": malformed")
	}
	return id, nil
}
