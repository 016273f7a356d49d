// Package mail simulates the SMTP server changeflow's e-mail channel
// sends through: a real SMTP server (github.com/emersion/go-smtp) on a
// loopback port, with AUTH PLAIN for configured accounts and STARTTLS
// when given a certificate, that keeps every message it accepts — its
// headers, plain text and HTML — for an inbox page and a control API,
// and refuses the next N transactions with a chosen SMTP code to show
// that a refusal loses nothing (docs/simulators.md, "Mail").
package mail

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// DefaultKeep is how many messages the inbox keeps, oldest dropped first.
const DefaultKeep = 1000

// maxMessageBytes bounds one message: notifications are small.
const maxMessageBytes = 4 << 20

// Options configures a Server.
type Options struct {
	// Users are the SMTP accounts, user → password. With any, AUTH PLAIN
	// is offered and a transaction needs it; with none, AUTH is not
	// offered and anyone may send (the local run).
	Users map[string]string
	// TLS, when set, offers STARTTLS with it; AUTH is then offered only
	// after STARTTLS. Without it the server is plain (loopback only) and
	// AUTH works over plain text.
	TLS *tls.Config
	// Domain is the server's name in its greeting (default "localhost").
	Domain string
	// Keep bounds the messages kept (≤ 0: DefaultKeep).
	Keep   int
	Now    func() time.Time
	Logger *slog.Logger
}

// Server is the SMTP server and its HTTP inbox (mounted under /mail).
type Server struct {
	opts Options
	smtp *smtp.Server
	mux  *http.ServeMux

	mu       sync.Mutex
	messages []Message
	seq      int64
	faults   Faults
	ln       net.Listener
	served   chan struct{}
	closed   bool
}

// New returns a Server; nothing listens until Listen.
func New(o Options) *Server {
	if o.Keep <= 0 {
		o.Keep = DefaultKeep
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Domain == "" {
		o.Domain = "localhost"
	}
	s := &Server{opts: o, mux: http.NewServeMux()}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{s: s, conn: c}, nil
	}))
	srv.Domain = o.Domain
	srv.TLSConfig = o.TLS
	srv.AllowInsecureAuth = o.TLS == nil
	srv.MaxMessageBytes = maxMessageBytes
	srv.MaxRecipients = 100
	srv.ReadTimeout, srv.WriteTimeout = time.Minute, time.Minute
	srv.ErrorLog = slogPrinter{o.Logger}
	s.smtp = srv
	s.routes()
	return s
}

// Listen listens on addr (host:port; port 0 picks one) and serves SMTP in
// the background until Close.
func (s *Server) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mail: listen: %w", err)
	}
	s.mu.Lock()
	if s.closed || s.ln != nil {
		s.mu.Unlock()
		_ = ln.Close()
		return errors.New("mail: already listening or closed")
	}
	s.ln, s.served = ln, make(chan struct{})
	served := s.served
	s.mu.Unlock()
	go func() {
		defer close(served)
		if err := s.smtp.Serve(ln); err != nil && !errors.Is(err, smtp.ErrServerClosed) {
			s.opts.Logger.Error("SMTP server stopped", "err", err)
		}
	}()
	s.opts.Logger.Info("SMTP server listening", "addr", ln.Addr().String(), "starttls", s.opts.TLS != nil, "auth", len(s.opts.Users) > 0)
	return nil
}

// Addr is the SMTP address ("" before Listen).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops the SMTP server; safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	served := s.served
	s.mu.Unlock()
	err := s.smtp.Close()
	if served != nil {
		<-served
	}
	if errors.Is(err, smtp.ErrServerClosed) {
		err = nil
	}
	return err
}

// ServeHTTP serves the inbox page and the control API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// session is one SMTP connection's transaction state.
type session struct {
	s        *Server
	conn     *smtp.Conn
	authUser string
	from     string
	to       []string
}

var _ smtp.AuthSession = (*session)(nil)

// AuthMechanisms offers PLAIN when accounts are configured (go-smtp
// offers it only over TLS unless the server has none).
func (ss *session) AuthMechanisms() []string {
	if len(ss.s.opts.Users) == 0 {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *session) Auth(mech string) (sasl.Server, error) {
	if mech != sasl.Plain || len(ss.s.opts.Users) == 0 {
		return nil, smtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if want, ok := ss.s.opts.Users[user]; !ok || want != pass {
			return smtp.ErrAuthFailed
		}
		ss.authUser = user
		return nil
	}), nil
}

// Mail starts a transaction: refused by a fault in force, or without AUTH
// when accounts are configured.
func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if len(ss.s.opts.Users) > 0 && ss.authUser == "" {
		return smtp.ErrAuthRequired
	}
	if err := ss.s.takeRefusal(); err != nil {
		return err
	}
	ss.from = from
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.to = append(ss.to, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, isTLS := ss.conn.TLSConnectionState()
	m := parse(raw)
	m.EnvelopeFrom, m.EnvelopeTo, m.TLS, m.AuthUser = ss.from, append([]string(nil), ss.to...), isTLS, ss.authUser
	m = ss.s.store(m)
	ss.s.opts.Logger.Info("mail received", "seq", m.Seq, "messageId", m.MessageID, "to", m.EnvelopeTo, "subject", m.Subject)
	return nil
}

func (ss *session) Reset()        { ss.from, ss.to = "", nil }
func (ss *session) Logout() error { return nil }

func (s *Server) store(m Message) Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	m.Seq, m.ReceivedAt = s.seq, s.opts.Now().UTC()
	s.messages = append(s.messages, m)
	if over := len(s.messages) - s.opts.Keep; over > 0 {
		s.messages = append([]Message(nil), s.messages[over:]...)
	}
	return m
}

// Messages are the kept messages, oldest first.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// Clear empties the inbox.
func (s *Server) Clear() {
	s.mu.Lock()
	s.messages = nil
	s.mu.Unlock()
}

// slogPrinter is go-smtp's error log on slog.
type slogPrinter struct{ l *slog.Logger }

func (p slogPrinter) Printf(format string, v ...any) { p.l.Warn(fmt.Sprintf(format, v...)) }
func (p slogPrinter) Println(v ...any)               { p.l.Warn(fmt.Sprintln(v...)) }
