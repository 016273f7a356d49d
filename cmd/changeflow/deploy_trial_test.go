package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestDeployGuideTrial proves docs/deploy.md's "A trial against the
// simulators": the `changeflow sim` and `changeflow serve` commands the
// guide prints between its trial markers are run as printed — only the
// simulators' and the instance's ports, the configuration's path and the
// public address replaced, as a reader on another host would — with the
// guide's example configuration and example directory unchanged, against
// MariaDB with the guide's grants. The instance's environment holds what
// /etc/changeflow/env would: the DSN, the secrets and the addresses. The
// instance starts without a warning, alice signs in through the simulated
// issuer, her request reaches VALIDATED, and the binding file on the
// simulated GitLab's main matches the database.
func TestDeployGuideTrial(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dsn := guideUser(t) // skips without MariaDB (fails in CI)

	appBase := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	simAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	file := filepath.Join(dir, "changeflow.yaml")
	copyDoc(t, "changeflow.example.yaml", file)
	dirFile := filepath.Join(dir, "directory.yaml")
	copyDoc(t, "directory.example.yaml", dirFile)

	// The instance's own environment (section 9's /etc/changeflow/env):
	// its secrets, its database, its addresses.
	instance := []string{
		"CHANGEFLOW_DATABASE_DSN=" + dsn,
		"CHANGEFLOW_SERVER_LISTEN=" + strings.TrimPrefix(appBase, "http://"),
		"CHANGEFLOW_SERVER_PUBLICURL=" + appBase + "/",
		"CHANGEFLOW_IDENTITY_DIRECTORYFILE=" + dirFile,
	}
	instance = append(instance, procSecretsEnv()...)
	here := strings.NewReplacer(
		"127.0.0.1:8090", simAddr,
		"http://127.0.0.1:8080", appBase,
		"https://changeflow.example.com", appBase,
		"/etc/changeflow/changeflow.yaml", file)

	simCmd := guideCommand(t, "trial:sim", here, instance)
	sim := startProc(t, dir, "sim", childEnv(simCmd.env...), simCmd.args...)
	waitFor(t, 30*time.Second, "the simulators' address line", func() bool {
		if sim.exited() {
			t.Fatalf("the guide's changeflow sim exited:\n%s", sim.output())
		}
		return strings.Contains(sim.output(), "simulators on http://"+simAddr)
	})

	serveCmd := guideCommand(t, "trial:serve", here, instance)
	srv := startProc(t, dir, "serve", childEnv(serveCmd.env...), serveCmd.args...)
	waitServeReady(t, srv, appBase, "the guide's changeflow serve")
	cleanStart(t, "serve in the guide's trial", srv.output())

	var appCfg struct {
		Data struct {
			OIDC struct{ Issuer, ClientID string } `json:"oidc"`
		} `json:"data"`
	}
	getJSON(t, appBase+"/api/app-config", nil, &appCfg)
	if appCfg.Data.OIDC.Issuer != "http://"+simAddr+"/oidc/" {
		t.Fatalf("the web app signs in at %q, want the simulated issuer", appCfg.Data.OIDC.Issuer)
	}
	token := oidcSignIn(t, appCfg.Data.OIDC.Issuer, appCfg.Data.OIDC.ClientID, appBase+"/login/callback", "alice")
	const op = "deploy-trial-1"
	if subject := submitUntilValidated(t, appBase, token, op, "payments-db-readonly", srv); subject != "alice" {
		t.Fatalf("subject = %q, want alice", subject)
	}
	world := &simProc{proc: sim, base: "http://" + simAddr}
	world.filesExact(t, storetest.OpenDSN(t, store.DriverMySQL, dsn), []string{"payments-db-readonly"}, []string{op})
}

// procSecretsEnv is the instance's secrets as CHANGEFLOW_* variables:
// the example configuration's placeholders replaced, as the guide says,
// by the values the simulated world was given (startSim).
func procSecretsEnv() []string {
	return []string{
		"CHANGEFLOW_GITLAB_TOKENS_COMMITTER=" + procCommitterToken,
		"CHANGEFLOW_GITLAB_TOKENS_APPROVER1=" + procApprover1Token,
		"CHANGEFLOW_GITLAB_TOKENS_APPROVER2=" + procApprover2Token,
		"CHANGEFLOW_CALLBACKS_TOKENS_APPROVAL=" + procApprovalToken,
		"CHANGEFLOW_CALLBACKS_TOKENS_DEPLOY=" + procDeployToken,
		"CHANGEFLOW_CALLBACKS_TOKENS_GITLAB=" + procWebhookToken,
		"CHANGEFLOW_AUDIT_SIGNINGKEY=" + procAuditSigningKey,
	}
}

