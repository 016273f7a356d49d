package config

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/notify"
	"changeflow/internal/sim/simtoken"
)

// loadNotify loads one YAML document; err is Load's error.
func loadNotify(t *testing.T, doc string, env map[string]string) (*Snapshot, error) {
	t.Helper()
	opts := testOptions(writeFile(t, t.TempDir(), "changeflow.yaml", doc))
	opts.Getenv = func(k string) string { return env[k] }
	m, err := Load(context.Background(), opts)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = m.Close() })
	return m.Current(), nil
}

const (
	hookURL   = "https://hooks.corp.example/changeflow?token=hook-credential"
	chatURL   = "https://hooks.slack.example/services/T000/B000/chat-credential"
	hookToken = "hook-secret-value"
)

func TestNotifyWebhooks(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		env  map[string]string
		want []NotifyWebhook
		// errHas are the parts the error must contain; nil means no error.
		errHas []string
	}{
		{name: "missing", doc: "log:\n  level: info\n", want: []NotifyWebhook{}},
		{name: "explicit empty list", doc: "notify:\n  webhooks: []\n", want: []NotifyWebhook{}},
		{name: "one, every kind", doc: "notify:\n  webhooks:\n    - name: audit\n      url: " + hookURL + "\n      secret: " + hookToken + "\n",
			want: []NotifyWebhook{{Name: "audit", URL: hookURL, Secret: hookToken}}},
		{name: "types and field case", doc: "notify:\n  webhooks:\n    - Name: audit\n      URL: http://127.0.0.1:9/x\n      Secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n      types: [request.in_effect, access.expiring]\n",
			want: []NotifyWebhook{{Name: "audit", URL: "http://127.0.0.1:9/x", Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
				Types: []notify.Kind{notify.KindRequestInEffect, notify.KindAccessExpiring}}}},
		{name: "two, in order", doc: "notify:\n  webhooks:\n    - {name: b, url: 'http://h/1', secret: s1}\n    - {name: a, url: 'http://h/2', secret: s2, types: batch.blocked}\n",
			want: []NotifyWebhook{{Name: "b", URL: "http://h/1", Secret: "s1"}, {Name: "a", URL: "http://h/2", Secret: "s2", Types: []notify.Kind{notify.KindBatchBlocked}}}},
		{name: "from env as JSON", doc: "log:\n  level: info\n",
			env:  map[string]string{"CHANGEFLOW_NOTIFY_WEBHOOKS": `[{"name":"audit","url":"` + hookURL + `","secret":"` + hookToken + `","types":["request.failed"]}]`},
			want: []NotifyWebhook{{Name: "audit", URL: hookURL, Secret: hookToken, Types: []notify.Kind{notify.KindRequestFailed}}}},
		{name: "no name", doc: "notify:\n  webhooks:\n    - {url: 'http://h/1', secret: s}\n",
			errHas: []string{"notify.webhooks[0] (from file) has no name"}},
		{name: "bad name", doc: "notify:\n  webhooks:\n    - {name: 'a b', url: 'http://h/1', secret: s}\n",
			errHas: []string{"notify.webhooks[0]", "is not a channel name"}},
		{name: "repeated name", doc: "notify:\n  webhooks:\n    - {name: audit, url: 'http://h/1', secret: s}\n    - {name: Audit, url: 'http://h/2', secret: s}\n",
			errHas: []string{`notify.webhooks[1] (from file) "Audit"`, "used by an earlier entry"}},
		{name: "not http", doc: "notify:\n  webhooks:\n    - {name: audit, url: 'ftp://h/hook-credential', secret: s}\n",
			errHas: []string{`notify.webhooks[0] (from file) "audit": url is not an absolute http or https URL`}},
		{name: "no url", doc: "notify:\n  webhooks:\n    - {name: audit, secret: s}\n",
			errHas: []string{`notify.webhooks[0] (from file) "audit" has no url`}},
		{name: "no secret", doc: "notify:\n  webhooks:\n    - {name: audit, url: 'http://h/1'}\n",
			errHas: []string{`notify.webhooks[0] (from file) "audit" has no secret`}},
		{name: "whsec not base64", doc: "notify:\n  webhooks:\n    - {name: audit, url: 'http://h/1', secret: 'whsec_!!hook-credential'}\n",
			errHas: []string{`"audit": the secret starts with "whsec_" but what follows is not base64`}},
		{name: "unknown kind", doc: "notify:\n  webhooks:\n    - {name: audit, url: 'http://h/1', secret: s, types: [request.inEffect]}\n",
			errHas: []string{`"audit": types: unknown event kind "request.inEffect"`, "request.in_effect"}},
		{name: "misspelt field", doc: "notify:\n  webhooks:\n    - {name: audit, url: 'http://h/1', secert: s}\n",
			errHas: []string{"notify.webhooks[0] (from file) has the unknown field 'secert'"}},
		{name: "not a list", doc: "notify:\n  webhooks: " + hookURL + "\n",
			errHas: []string{"notify.webhooks (from file) is not a list of entries"}},
		{name: "entry not a map", doc: "notify:\n  webhooks: ['" + hookURL + "']\n",
			errHas: []string{"notify.webhooks[0] (from file) is not an entry of name, secret, types, url"}},
		{name: "env not YAML", doc: "log:\n  level: info\n", env: map[string]string{"CHANGEFLOW_NOTIFY_WEBHOOKS": `[{"name": "a", "secret": "` + hookToken + `"`},
			errHas: []string{"notify.webhooks (from env) is not a YAML or JSON list of entries"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := loadNotify(t, tc.doc, tc.env)
			if tc.errHas != nil {
				require.Error(t, err)
				require.ErrorIs(t, err, ErrInvalid)
				for _, part := range tc.errHas {
					require.Contains(t, err.Error(), part)
				}
				requireNoCredential(t, err.Error())
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, s.NotifyWebhooks())
		})
	}
}

