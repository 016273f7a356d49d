package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"changeflow/internal/config"
	"changeflow/internal/sim"
	simgitlab "changeflow/internal/sim/gitlab"
	"changeflow/internal/sim/simtoken"
)

// Tokens of the local world (README.md, "The local run"); the local profile's
// callbacks.tokens.* use the same values.
const (
	localCallbackToken = simtoken.Callback
	localWebhookToken  = simtoken.Webhook
)

// botTokens is the repeatable --gitlab-token NAME=TOKEN flag: the
// simulated GitLab's token for changeflow's bot NAME (committer,
// approver1, approver2, as in gitlab.tokens.<name>; doctor is one more
// token of the maintainer account, for the deployment checks).
type botTokens struct{ t simgitlab.BotTokens }

func (b *botTokens) String() string { return "" }
func (b *botTokens) Set(v string) error {
	name, tok, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(tok) == "" {
		return fmt.Errorf("want NAME=TOKEN, e.g. committer=$(%s)", config.GenerateHint)
	}
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "committer":
		b.t.Committer = strings.TrimSpace(tok)
	case "approver1":
		b.t.Approver1 = strings.TrimSpace(tok)
	case "approver2":
		b.t.Approver2 = strings.TrimSpace(tok)
	case "doctor":
		b.t.Doctor = strings.TrimSpace(tok)
	default:
		return fmt.Errorf("unknown bot %q (committer, approver1, approver2, doctor)", name)
	}
	return nil
}

// urlList is a repeatable flag.
type urlList []string

func (u *urlList) String() string { return strings.Join(*u, ",") }
func (u *urlList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*u = append(*u, strings.TrimRight(s, "/"))
		}
	}
	return nil
}

// runSim serves only the simulators, so several `changeflow serve`
// instances on one MariaDB can share one simulated world: callbacks and
// webhooks go to the --callback-url bases in turn, skipping ones that fail.
func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", sim.DefaultListen, "address to serve the simulators on")
	smtpListen := fs.String("smtp-listen", "", "loopback address of the simulated SMTP server, e.g. "+sim.DefaultSMTPListen+" (default: a free loopback port, printed at start; its inbox is /mail/)")
	var callbacks urlList
	fs.Var(&callbacks, "callback-url", "base URL of a changeflow instance (repeatable, or comma-separated)")
	callbackToken := fs.String("callback-token", localCallbackToken, "X-Callback-Token sent with approval callbacks (and deploy callbacks unless --deploy-callback-token)")
	deployToken := fs.String("deploy-callback-token", "", "X-Callback-Token sent with deploy callbacks (default: --callback-token)")
	webhookToken := fs.String("webhook-token", localWebhookToken, "X-Gitlab-Token sent with GitLab webhooks")
	var bots botTokens
	protect := fs.Bool("protect-changeflow", true, "protect changeflow/* in the simulated GitLab for the committer bot alone, as docs/deploy.md configures GitLab (false: nothing protected)")
	fs.Var(&bots, "gitlab-token", "NAME=TOKEN: the simulated GitLab's token of changeflow's bot NAME (committer, approver1, approver2; repeatable) instead of its well-known one; doctor=TOKEN adds a maintainer token for the deployment checks")
	dataDir := fs.String("data-dir", "", "directory for the simulated GitLab's repositories (default: a temporary one)")
	var redirects urlList
	fs.Var(&redirects, "redirect-uri", "a redirect URI the OIDC simulator accepts (repeatable; default: each --callback-url + /login/callback)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments: %s", errUsage, strings.Join(fs.Args(), " "))
	}
	logger := slog.New(slog.NewJSONHandler(stderr, nil))
	s, err := sim.New(sim.Config{
		Listen: *listen, SMTPListen: *smtpListen, CallbackURLs: callbacks, RedirectURIs: redirects,
		CallbackToken: *callbackToken, DeployCallbackToken: *deployToken, WebhookToken: *webhookToken,
		BotTokens: bots.t, ProtectChangeflow: *protect, DataDir: *dataDir, Logger: logger,
	})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "changeflow: simulators on %s\n", s.URL())
	fmt.Fprintf(stdout, "changeflow: simulated SMTP server on %s\n", s.SMTPAddr())
	<-ctx.Done()
	return s.Close()
}

// startEmbeddedSim starts the simulators inside serve (sim.embedded), with
// callbacks aimed at this instance's own listener.
func startEmbeddedSim(ctx context.Context, snap *config.Snapshot, selfURL string, logger *slog.Logger) (*sim.Sim, error) {
	callbackToken, _, _ := snap.CallbackToken(config.CallbackApproval)
	deployToken, _, _ := snap.CallbackToken(config.CallbackDeploy)
	webhookToken, _, _ := snap.CallbackToken(config.CallbackGitLab)
	smtpListen := embeddedSMTPListen(snap)
	s, err := sim.New(sim.Config{
		Listen:       snap.Endpoints().SimListen,
		CallbackURLs: []string{selfURL},
		// The web app signs in through the simulator at this instance's own
		// address and, when set, at server.publicURL.
		RedirectURIs:  sim.AppRedirectURIs(nonEmpty(selfURL, snap.Endpoints().PublicURL)...),
		CallbackToken: callbackToken, DeployCallbackToken: deployToken,
		WebhookToken: webhookToken,
		// The bots' tokens are the configured ones: the local profile's are
		// the well-known values, a configuration of its own keeps its own.
		BotTokens: simgitlab.BotTokens{Committer: gitlabToken(snap, "committer"),
			Approver1: gitlabToken(snap, "approver1"), Approver2: gitlabToken(snap, "approver2"),
			Doctor: gitlabToken(snap, "doctor")},
		// The local run's GitLab is set up as docs/deploy.md says, so its
		// deployment checks are green until someone removes the rule.
		ProtectChangeflow: true,
		SMTPListen:        smtpListen,
		Logger:            logger.With("component", "sim"),
	})
	if err != nil {
		return nil, fmt.Errorf("build simulators: %w", err)
	}
	if err := s.Start(ctx); err != nil {
		_ = s.Close()
		var op *net.OpError
		if smtpListen != "" && errors.As(err, &op) && op.Op == "listen" && op.Addr != nil && op.Addr.String() == smtpListen {
			return nil, fmt.Errorf("the simulated SMTP server cannot listen on %s, where %s and %s point: stop what holds the port, or move both: %w",
				smtpListen, config.KeyNotifySMTPHost, config.KeyNotifySMTPPort, err)
		}
		return nil, busyPortError(err, snap.Endpoints().SimListen, "--sim-listen", config.KeySimListen)
	}
	return s, nil
}

// embeddedSMTPListen is where the embedded simulators' SMTP server
// listens: where notify.smtp points while its host is loopback, so the
// local run's mail lands in the simulators' inbox (/mail/) without
// naming a port twice; "" (a free port) when e-mail is off or goes to a
// real relay. The port cannot follow sim.listen as the URLs do: it is a
// listener of its own, and the configuration must name it before the
// simulators start.
func embeddedSMTPListen(snap *config.Snapshot) string {
	s := snap.NotifySMTP()
	if s.Host == "" {
		return ""
	}
	if ip := net.ParseIP(s.Host); !strings.EqualFold(s.Host, "localhost") && (ip == nil || !ip.IsLoopback()) {
		return ""
	}
	return net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
}

func gitlabToken(snap *config.Snapshot, name string) string {
	t, _, _ := snap.GitLabToken(name)
	return t
}

// nonEmpty returns the non-empty values among vs.
func nonEmpty(vs ...string) []string {
	var out []string
	for _, v := range vs {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}