// waitServeReady waits up to a minute for srv's /readyz at appBase to
// pass; srv exiting first fails the test with the end of its log, named
// by who.
func waitServeReady(t *testing.T, srv *proc, appBase, who string) {
	t.Helper()
	waitFor(t, 60*time.Second, "serve ready", func() bool {
		if srv.exited() {
			t.Fatalf("%s exited:\n%s", who, tail(srv.output(), 4000))
		}
		resp, err := http.Get(appBase + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// copyDoc copies docs/name to dst unchanged.
func copyDoc(t *testing.T, name, dst string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// shellCommand is one `changeflow …` line of a guide's shell block: its
// arguments, and the environment it runs in (the given one plus the
// block's exports).
type shellCommand struct {
	args []string
	env  []string
}

// guideCommand reads the ```sh block between <!-- marker --> and
// <!-- /marker --> in docs/deploy.md, applies here to its text, and
// parses it the way a POSIX shell would for the little the guide uses:
// `\` line continuations, comments, words, "double quotes" with $VAR and
// ${VAR} expanded from env and earlier exports, 'single quotes', `export
// K=V` lines and exactly one `changeflow …` command. Anything else fails
// the test, so the block cannot grow a step this test does not run.
func guideCommand(t *testing.T, marker string, here *strings.Replacer, env []string) shellCommand {
	t.Helper()
	guide, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- " + regexp.QuoteMeta(marker) + " -->\\s*```sh\\n(.*?)```\\s*<!-- /" +
		regexp.QuoteMeta(marker) + " -->").FindSubmatch(guide)
	if m == nil {
		t.Fatalf("docs/deploy.md has no ```sh block between <!-- %s --> and <!-- /%[1]s -->", marker)
	}
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	cmd := shellCommand{env: append([]string(nil), env...)}
	text := strings.ReplaceAll(here.Replace(string(m[1])), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		words, err := shellWords(line, vars)
		if err != nil {
			t.Fatalf("docs/deploy.md %s: %q: %v", marker, line, err)
		}
		switch {
		case len(words) == 0:
		case words[0] == "export" && len(words) > 1:
			for _, kv := range words[1:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("docs/deploy.md %s: export %q has no value", marker, kv)
				}
				vars[k] = v
				cmd.env = append(cmd.env, kv)
			}
		case words[0] == "changeflow" && cmd.args == nil:
			cmd.args = words[1:]
		default:
			t.Fatalf("docs/deploy.md %s: %q is not a step this test runs (export, or one changeflow command)", marker, line)
		}
	}
	if cmd.args == nil {
		t.Fatalf("docs/deploy.md %s: no changeflow command", marker)
	}
	return cmd
}

// shellWords splits one shell line into words (see guideCommand). An
// unset variable is an error: the guide's reader would run with an empty
// secret and see a failure this test would not.
func shellWords(line string, vars map[string]string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	expand := func(s string, i int) (int, error) {
		j := i + 1
		var name string
		if j < len(s) && s[j] == '{' {
			end := strings.IndexByte(s[j:], '}')
			if end < 0 {
				return 0, fmt.Errorf("unclosed ${")
			}
			name, j = s[j+1:j+end], j+end+1
		} else {
			for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			name = s[i+1 : j]
		}
		v, ok := vars[name]
		if name == "" || !ok {
			return 0, fmt.Errorf("$%s is not set", name)
		}
		cur.WriteString(v)
		return j, nil
	}
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
			i++
		case c == '#' && !inWord:
			i = len(line)
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unclosed '")
			}
			cur.WriteString(line[i+1 : i+1+end])
			inWord, i = true, i+end+2
		case c == '"':
			inWord = true
			i++
			for {
				if i >= len(line) {
					return nil, fmt.Errorf(`unclosed "`)
				}
				if line[i] == '"' {
					i++
					break
				}
				if line[i] == '$' {
					j, err := expand(line, i)
					if err != nil {
						return nil, err
					}
					i = j
					continue
				}
				if line[i] == '\\' || line[i] == '`' {
					return nil, fmt.Errorf("%q inside double quotes is beyond this parser", line[i])
				}
				cur.WriteByte(line[i])
				i++
			}
		case c == '$':
			j, err := expand(line, i)
			if err != nil {
				return nil, err
			}
			inWord, i = true, j
		case strings.IndexByte("\\`|&;<>()*?[]{}~", c) >= 0:
			return nil, fmt.Errorf("%q is beyond this parser", c)
		default:
			cur.WriteByte(c)
			inWord, i = true, i+1
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// TestShellWords: the guide's shell lines split as a shell splits them.
func TestShellWords(t *testing.T) {
	vars := map[string]string{"TOK": "s3cr et", "EMPTY": ""}
	for _, tc := range []struct {
		line string
		want []string
		err  bool
	}{
		{line: `changeflow sim --listen 127.0.0.1:8090   # a comment`, want: []string{"changeflow", "sim", "--listen", "127.0.0.1:8090"}},
		{line: `--gitlab-token committer="$TOK"`, want: []string{"--gitlab-token", "committer=s3cr et"}},
		{line: `a=${TOK}x 'lit $TOK' "" "$EMPTY"`, want: []string{"a=s3cr etx", "lit $TOK", "", ""}},
		{line: `--x "$UNSET"`, err: true},
		{line: `echo "open`, err: true},
		{line: `a | b`, err: true},
		{line: `   `, want: nil},
	} {
		got, err := shellWords(tc.line, vars)
		if (err != nil) != tc.err {
			t.Errorf("%q: err = %v, want error %v", tc.line, err, tc.err)
			continue
		}
		if !tc.err {
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(tc.want)
			if string(gj) != string(wj) {
				t.Errorf("%q = %s, want %s", tc.line, gj, wj)
			}
		}
	}
}
