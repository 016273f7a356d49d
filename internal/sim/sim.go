// Package sim composes every simulator of changeflow's external systems
// into one HTTP handler — GitLab under /gitlab/, the approval system under
// /approval/, the deployment pipeline under /deploy/, the permission
// service under /permission/, the OIDC issuer under /oidc/ and the
// notification receivers (webhooks, chat) under /hooks/, with an SMTP
// server on a loopback port of its own whose inbox is under /mail/ — as
// `changeflow serve --local` and `changeflow sim` serve it (README.md, "The local run").
package sim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"changeflow/internal/hostguard"
	"changeflow/internal/sim/approval"
	"changeflow/internal/sim/deliver"
	"changeflow/internal/sim/deploy"
	"changeflow/internal/sim/gitlab"
	"changeflow/internal/sim/hooks"
	simmail "changeflow/internal/sim/mail"
	"changeflow/internal/sim/oidc"
	"changeflow/internal/sim/permission"
	"changeflow/internal/sim/simhttp"
	"changeflow/internal/sim/simtoken"
)

// Defaults of the local world (README.md, "The local run").
const (
	DefaultListen        = "127.0.0.1:8090"
	DefaultCallbackURL   = "http://127.0.0.1:8080"
	DefaultApprovalDelay = 2 * time.Second
	DefaultDeployDelay   = 2 * time.Second
	// DefaultSMTPListen is the SMTP address docs/simulators.md suggests
	// for a stable port (`changeflow sim --smtp-listen`); the default is a
	// free loopback port instead (Config.SMTPListen), so tests and several
	// local runs never fight over one port.
	DefaultSMTPListen = "127.0.0.1:8025"
)

// Config configures the simulated world. The zero value (plus tokens) is
// the local world.
type Config struct {
	// Listen is the address Start listens on (default DefaultListen).
	Listen string
	// PublicURL is the base URL clients use to reach Listen (default
	// "http://" + Listen); it makes the OIDC issuer and GitLab's web_url.
	// With a ":0" port it is taken from the real address at Start.
	PublicURL string
	// CallbackURLs are the service's base URLs; callbacks and webhooks go
	// to them in turn, skipping ones that fail (default DefaultCallbackURL).
	CallbackURLs []string
	// RedirectURIs are the OIDC simulator's registered redirect URIs
	// (default: each of CallbackURLs + "/login/callback", the web app's
	// callback, and for a 127.0.0.1 base also its localhost spelling).
	RedirectURIs []string
	// CallbackToken is sent as X-Callback-Token on approval callbacks and,
	// unless DeployCallbackToken is set, on deploy callbacks;
	// WebhookToken as X-Gitlab-Token on GitLab webhooks. Two systems, two
	// secrets: changeflow's callbacks.tokens.approval and .deploy.
	CallbackToken, DeployCallbackToken, WebhookToken string
	// BotTokens replace the simulated GitLab's well-known tokens of
	// changeflow's bots, for a changeflow that runs outside --local (which
	// refuses the well-known ones); zero keeps them.
	BotTokens gitlab.BotTokens
	// ProtectChangeflow protects changeflow/* in the simulated GitLab for
	// changeflow's committer bot alone (the local run, so its deployment
	// checks are green); off, no branch is protected.
	ProtectChangeflow bool
	// DataDir holds GitLab's repositories ("" → a temporary directory).
	DataDir string
	Logger  *slog.Logger

	// ApprovalPolicy is the approval system's policy at start (nil → auto
	// approve after DefaultApprovalDelay).
	ApprovalPolicy *approval.Policy
	// DeployDelay is merge → deploy callback (nil → DefaultDeployDelay).
	DeployDelay *time.Duration
	// Grants is the permission table (nil → permission.LocalGrants()).
	Grants map[string][]string
	// GitLab adjusts the GitLab simulator's options before it is built
	// (timings in tests); DataDir, Deliver, WebhookToken, Logger and
	// ExternalURL are already set.
	GitLab func(*gitlab.Options)
	// DeliveryBackoffMax caps the retry backoff of callbacks (default 5 s).
	DeliveryBackoffMax time.Duration
	// HookReceivers are the notification webhook receivers, name →
	// secret (nil → LocalHookReceivers()).
	HookReceivers map[string]string
	// SMTPListen is the SMTP server's address, which must be loopback:
	// it takes mail from anyone who reaches it ("" → "127.0.0.1:0", a
	// free port; Sim.SMTPAddr tells which after Start).
	SMTPListen string
	// SMTPUsers are the SMTP server's accounts (user → password); with
	// any, AUTH PLAIN is required. SMTPTLS, when set, offers STARTTLS.
	SMTPUsers map[string]string
	SMTPTLS   *tls.Config
}