func TestNotifyChat(t *testing.T) {
	cases := []struct {
		name   string
		doc    string
		want   []NotifyChat
		errHas []string
	}{
		{name: "missing", doc: "log:\n  level: info\n", want: []NotifyChat{}},
		{name: "one", doc: "notify:\n  chat:\n    - {name: ops, url: '" + chatURL + "', types: [batch.blocked, security.foreign_head]}\n",
			want: []NotifyChat{{Name: "ops", URL: chatURL, Types: []notify.Kind{notify.KindBatchBlocked, notify.KindForeignHead}}}},
		{name: "comma-separated types", doc: "notify:\n  chat:\n    - {name: ops, url: '" + chatURL + "', types: 'batch.blocked, request.failed'}\n",
			want: []NotifyChat{{Name: "ops", URL: chatURL, Types: []notify.Kind{notify.KindBatchBlocked, notify.KindRequestFailed}}}},
		{name: "same name as a webhook is fine", doc: "notify:\n  webhooks:\n    - {name: ops, url: 'http://h/1', secret: s}\n  chat:\n    - {name: ops, url: '" + chatURL + "'}\n",
			want: []NotifyChat{{Name: "ops", URL: chatURL}}},
		{name: "repeated name", doc: "notify:\n  chat:\n    - {name: ops, url: '" + chatURL + "'}\n    - {name: ops, url: '" + chatURL + "'}\n",
			errHas: []string{`notify.chat[1] (from file) "ops": the name is used by an earlier entry`}},
		{name: "bad url", doc: "notify:\n  chat:\n    - {name: ops, url: 'hooks.slack.example/chat-credential'}\n",
			errHas: []string{`notify.chat[0] (from file) "ops": url is not an absolute http or https URL`}},
		{name: "unknown kind", doc: "notify:\n  chat:\n    - {name: ops, url: '" + chatURL + "', types: [batch.stuck]}\n",
			errHas: []string{`notify.chat[0] (from file) "ops": types: unknown event kind "batch.stuck"`}},
		{name: "a secret is not a chat field", doc: "notify:\n  chat:\n    - {name: ops, url: '" + chatURL + "', secret: x}\n",
			errHas: []string{"notify.chat[0] (from file) has the unknown field 'secret' (known: name, types, url)"}},
		{name: "types is a map", doc: "notify:\n  chat:\n    - {name: ops, url: '" + chatURL + "', types: {a: b}}\n",
			errHas: []string{`"ops": types is not a list of event kinds`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := loadNotify(t, tc.doc, nil)
			if tc.errHas != nil {
				require.ErrorIs(t, err, ErrInvalid)
				for _, part := range tc.errHas {
					require.Contains(t, err.Error(), part)
				}
				requireNoCredential(t, err.Error())
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, s.NotifyChat())
		})
	}
}

