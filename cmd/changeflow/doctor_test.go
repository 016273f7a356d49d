package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"changeflow/internal/doctor"
	"changeflow/internal/sim"
	simgitlab "changeflow/internal/sim/gitlab"
	"changeflow/internal/sim/simtoken"
)

const procDoctorToken = "proc-test-doctor-read-api-6e2c9a4f1b7d"

// TestDoctorCommand: `changeflow doctor --config FILE` against a
// simulated GitLab set up as docs/deploy.md says passes (exit 0) and says
// so; with the protection of changeflow/* removed it fails (a non-zero
// exit), naming what to change; --json prints /ops/checks' data.
func TestDoctorCommand(t *testing.T) {
	dir := t.TempDir()
	const public = "https://changeflow.example.com/"
	s, err := sim.New(sim.Config{Listen: "127.0.0.1:0", CallbackURLs: []string{strings.TrimSuffix(public, "/")},
		CallbackToken: procApprovalToken, DeployCallbackToken: procDeployToken, WebhookToken: procWebhookToken,
		BotTokens: simgitlab.BotTokens{Committer: procCommitterToken, Approver1: procApprover1Token,
			Approver2: procApprover2Token, Doctor: procDoctorToken},
		ProtectChangeflow: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	env := strongTokenEnv()
	env["CHANGEFLOW_GITLAB_TOKENS_DOCTOR"] = procDoctorToken
	file := filepath.Join(dir, "changeflow.yaml")
	toks := strings.Replace(tokensYAML(env), "gitlab:\n", "gitlab:\n  baseURL: "+s.URL()+"/gitlab/\n  projects: [1]\n", 1)
	writeConfig(t, file, "server:\n  publicURL: "+public+"\ndatabase:\n  driver: sqlite\n  dsn: file:"+filepath.Join(dir, "cf.db")+"\n"+toks)
	doctorRun := func(extra ...string) (string, error) {
		out, errb := &syncBuffer{}, &syncBuffer{}
		err := run(context.Background(), append([]string{"changeflow", "doctor", "--config", file}, extra...), func(string) string { return "" }, out, errb)
		return out.String(), err
	}

	out, err := doctorRun()
	if err != nil || !strings.Contains(out, "everything checked is as it should be") {
		t.Fatalf("doctor on a good deployment = %v\n%s", err, out)
	}

	req, _ := http.NewRequest(http.MethodDelete, s.URL()+"/gitlab/api/v4/projects/1/protected_branches/"+url.PathEscape("changeflow/*"), nil)
	req.Header.Set("PRIVATE-TOKEN", simtoken.Maintainer)
	if code := doStatus(t, req); code != http.StatusNoContent {
		t.Fatalf("unprotect = %d", code)
	}
	out, err = doctorRun()
	if !errors.Is(err, errChecksFailed) {
		t.Fatalf("doctor without the protection = %v, want a failure\n%s", err, out)
	}
	for _, want := range []string{"FAIL  changeflow/* is a protected branch only the committer bot may push to (project 1)",
		"no protection rule covers changeflow/", "change: in GitLab, project 1 → Settings → Repository → Protected branches"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}

	out, err = doctorRun("--json")
	var r doctor.Report
	if !errors.Is(err, errChecksFailed) || json.Unmarshal([]byte(out), &r) != nil || r.Status != doctor.StatusFail {
		t.Fatalf("--json = %v %q", err, out)
	}
}