// LocalHookReceivers is the local world's one webhook receiver, "local"
// at /hooks/local, with the well-known secret the local profile signs
// with.
func LocalHookReceivers() map[string]string {
	return map[string]string{"local": simtoken.NotifyWebhook}
}

// Sim is the running simulated world.
type Sim struct {
	cfg    Config
	logger *slog.Logger

	GitLab     *gitlab.Server
	Approval   *approval.Server
	Deploy     *deploy.Server
	Permission *permission.Server
	OIDC       *oidc.Server
	Hooks      *hooks.Server
	Mail       *simmail.Server
	// Webhooks, ApprovalCallbacks and DeployCallbacks are the deliverers,
	// one per simulator so each has its own faults and log.
	Webhooks, ApprovalCallbacks, DeployCallbacks *deliver.Deliverer

	handler http.Handler

	mu     sync.Mutex
	srv    *http.Server
	ln     net.Listener
	served chan struct{}
	closed bool
}

// withDefaults fills in what Config's fields say an empty value means.
func (cfg Config) withDefaults() Config {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://" + cfg.Listen
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	if len(cfg.CallbackURLs) == 0 {
		cfg.CallbackURLs = []string{DefaultCallbackURL}
	}
	if len(cfg.RedirectURIs) == 0 {
		cfg.RedirectURIs = AppRedirectURIs(cfg.CallbackURLs...)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DeployCallbackToken == "" {
		cfg.DeployCallbackToken = cfg.CallbackToken
	}
	if cfg.SMTPListen == "" {
		cfg.SMTPListen = "127.0.0.1:0"
	}
	return cfg
}

// New builds every simulator; nothing listens until Start.
func New(cfg Config) (_ *Sim, err error) {
	cfg = cfg.withDefaults()
	s := &Sim{cfg: cfg, logger: cfg.Logger}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()

	newDeliverer := func(name string) (*deliver.Deliverer, error) {
		return deliver.New(deliver.Options{
			Targets: cfg.CallbackURLs, BackoffMax: cfg.DeliveryBackoffMax,
			Logger: cfg.Logger.With("sim", name, "part", "deliver"),
		})
	}
	if s.Webhooks, err = newDeliverer("gitlab"); err != nil {
		return nil, err
	}
	if s.ApprovalCallbacks, err = newDeliverer("approval"); err != nil {
		return nil, err
	}
	if s.DeployCallbacks, err = newDeliverer("deploy"); err != nil {
		return nil, err
	}

	glOpts := gitlab.Options{
		DataDir: cfg.DataDir, Deliver: s.Webhooks, WebhookToken: cfg.WebhookToken, BotTokens: cfg.BotTokens,
		ProtectChangeflow: cfg.ProtectChangeflow, HookURLs: hookURLs(cfg.CallbackURLs),
		Logger: cfg.Logger, ExternalURL: cfg.PublicURL + "/gitlab",
	}
	if cfg.GitLab != nil {
		cfg.GitLab(&glOpts)
	}
	if s.GitLab, err = gitlab.New(glOpts); err != nil {
		return nil, fmt.Errorf("sim: gitlab: %w", err)
	}

	policy := approval.LocalPolicy()
	if cfg.ApprovalPolicy != nil {
		policy = *cfg.ApprovalPolicy
	}
	if s.Approval, err = approval.New(approval.Options{
		Deliverer: s.ApprovalCallbacks, CallbackToken: cfg.CallbackToken, Policy: policy,
		Logger: cfg.Logger.With("sim", "approval"),
	}); err != nil {
		return nil, fmt.Errorf("sim: approval: %w", err)
	}

	delay := DefaultDeployDelay
	if cfg.DeployDelay != nil {
		delay = *cfg.DeployDelay
	}
	if s.Deploy, err = deploy.New(deploy.Options{
		Deliverer: s.DeployCallbacks, CallbackToken: cfg.DeployCallbackToken, Delay: delay,
		Logger: cfg.Logger.With("sim", "deploy"),
	}); err != nil {
		return nil, fmt.Errorf("sim: deploy: %w", err)
	}
	s.GitLab.OnMerge(func(e gitlab.MergeEvent) {
		s.Deploy.HandleMerge(deploy.MergeEvent{
			ProjectID: e.ProjectID, MRIID: e.MRIID, MergeCommitSHA: e.MergeCommitSHA,
			TargetBranch: e.TargetBranch, MergedAt: e.MergedAt,
		})
	})

	grants := cfg.Grants
	if grants == nil {
		grants = permission.LocalGrants()
	}
	if s.Permission, err = permission.New(permission.Options{Grants: grants, Logger: cfg.Logger.With("sim", "permission")}); err != nil {
		return nil, fmt.Errorf("sim: permission: %w", err)
	}
	if s.OIDC, err = oidc.New(oidc.Options{Issuer: cfg.PublicURL + "/oidc", Users: oidc.LocalUsers(),
		RedirectURIs: cfg.RedirectURIs, Logger: cfg.Logger.With("sim", "oidc")}); err != nil {
		return nil, fmt.Errorf("sim: oidc: %w", err)
	}
	if err = s.newNotifyReceivers(); err != nil {
		return nil, err
	}
	s.handler = s.guardControl(s.routes())
	return s, nil
}

// newNotifyReceivers builds the receivers of changeflow's notifications.
func (s *Sim) newNotifyReceivers() (err error) {
	receivers := s.cfg.HookReceivers
	if receivers == nil {
		receivers = LocalHookReceivers()
	}
	if s.Hooks, err = hooks.New(hooks.Options{Receivers: receivers, Logger: s.logger.With("sim", "hooks")}); err != nil {
		return fmt.Errorf("sim: hooks: %w", err)
	}
	if !hostguard.Loopback(s.cfg.SMTPListen) {
		return fmt.Errorf("sim: SMTP listen address %q is not loopback: the simulated SMTP server takes mail from anyone who reaches it", s.cfg.SMTPListen)
	}
	s.Mail = simmail.New(simmail.Options{Users: s.cfg.SMTPUsers, TLS: s.cfg.SMTPTLS, Logger: s.logger.With("sim", "mail")})
	return nil
}

// hookURLs are the simulated GitLab's webhooks: one per changeflow base the
// deliveries go to, at its webhook route.
func hookURLs(bases []string) []string {
	out := make([]string, 0, len(bases))
	for _, b := range bases {
		out = append(out, strings.TrimRight(b, "/")+gitlab.WebhookPath)
	}
	return out
}

// AppRedirectURIs are the web app's login callbacks (web/src/auth.ts,
// /login/callback) under each base URL; a 127.0.0.1 base also gets its
// localhost spelling, since people type either. A base on all interfaces
// (0.0.0.0, [::]) is reached over loopback.
func AppRedirectURIs(bases ...string) []string {
	var out []string
	for _, b := range bases {
		b = strings.TrimRight(b, "/")
		b = strings.Replace(strings.Replace(b, "//0.0.0.0:", "//127.0.0.1:", 1), "//[::]:", "//127.0.0.1:", 1)
		out = append(out, b+"/login/callback")
		if alias := strings.Replace(b, "//127.0.0.1:", "//localhost:", 1); alias != b {
			out = append(out, alias+"/login/callback")
		}
	}
	return out
}

// guardControl refuses control API requests (any path with a /_control/
// segment) whose Host names neither loopback nor the simulators' public
// URL: the control APIs answer anybody — they mint tokens, decide
// approvals, merge MRs — so a page that rebinds its own name to 127.0.0.1
// (hostguard) must not reach them from a browser. The simulated systems'
// own APIs stay open to any Host, as the real ones are.
func (s *Sim) guardControl(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path+"/", "/_control/") && !hostguard.Allowed(r.Host, s.URL()) {
			simhttp.WriteError(w, http.StatusMisdirectedRequest, "control APIs answer only for loopback Host names and the simulators' public URL")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// routes mounts each simulator under its prefix. GitLab's webhook
// deliveries get their control API here, next to GitLab's own.
func (s *Sim) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/gitlab/", http.StripPrefix("/gitlab", s.GitLab))
	s.Webhooks.RegisterControl(mux, "/gitlab/_control/deliveries")
	mux.Handle("/approval/", http.StripPrefix("/approval", s.Approval))
	mux.Handle("/deploy/", http.StripPrefix("/deploy", s.Deploy))
	mux.Handle("/permission/", http.StripPrefix("/permission", s.Permission))
	mux.Handle("/oidc/", http.StripPrefix("/oidc", s.OIDC))
	mux.Handle("/hooks/", http.StripPrefix("/hooks", s.Hooks))
	mux.Handle("/mail/", http.StripPrefix("/mail", s.Mail))
	mux.HandleFunc("GET /{$}", s.handleIndex)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// handleIndex tells a person (or a script) what is mounted where.
func (s *Sim) handleIndex(w http.ResponseWriter, r *http.Request) {
	base := s.URL()
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"gitlab":%q,"approval":%q,"deploy":%q,"permission":%q,"oidc":%q,"hooks":%q,"mail":%q,"smtp":%q,"callbackURLs":%q,"docs":"docs/simulators.md"}`+"\n",
		base+"/gitlab/api/v4", base+"/approval/v1", base+"/deploy/_control", base+"/permission/v1/check", base+"/oidc", base+"/hooks/",
		base+"/mail/", s.SMTPAddr(), s.cfg.CallbackURLs)
}

// Handler is every simulator on one handler.
func (s *Sim) Handler() http.Handler { return s.handler }

// Start listens on Config.Listen and serves in the background until ctx
// is done or Close is called. It returns once listening.
func (s *Sim) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("sim: listen: %w", err)
	}
	if err := s.Mail.Listen(s.cfg.SMTPListen); err != nil {
		_ = ln.Close()
		return fmt.Errorf("sim: %w", err)
	}
	s.mu.Lock()
	if s.closed || s.srv != nil {
		s.mu.Unlock()
		_ = ln.Close()
		return errors.New("sim: already started or closed")
	}
	if strings.HasSuffix(s.cfg.Listen, ":0") {
		// The port is known only now: the issuer must name it.
		s.cfg.PublicURL = "http://" + ln.Addr().String()
		s.OIDC.SetIssuer(s.cfg.PublicURL + "/oidc")
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	s.served = make(chan struct{})
	srv, served := s.srv, s.served
	s.mu.Unlock()

	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("simulators stopped serving", "err", err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-served:
		}
	}()
	s.logger.Info("simulators listening", "addr", ln.Addr().String(), "callbackURLs", s.cfg.CallbackURLs)
	return nil
}

// Addr is the address Start listens on ("" before Start).
func (s *Sim) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// SMTPAddr is the SMTP server's address, e.g. 127.0.0.1:8025 ("" before
// Start).
func (s *Sim) SMTPAddr() string { return s.Mail.Addr() }

// URL is the public base URL, e.g. http://127.0.0.1:8090.
func (s *Sim) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.PublicURL
}

// Close stops serving and every simulator. Held permission checks are
// released first so the HTTP shutdown does not wait on them; deliveries
// still queued are abandoned. Safe to call more than once.
func (s *Sim) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	srv, served := s.srv, s.served
	s.mu.Unlock()

	var errs []error
	closeIt := func(c interface{ Close() error }) {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	if s.Permission != nil {
		closeIt(s.Permission)
	}
	if s.Approval != nil {
		closeIt(s.Approval)
	}
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
		cancel()
		<-served
	}
	if s.Deploy != nil {
		closeIt(s.Deploy)
	}
	if s.GitLab != nil {
		closeIt(s.GitLab)
	}
	for _, d := range []*deliver.Deliverer{s.Webhooks, s.ApprovalCallbacks, s.DeployCallbacks} {
		if d != nil {
			closeIt(d)
		}
	}
	if s.OIDC != nil {
		closeIt(s.OIDC)
	}
	if s.Mail != nil {
		closeIt(s.Mail)
	}
	return errors.Join(errs...)
}
