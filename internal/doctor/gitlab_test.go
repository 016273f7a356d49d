package doctor

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/gitlab"
	simgl "changeflow/internal/sim/gitlab"
	"changeflow/internal/sim/simtoken"
)

// world is the simulated GitLab set up as docs/deploy.md says, and a
// production configuration (strong tokens, a doctor token) pointing at it.
type world struct {
	t    *testing.T
	base string // …/gitlab
	snap *config.Snapshot
}

const publicURL = "https://changeflow.example.com/"

func newWorld(t *testing.T, doctorToken bool, mutate ...func(*simgl.Options)) *world {
	t.Helper()
	toks := strongTokens()
	bots := simgl.BotTokens{Committer: toks["gitlab.tokens.committer"].(string),
		Approver1: toks["gitlab.tokens.approver1"].(string), Approver2: toks["gitlab.tokens.approver2"].(string)}
	if doctorToken {
		toks["gitlab.tokens.doctor"] = "glpat-doctor-read-api-0123456789"
		bots.Doctor = toks["gitlab.tokens.doctor"].(string)
	}
	opts := simgl.Options{BotTokens: bots, ProtectChangeflow: true, HookURLs: []string{publicURL + "callbacks/gitlab"},
		WebhookToken: toks["callbacks.tokens.gitlab"].(string)}
	for _, f := range mutate {
		f(&opts)
	}
	sim, err := simgl.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/gitlab/", http.StripPrefix("/gitlab", sim))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); _ = sim.Close() })
	ov := toks
	ov["gitlab.baseURL"] = srv.URL + "/gitlab/"
	ov["gitlab.projects"] = []any{"1"}
	ov["server.publicURL"] = publicURL
	return &world{t: t, base: srv.URL + "/gitlab", snap: snapshot(t, false, ov)}
}

// maintainer calls the simulated GitLab's API as its maintainer, as a
// person changing the project's settings would.
func (w *world) maintainer(method, path, body string) {
	w.t.Helper()
	req, _ := http.NewRequest(method, w.base+"/api/v4/projects/1"+path, strings.NewReader(body))
	req.Header.Set("PRIVATE-TOKEN", simtoken.Maintainer)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		w.t.Fatalf("%s %s = %d", method, path, resp.StatusCode)
	}
}

func (w *world) check() Report {
	w.t.Helper()
	g := gitlab.New(gitlab.Options{Settings: func() gitlab.Settings { return gitlab.SettingsFromConfig(w.snap) }})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return Check(ctx, Options{Snapshot: w.snap, GitLab: g})
}

func findIn(r Report, id, project, subject string) Finding {
	for _, f := range r.Findings {
		if f.ID == id && f.Project == project && (subject == "" || f.Subject == subject) {
			return f
		}
	}
	return Finding{}
}

func requireStatus(t *testing.T, f Finding, want Status, mention string) {
	t.Helper()
	if f.Status != want {
		t.Fatalf("%s/%s = %s: %s (fix: %s), want %s", f.ID, f.Subject, f.Status, f.Detail, f.Fix, want)
	}
	if mention != "" && !strings.Contains(f.Detail+" "+f.Fix, mention) {
		t.Fatalf("%s does not mention %q: %s / %s", f.ID, mention, f.Detail, f.Fix)
	}
	if want != StatusOK && f.Fix == "" {
		t.Fatalf("%s is %s without saying what to change", f.ID, want)
	}
}