func TestNotifySMTP(t *testing.T) {
	cases := []struct {
		name   string
		doc    string
		want   NotifySMTP
		errHas []string
	}{
		{name: "missing: e-mail off", doc: "log:\n  level: info\n", want: NotifySMTP{Port: DefaultNotifySMTPPort}},
		{name: "from without host is ignored", doc: "notify:\n  smtp:\n    from: not an address\n",
			want: NotifySMTP{Port: 587, From: "not an address"}},
		{name: "full", doc: "notify:\n  smtp:\n    host: smtp.corp.example\n    port: 2525\n    username: cf\n    password: smtp-credential\n    from: changeflow <changeflow@corp.example>\n    startTLS: true\n",
			want: NotifySMTP{Host: "smtp.corp.example", Port: 2525, Username: "cf", Password: "smtp-credential", From: "changeflow <changeflow@corp.example>", StartTLS: true}},
		{name: "env", doc: "log:\n  level: info\n", want: NotifySMTP{Host: "relay", Port: 25, From: "cf@corp.example"}},
		{name: "port clamped", doc: "notify:\n  smtp:\n    host: relay\n    port: 0\n    from: cf@corp.example\n",
			want: NotifySMTP{Host: "relay", Port: 1, From: "cf@corp.example"}},
		{name: "host without from", doc: "notify:\n  smtp:\n    host: relay\n",
			errHas: []string{"notify.smtp.from is empty but notify.smtp.host is set"}},
		{name: "from not an address", doc: "notify:\n  smtp:\n    host: relay\n    from: changeflow\n",
			errHas: []string{"notify.smtp.from 'changeflow' (from file) is not an e-mail address"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var env map[string]string
			if tc.name == "env" {
				env = map[string]string{"CHANGEFLOW_NOTIFY_SMTP_HOST": "relay", "CHANGEFLOW_NOTIFY_SMTP_PORT": "25", "CHANGEFLOW_NOTIFY_SMTP_FROM": "cf@corp.example"}
			}
			s, err := loadNotify(t, tc.doc, env)
			if tc.errHas != nil {
				require.ErrorIs(t, err, ErrInvalid)
				for _, part := range tc.errHas {
					require.Contains(t, err.Error(), part)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, s.NotifySMTP())
		})
	}
}

func TestNotifyOperators(t *testing.T) {
	s, err := loadNotify(t, "log:\n  level: info\n", nil)
	require.NoError(t, err)
	require.Equal(t, []string{}, s.NotifyOperators())

	s, err = loadNotify(t, "notify:\n  operators: [ops@corp.example, 'On call <oncall@corp.example>']\n", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"ops@corp.example", "On call <oncall@corp.example>"}, s.NotifyOperators())

	s, err = loadNotify(t, "log:\n  level: info\n", map[string]string{"CHANGEFLOW_NOTIFY_OPERATORS": "a@corp.example, b@corp.example"})
	require.NoError(t, err)
	require.Equal(t, []string{"a@corp.example", "b@corp.example"}, s.NotifyOperators())

	_, err = loadNotify(t, "notify:\n  operators: [ops@corp.example, ops.corp.example]\n", nil)
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "notify.operators[1] 'ops.corp.example' (from file) is not an e-mail address")
}

func TestNotifyMaxAttempts(t *testing.T) {
	for _, tc := range []struct {
		value    string
		want     int
		fellBack bool
	}{
		{"", DefaultNotifyMaxAttempts, false}, {"3", 3, false}, {"0", 1, true}, {"-2", 1, true},
		{"many", DefaultNotifyMaxAttempts, true}, {"1000", 100, true},
	} {
		t.Run(tc.value, func(t *testing.T) {
			doc := "log:\n  level: info\n"
			if tc.value != "" {
				doc = yamlFor(KeyNotifyMaxAttempts, tc.value)
			}
			s, err := loadNotify(t, doc, nil)
			require.NoError(t, err)
			require.Equal(t, tc.want, s.NotifyMaxAttempts())
			r, _ := s.Resolution(KeyNotifyMaxAttempts)
			require.Equal(t, tc.fellBack, r.FellBack, r.Reason)
		})
	}
}

