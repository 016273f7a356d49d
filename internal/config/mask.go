package config

import (
	"net/url"
	"strings"
)

// masked is what every secret looks like in Effective(), /ops/config and
// logs. It does not vary with the secret's length, so nothing about the
// secret leaks; "" still means "not set", which is what an operator needs.
const masked = "****"

func maskSecret(s string) string {
	if s == "" {
		return ""
	}
	return masked
}

func maskURL(u *url.URL) string { return u.Redacted() }

// maskDSN hides the password of a database DSN in the forms changeflow
// accepts: MySQL's user:pass@tcp(host)/db, URL form scheme://user:pass@host,
// and password-like parameters. SQLite DSNs carry no password and pass
// through unchanged.
func maskDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" && u.User != nil {
		if _, has := u.User.Password(); has {
			dsn = u.Redacted()
		}
	} else if at := strings.LastIndex(dsn, "@"); at > 0 {
		userinfo := dsn[:at]
		if colon := strings.Index(userinfo, ":"); colon >= 0 {
			dsn = userinfo[:colon+1] + masked + dsn[at:]
		}
	}
	return maskParams(dsn)
}

// maskParams masks values of parameters whose name says they are secret.
func maskParams(dsn string) string {
	q := strings.IndexAny(dsn, "?")
	if q < 0 {
		return dsn
	}
	head, params := dsn[:q+1], strings.Split(dsn[q+1:], "&")
	for i, p := range params {
		name, _, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		n := strings.ToLower(name)
		if strings.Contains(n, "pass") || strings.Contains(n, "pwd") || strings.Contains(n, "secret") || strings.Contains(n, "token") {
			params[i] = name + "=" + masked
		}
	}
	return head + strings.Join(params, "&")
}