// TestDoctorAgainstTheSimulatedGitLab: green as docs/deploy.md sets GitLab
// up; red, naming what to change, for each misconfiguration a person can
// make in GitLab.
func TestDoctorAgainstTheSimulatedGitLab(t *testing.T) {
	t.Run("set up as the guide says: every finding ok", func(t *testing.T) {
		w := newWorld(t, true)
		r := w.check()
		for _, f := range r.Findings {
			if f.Status != StatusOK {
				t.Errorf("%s/%s/%s = %s: %s", f.ID, f.Project, f.Subject, f.Status, f.Detail)
			}
		}
		if r.Status != StatusOK || len(r.Findings) != 8 {
			t.Fatalf("report %s with %d findings", r.Status, len(r.Findings))
		}
		requireStatus(t, findIn(r, "webhook", "1", ""), StatusOK, "never returns")
	})
	t.Run("the protection removed", func(t *testing.T) {
		w := newWorld(t, true)
		w.maintainer("DELETE", "/protected_branches/"+url.PathEscape("changeflow/*"), "")
		r := w.check()
		requireStatus(t, findIn(r, "protected-branch", "1", ""), StatusFail, "Protected branches")
		if r.Status != StatusFail {
			t.Fatalf("report %s", r.Status)
		}
	})
	t.Run("developers allowed to push", func(t *testing.T) {
		w := newWorld(t, true)
		w.maintainer("DELETE", "/protected_branches/"+url.PathEscape("changeflow/*"), "")
		w.maintainer("POST", "/protected_branches", `{"name":"changeflow/*","push_access_level":30,"merge_access_level":30,"allow_force_push":true}`)
		requireStatus(t, findIn(w.check(), "protected-branch", "1", ""), StatusFail, "every Developer may push")
	})
	t.Run("only maintainers may push: a warning, and the committer cannot", func(t *testing.T) {
		w := newWorld(t, true)
		w.maintainer("DELETE", "/protected_branches/"+url.PathEscape("changeflow/*"), "")
		w.maintainer("POST", "/protected_branches", `{"name":"changeflow/*","push_access_level":40,"merge_access_level":0,"allow_force_push":true}`)
		requireStatus(t, findIn(w.check(), "protected-branch", "1", ""), StatusFail, "is not allowed to push")
		w.maintainer("PUT", "/members/2", `{"access_level":40}`)
		requireStatus(t, findIn(w.check(), "protected-branch", "1", ""), StatusWarn, "every Maintainer may push")
	})
	t.Run("force push off", func(t *testing.T) {
		w := newWorld(t, true)
		w.maintainer("DELETE", "/protected_branches/"+url.PathEscape("changeflow/*"), "")
		w.maintainer("POST", "/protected_branches", `{"name":"changeflow/*","allowed_to_push":[{"user_id":2}],"merge_access_level":0}`)
		requireStatus(t, findIn(w.check(), "protected-branch", "1", ""), StatusFail, "force push is off")
	})
	t.Run("the committer lacks its role", func(t *testing.T) {
		w := newWorld(t, true)
		w.maintainer("PUT", "/members/2", `{"access_level":20}`)
		r := w.check()
		requireStatus(t, findIn(r, "bot-role", "1", "committer"), StatusFail, "Reporter")
		requireStatus(t, findIn(r, "bot-role", "1", "approver1"), StatusOK, "")
	})
	t.Run("an approver lacks its role", func(t *testing.T) {
		w := newWorld(t, true)
		w.maintainer("PUT", "/members/4", `{"access_level":20}`)
		requireStatus(t, findIn(w.check(), "bot-role", "1", "approver2"), StatusFail, "cannot approve")
	})
	t.Run("the webhook missing", func(t *testing.T) {
		w := newWorld(t, true)
		w.maintainer("DELETE", "/hooks/1", "")
		r := w.check()
		requireStatus(t, findIn(r, "webhook", "1", ""), StatusFail, "Settings → Webhooks")
		if r.Status != StatusFail {
			t.Fatalf("report %s", r.Status)
		}
	})
	t.Run("the webhook without pipeline events", func(t *testing.T) {
		w := newWorld(t, true)
		w.maintainer("DELETE", "/hooks/1", "")
		w.maintainer("POST", "/hooks", `{"url":"`+publicURL+`callbacks/gitlab","merge_requests_events":true}`)
		requireStatus(t, findIn(w.check(), "webhook", "1", ""), StatusFail, "pipeline events are off")
	})
	t.Run("a webhook pointing elsewhere", func(t *testing.T) {
		w := newWorld(t, true, func(o *simgl.Options) { o.HookURLs = []string{"https://old.example.com/callbacks/gitlab"} })
		requireStatus(t, findIn(w.check(), "webhook", "1", ""), StatusFail, publicURL+"callbacks/gitlab")
	})
	t.Run("without a doctor token the hooks cannot be read: a warning saying so", func(t *testing.T) {
		w := newWorld(t, false)
		r := w.check()
		requireStatus(t, findIn(r, "webhook", "1", ""), StatusWarn, "gitlab.tokens.doctor")
		requireStatus(t, findIn(r, "protected-branch", "1", ""), StatusOK, "")
		if r.Status != StatusWarn {
			t.Fatalf("report %s", r.Status)
		}
	})
	t.Run("a bot token GitLab does not accept", func(t *testing.T) {
		w := newWorld(t, true, func(o *simgl.Options) { o.BotTokens.Approver1 = "glpat-some-other-token-0123" })
		r := w.check()
		requireStatus(t, findIn(r, "bot-accounts", "", ""), StatusFail, "does not accept gitlab.tokens.approver1")
		requireStatus(t, findIn(r, "bot-role", "1", "approver1"), StatusWarn, "")
	})
}