func TestNotifyExpiryReminders(t *testing.T) {
	cases := []struct {
		name   string
		value  string
		want   []time.Duration
		errHas string
	}{
		{name: "default", want: []time.Duration{72 * time.Hour, 24 * time.Hour}},
		{name: "sorted longest first, days", value: "[1h, 7d, 48h]", want: []time.Duration{7 * 24 * time.Hour, 48 * time.Hour, time.Hour}},
		{name: "comma-separated text", value: "'24h, 3d'", want: []time.Duration{72 * time.Hour, 24 * time.Hour}},
		{name: "bare integer is seconds", value: "[3600]", want: []time.Duration{time.Hour}},
		{name: "empty falls back", value: "[]", want: []time.Duration{72 * time.Hour, 24 * time.Hour}},
		{name: "malformed", value: "[72h, soon]", errHas: "notify.expiryReminders[1] 'soon' (from file) is not a duration"},
		{name: "zero", value: "[0s]", errHas: "notify.expiryReminders[0] '0s' (from file) is not after 0"},
		{name: "negative", value: "[-1h]", errHas: "notify.expiryReminders[0] '-1h' (from file) is not after 0"},
		{name: "duplicate", value: "[72h, 3d]", errHas: "notify.expiryReminders[1] '3d' (from file) is the same reminder as '72h'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := "log:\n  level: info\n"
			if tc.value != "" {
				doc = yamlFor(KeyNotifyExpiryReminders, tc.value)
			}
			s, err := loadNotify(t, doc, nil)
			if tc.errHas != "" {
				require.ErrorIs(t, err, ErrInvalid)
				require.Contains(t, err.Error(), tc.errHas)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, s.NotifyExpiryReminders())
		})
	}
}

// TestNotifyChannelsDeriveTheLocalReceiver: with the simulators embedded
// and no webhook configured, the local run signs for the simulators'
// receiver at /hooks/local on sim.listen; a webhook set explicitly, or an
// explicit [], wins.
func TestNotifyChannelsDeriveTheLocalReceiver(t *testing.T) {
	s, err := loadNotify(t, "sim:\n  embedded: true\n  listen: 127.0.0.1:9190\n", nil)
	require.NoError(t, err)
	require.Equal(t, []NotifyWebhook{{Name: "local", URL: "http://127.0.0.1:9190/hooks/local", Secret: simtoken.NotifyWebhook}}, s.NotifyWebhooks())
	r, _ := s.Resolution(KeyNotifyWebhooks)
	require.False(t, r.FellBack)
	require.Contains(t, r.Reason, "derived from sim.listen")
	require.NotContains(t, r.Value, simtoken.NotifyWebhook)

	s, err = loadNotify(t, "sim:\n  embedded: true\n  listen: 127.0.0.1:9190\nnotify:\n  webhooks: []\n", nil)
	require.NoError(t, err)
	require.Empty(t, s.NotifyWebhooks())

	s, err = loadNotify(t, "sim:\n  embedded: true\nnotify:\n  webhooks:\n    - {name: audit, url: 'http://h/1', secret: s}\n", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"audit"}, webhookNames(s.NotifyWebhooks()))

	// A port chosen at start cannot be named: nothing is derived.
	s, err = loadNotify(t, "sim:\n  embedded: true\n  listen: 127.0.0.1:0\n", nil)
	require.NoError(t, err)
	require.Empty(t, s.NotifyWebhooks())
}

func webhookNames(hooks []NotifyWebhook) []string {
	var out []string
	for _, h := range hooks {
		out = append(out, h.Name)
	}
	return out
}

// TestNotifySecretsAreMasked: no webhook URL path or query, webhook
// secret, chat URL or SMTP password appears in Effective() (what
// /ops/config and the start-up log show).
func TestNotifySecretsAreMasked(t *testing.T) {
	s, err := loadNotify(t, "notify:\n  webhooks:\n    - {name: audit, url: '"+hookURL+"', secret: "+hookToken+", types: [request.failed]}\n"+
		"  chat:\n    - {name: ops, url: '"+chatURL+"'}\n"+
		"  smtp:\n    host: relay.corp.example\n    username: cf\n    password: smtp-credential\n    from: cf@corp.example\n", nil)
	require.NoError(t, err)
	b, err := json.Marshal(s.Effective())
	require.NoError(t, err)
	requireNoCredential(t, string(b))
	require.NotContains(t, string(b), hookToken)
	for _, key := range []string{KeyNotifyWebhooks, KeyNotifyChat, KeyNotifySMTPPassword} {
		r, ok := s.Resolution(key)
		require.True(t, ok, key)
		require.Contains(t, r.Value, masked, key)
	}
	r, _ := s.Resolution(KeyNotifyWebhooks)
	require.Equal(t, "audit: url https://hooks.corp.example/****, secret ****, types request.failed", r.Value)
	r, _ = s.Resolution(KeyNotifyChat)
	require.Equal(t, "ops: url ****, types all", r.Value)
	var log strings.Builder
	for _, l := range s.LogValue().Group() {
		log.WriteString(l.String())
	}
	requireNoCredential(t, log.String())
}

