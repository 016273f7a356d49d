// Package mail is the e-mail channel: a message in words, plain text and
// HTML, to the people an event concerns — the requester (and the person
// the access is for), an access review's reviewers, the operators — sent
// over SMTP with github.com/wneessen/go-mail (docs/notifications.md,
// "E-mail").
package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	netmail "net/mail"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"

	"changeflow/internal/notify"
)

// DefaultPort is the SMTP port when none is configured: 587, message
// submission, where a relay expects authenticated clients and STARTTLS.
const DefaultPort = 587

// DefaultTimeout bounds one message's whole SMTP exchange.
const DefaultTimeout = 30 * time.Second

// Settings are notify.smtp.*.
type Settings struct {
	Host string
	// Port ≤ 0 means DefaultPort.
	Port int
	// Username, when set, authenticates with the strongest mechanism the
	// server offers (go-mail's discovery: SCRAM, NTLM, CRAM-MD5, then
	// PLAIN and LOGIN, those two only over TLS, so a password is never
	// sent in clear).
	Username, Password string
	// From is the sender's address, e.g. "changeflow <changeflow@corp.example>".
	From string
	// StartTLS true makes STARTTLS mandatory: a server that does not
	// offer it, or whose certificate does not verify, fails the delivery.
	// False is opportunistic: STARTTLS when the server offers it (the
	// certificate still verified), plain text when it does not.
	StartTLS bool
	// Timeout bounds one message's exchange (≤ 0: DefaultTimeout).
	Timeout time.Duration
}

// Options are the channel's people and preferences.
type Options struct {
	// Lookup gives an account's e-mail address (the identity directory's
	// email); ok false means the account has none, and is left out. Nil
	// means no account has one: only the operators hear anything.
	Lookup func(ctx context.Context, account string) (email string, ok bool, err error)
	// Allowed says whether the person account wants messages of kind k
	// (their notification preferences); nil allows every kind. It is not
	// asked for the operators, who are addresses, not accounts.
	Allowed func(ctx context.Context, account string, k notify.Kind) (bool, error)
	// Operators are the addresses that hear of blocked batches and
	// foreign heads (notify.operators).
	Operators []string
	// Types narrows the kinds the channel carries (empty: every kind it
	// has a recipient for; see Carries).
	Types []notify.Kind
	// TLSConfig is the client's TLS configuration (nil: the system's
	// roots); ServerName is set to Host when empty.
	TLSConfig *tls.Config
}

// Mailer is the e-mail channel.
type Mailer struct {
	s    Settings
	o    Options
	from *netmail.Address
	tls  *tls.Config
}

var _ notify.Channel = (*Mailer)(nil)

// New checks the settings and returns the channel; it does no I/O.
func New(s Settings, o Options) (*Mailer, error) {
	if strings.TrimSpace(s.Host) == "" {
		return nil, errors.New("mail: notify.smtp.host is empty")
	}
	from, err := netmail.ParseAddress(s.From)
	if err != nil {
		return nil, fmt.Errorf("mail: notify.smtp.from %q is not an address: %w", s.From, err)
	}
	for _, a := range o.Operators {
		if _, err := netmail.ParseAddress(a); err != nil {
			return nil, fmt.Errorf("mail: operator %q is not an address: %w", a, err)
		}
	}
	if err := notify.CheckKinds(o.Types); err != nil {
		return nil, fmt.Errorf("mail: types: %w", err)
	}
	if s.Port <= 0 {
		s.Port = DefaultPort
	}
	if s.Timeout <= 0 {
		s.Timeout = DefaultTimeout
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.TLSConfig != nil {
		tc = o.TLSConfig.Clone()
	}
	if tc.ServerName == "" {
		tc.ServerName = s.Host
	}
	return &Mailer{s: s, o: o, from: from, tls: tc}, nil
}

// Name is "mail".
func (m *Mailer) Name() string { return "mail" }

// Wants says whether the channel carries kind k: a kind it has
// recipients for (Carries), within the configured types.
func (m *Mailer) Wants(k notify.Kind) bool {
	return Carries(k) && notify.WantsKind(m.o.Types, k)
}

// Send mails e to its recipients in one message. No recipient (nobody
// with an address, everyone turned the kind off) is
// notify.ErrNotForThisChannel; a refusal by the server or no answer is an
// error, so the outbox tries again and a refusal loses nothing. A
// redelivery carries the same Message-ID, for a mail client to fold.
func (m *Mailer) Send(ctx context.Context, e notify.Event) error {
	to, err := m.recipients(ctx, e)
	if err != nil {
		return fmt.Errorf("mail: recipients of event %s: %w", e.ID, err)
	}
	if len(to) == 0 {
		return fmt.Errorf("mail: event %s: %w", e.ID, notify.ErrNotForThisChannel)
	}
	msg, err := m.compose(e, to)
	if err != nil {
		return fmt.Errorf("mail: compose event %s: %w", e.ID, err)
	}
	c, err := m.client()
	if err != nil {
		return fmt.Errorf("mail: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, m.s.Timeout)
	defer cancel()
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("mail: send event %s via %s:%d: %w", e.ID, m.s.Host, m.s.Port, err)
	}
	return nil
}

// client is a go-mail client for one message: a message is one
// connection, which keeps the channel free of shared connection state at
// the volume notifications have.
func (m *Mailer) client() (*gomail.Client, error) {
	policy := gomail.TLSOpportunistic
	if m.s.StartTLS {
		policy = gomail.TLSMandatory
	}
	opts := []gomail.Option{
		gomail.WithPort(m.s.Port), gomail.WithTimeout(m.s.Timeout),
		gomail.WithTLSPolicy(policy), gomail.WithTLSConfig(m.tls),
	}
	if m.s.Username != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(m.s.Username), gomail.WithPassword(m.s.Password))
	}
	return gomail.NewClient(m.s.Host, opts...)
}
