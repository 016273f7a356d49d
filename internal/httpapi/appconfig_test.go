package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"changeflow/internal/config"
	"changeflow/internal/metrics"
)

// TestAppConfig: GET /api/app-config answers without a login, names the
// OIDC issuer and client ID only when an issuer is configured, and the
// simulators' pages only when they run embedded on a known port — read
// from the configuration in force on every request.
func TestAppConfig(t *testing.T) {
	cfg := &swapConfig{}
	load := func(ov map[string]any) {
		t.Helper()
		mgr, err := config.Load(t.Context(), config.Options{Overlay: ov})
		if err != nil {
			t.Fatal(err)
		}
		cfg.p.Store(mgr.Current())
		_ = mgr.Close()
	}
	logger := slog.New(slog.DiscardHandler)
	h := NewServer(Deps{Logger: logger, Metrics: metrics.New(logger, "test"), Ready: fakeReady{}, Business: Business{Config: cfg}})
	get := func() (int, http.Header, map[string]any) {
		t.Helper()
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/api/app-config", nil)
		h.ServeHTTP(rec, r)
		conformRecorded(t, r, nil, rec.Code, rec.Header(), rec.Body.Bytes())
		var env struct {
			Code string         `json:"code"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Code != "OK" {
			t.Fatalf("answer %d %s: %v", rec.Code, rec.Body, err)
		}
		return rec.Code, rec.Header(), env.Data
	}

	load(nil)
	code, hdr, data := get()
	if code != 200 || hdr.Get("Cache-Control") != "no-store" || !reflect.DeepEqual(data, map[string]any{"contact": config.DefaultUIContact}) {
		t.Fatalf("nothing configured: %d %q %v, want 200 no-store {contact: the fallback}", code, hdr.Get("Cache-Control"), data)
	}

	for _, tc := range []struct {
		name string
		ov   map[string]any
		want map[string]any
	}{
		{"the local run", map[string]any{"oidc.issuer": "http://127.0.0.1:8090/oidc/", "sim.embedded": true, "sim.listen": "127.0.0.1:8090",
			"identity.trustedProxies": []any{"127.0.0.1/32", "::1/128"}}, map[string]any{
			"oidc":       map[string]any{"issuer": "http://127.0.0.1:8090/oidc/", "clientId": "changeflow"},
			"simulators": map[string]any{"index": "http://127.0.0.1:8090/", "approval": "http://127.0.0.1:8090/approval/_control/ui"},
			"userPicker": true,
		}},
		{"simulators embedded without loopback trust: no picker", map[string]any{"sim.embedded": true, "sim.listen": "127.0.0.1:8090"}, map[string]any{
			"oidc":       map[string]any{"issuer": "http://127.0.0.1:8090/oidc/", "clientId": "changeflow"},
			"simulators": map[string]any{"index": "http://127.0.0.1:8090/", "approval": "http://127.0.0.1:8090/approval/_control/ui"},
		}},
		{"production with an auth proxy on loopback: no picker", map[string]any{"oidc.issuer": "https://id.example",
			"identity.trustedProxies": []any{"127.0.0.1"}}, map[string]any{
			"oidc": map[string]any{"issuer": "https://id.example", "clientId": "changeflow"},
		}},
		{"an audience of its own, simulators on every interface", map[string]any{"oidc.issuer": "https://id.example", "oidc.audience": "cf-web", "sim.embedded": true, "sim.listen": ":9000"}, map[string]any{
			"oidc":       map[string]any{"issuer": "https://id.example", "clientId": "cf-web"},
			"simulators": map[string]any{"index": "http://127.0.0.1:9000/", "approval": "http://127.0.0.1:9000/approval/_control/ui"},
		}},
		{"simulators on a port chosen at start: no links", map[string]any{"sim.embedded": true, "sim.listen": "127.0.0.1:0"}, map[string]any{}},
		{"simulators not embedded", map[string]any{"sim.listen": "127.0.0.1:8090"}, map[string]any{}},
		{"the contact named", map[string]any{"ui.contact": "the platform team, #platform on chat"}, map[string]any{
			"contact": "the platform team, #platform on chat",
		}},
		{"a blank contact: the fallback", map[string]any{"ui.contact": "  "}, map[string]any{}},
	} {
		if _, ok := tc.want["contact"]; !ok {
			tc.want["contact"] = config.DefaultUIContact // every answer names one
		}
		load(tc.ov)
		if _, _, data := get(); !reflect.DeepEqual(data, tc.want) {
			t.Errorf("%s: data = %v, want %v", tc.name, data, tc.want)
		}
	}
}