// TestNotifyReloadKeepsTheSnapshotOnABadChannel: a bad channel arriving
// by reload is refused like any invalid configuration, and the channels
// in force stay.
func TestNotifyReloadKeepsTheSnapshotOnABadChannel(t *testing.T) {
	dir := t.TempDir()
	good := "notify:\n  webhooks:\n    - {name: audit, url: 'http://h/1', secret: s}\n"
	path := writeFile(t, dir, "changeflow.yaml", good)
	m := mustLoad(t, testOptions(path))
	replaceFile(t, path, "notify:\n  webhooks:\n    - {name: audit, url: 'http://h/1'}\n")
	err := m.Reload(context.Background())
	require.True(t, errors.Is(err, ErrInvalid), "%v", err)
	require.Contains(t, err.Error(), `notify.webhooks[0] (from file) "audit" has no secret`)
	require.Equal(t, []string{"audit"}, webhookNames(m.Current().NotifyWebhooks()))
	require.True(t, m.Current().RestartRequired(KeyNotifyWebhooks))
	require.False(t, m.Current().RestartRequired(KeyNotifyMaxAttempts))
}

// TestNotifyAccessorsReturnCopies: a caller changing what it got changes
// nothing in the snapshot.
func TestNotifyAccessorsReturnCopies(t *testing.T) {
	s, err := loadNotify(t, "notify:\n  webhooks:\n    - {name: audit, url: 'http://h/1', secret: s, types: [request.failed]}\n  operators: [a@corp.example]\n", nil)
	require.NoError(t, err)
	h := s.NotifyWebhooks()
	h[0].Types[0] = notify.KindBatchBlocked
	h[0].Name = "x"
	s.NotifyOperators()[0] = "b@corp.example"
	s.NotifyExpiryReminders()[0] = time.Second
	require.Equal(t, notify.KindRequestFailed, s.NotifyWebhooks()[0].Types[0])
	require.Equal(t, "audit", s.NotifyWebhooks()[0].Name)
	require.Equal(t, []string{"a@corp.example"}, s.NotifyOperators())
	require.Equal(t, 72*time.Hour, s.NotifyExpiryReminders()[0])
}

// requireNoCredential fails when text carries any credential the tests
// above configure.
func requireNoCredential(t *testing.T, text string) {
	t.Helper()
	for _, c := range []string{"hook-credential", "chat-credential", "smtp-credential", hookToken} {
		require.NotContains(t, text, c)
	}
}

// TestNotifyWebhookWithAPublishedSecretIsRefused: outside the local
// profile a webhook signed with the simulators' published secret is
// refused (anyone could forge its events) and the others are kept; the
// local profile, and the derived receiver of the embedded simulators,
// keep it.
func TestNotifyWebhookWithAPublishedSecretIsRefused(t *testing.T) {
	hooks := []any{
		map[string]any{"name": "local", "url": "http://127.0.0.1:8090/hooks/local", "secret": simtoken.NotifyWebhook},
		map[string]any{"name": "audit", "url": "http://h/1", "secret": hookToken},
	}
	o := testOptions("")
	o.RefuseWeakSecrets = true
	o.Overlay = map[string]any{KeyNotifyWebhooks: hooks}
	s := mustLoad(t, o).Current()
	require.Equal(t, []string{"audit"}, webhookNames(s.NotifyWebhooks()))
	require.Len(t, s.RefusedSecrets(), 1)
	r := s.RefusedSecrets()[0]
	require.Equal(t, KeyNotifyWebhooks, r.Key)
	require.Contains(t, r.Problem, `entry "local" is signed with the simulators' well-known secret`)
	require.NotContains(t, r.Problem+r.Fix, simtoken.NotifyWebhook)
	res, _ := s.Resolution(KeyNotifyWebhooks)
	require.True(t, res.FellBack)
	require.NotContains(t, res.Value+res.Reason, simtoken.NotifyWebhook)

	o.RefuseWeakSecrets = false
	require.Equal(t, []string{"local", "audit"}, webhookNames(mustLoad(t, o).Current().NotifyWebhooks()))
	// The same entries as Go's own type, as a program's overlay may
	// hold them.
	o.Overlay = map[string]any{KeyNotifyWebhooks: []map[string]any{hooks[1].(map[string]any)}}
	require.Equal(t, []string{"audit"}, webhookNames(mustLoad(t, o).Current().NotifyWebhooks()))

	o = testOptions("")
	o.RefuseWeakSecrets = true
	o.Overlay = map[string]any{KeySimEmbedded: true}
	s = mustLoad(t, o).Current()
	require.Equal(t, []string{"local"}, webhookNames(s.NotifyWebhooks()))
	require.Empty(t, s.RefusedSecrets())
}
