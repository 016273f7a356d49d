package config

import (
	"cmp"
	"encoding/base64"
	"fmt"
	netmail "net/mail"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"changeflow/internal/notify"
	"changeflow/internal/sim/simtoken"
)

// This file holds notify.*: the channels the outbox delivers through
// (docs/notifications.md) and how often it tries. A channel that
// is configured wrongly would send to the wrong place, unsigned, or not at
// all without a word, so unlike most items a bad entry is not dropped: it
// stops the start (and a reload keeps the snapshot in force), with the
// item and the entry named. No message repeats a URL or a secret: a chat
// URL is its credential, and a webhook's may carry a token.

// NotifyWebhook is one notify.webhooks entry.
type NotifyWebhook struct {
	// Name is unique among the webhooks; the channel is "webhook:"+Name.
	Name string
	// URL is where events are POSTed (http or https). Never log it.
	URL string
	// Secret signs every delivery (webhook.Key's forms). Never log it.
	Secret string
	// Types are the kinds the endpoint hears; empty means all.
	Types []notify.Kind
}

// NotifyChat is one notify.chat entry: a Slack or Mattermost incoming
// webhook.
type NotifyChat struct {
	// Name is unique among the chat channels; the channel is "chat:"+Name.
	Name string
	// URL is the incoming webhook's URL, which is its credential: never
	// log it.
	URL string
	// Types are the kinds the channel hears; empty means all.
	Types []notify.Kind
}

// NotifySMTP is notify.smtp.*: the SMTP server e-mail goes through. Host
// "" means e-mail is off.
type NotifySMTP struct {
	Host string
	Port int
	// Username, when set, authenticates; Password is in clear here (the
	// Resolution shows it masked).
	Username, Password string
	// From is the sender's address; always set and valid when Host is.
	From string
	// StartTLS makes STARTTLS mandatory (mail.Settings.StartTLS).
	StartTLS bool
}

// Defaults of notify.*.
const (
	// DefaultNotifySMTPPort is notify.smtp.port's default, the message
	// submission port internal/notify/mail also defaults to.
	DefaultNotifySMTPPort = 587
	// DefaultNotifyMaxAttempts is notify.maxAttempts' default.
	DefaultNotifyMaxAttempts = 8
	// LocalNotifyReceiver is the name of the simulators' webhook receiver
	// (/hooks/<name>) the embedded simulators stand in with.
	LocalNotifyReceiver = "local"
)

// defaultExpiryReminders is notify.expiryReminders' default, as the
// defaults layer holds it.
const defaultExpiryReminders = "72h, 24h"

// NotifyWebhooks returns notify.webhooks, in the order configured.
func (s *Snapshot) NotifyWebhooks() []NotifyWebhook {
	v, _ := s.vals[KeyNotifyWebhooks].([]NotifyWebhook)
	out := slices.Clone(v)
	for i := range out {
		out[i].Types = slices.Clone(out[i].Types)
	}
	return out
}

// NotifyChat returns notify.chat, in the order configured.
func (s *Snapshot) NotifyChat() []NotifyChat {
	v, _ := s.vals[KeyNotifyChat].([]NotifyChat)
	out := slices.Clone(v)
	for i := range out {
		out[i].Types = slices.Clone(out[i].Types)
	}
	return out
}

// NotifySMTP returns notify.smtp.*.
func (s *Snapshot) NotifySMTP() NotifySMTP {
	return NotifySMTP{
		Host: s.str(KeyNotifySMTPHost), Port: s.num(KeyNotifySMTPPort),
		Username: s.str(KeyNotifySMTPUsername), Password: s.str(KeyNotifySMTPPassword),
		From: s.str(KeyNotifySMTPFrom), StartTLS: s.flag(KeyNotifySMTPStartTLS),
	}
}

// NotifyOperators returns notify.operators: the addresses that hear of
// blocked batches and foreign heads.
func (s *Snapshot) NotifyOperators() []string {
	v, _ := s.vals[KeyNotifyOperators].([]string)
	return slices.Clone(v)
}

// NotifyMaxAttempts returns notify.maxAttempts: how often the outbox
// tries one delivery before it dead-letters it (at least 1).
func (s *Snapshot) NotifyMaxAttempts() int { return s.num(KeyNotifyMaxAttempts) }

// NotifyInterval returns notify.interval: the pause between two delivery
// passes of an instance.
func (s *Snapshot) NotifyInterval() time.Duration { return s.dur(KeyNotifyInterval) }

// NotifyReminderScanInterval returns notify.reminderScanInterval: how
// often a delivery pass also scans for the expiry reminders due.
func (s *Snapshot) NotifyReminderScanInterval() time.Duration {
	return s.dur(KeyNotifyReminderScanInterval)
}

// NotifyExpiryReminders returns notify.expiryReminders: how long before a
// grant expires each access.expiring reminder goes out, longest first.
func (s *Snapshot) NotifyExpiryReminders() []time.Duration {
	v, _ := s.vals[KeyNotifyExpiryReminders].([]time.Duration)
	return slices.Clone(v)
}

// notifyItems are notify.* but notify.allowSafetyOptOut, in documentation
// order. The channels are built once at start, so their items need a
// restart; the attempts and reminders are read as they are used.
func notifyItems() []item {
	const restart, hot = true, false
	return []item{
		{key: KeyNotifyWebhooks, typ: "list of `{name, url, secret, types}` (YAML list; in env/etcd the same as YAML/JSON flow text); secret and url masked",
			restart:  true,
			fallback: "missing/empty → none; with sim.embedded on and missing: the simulators' receiver `local` (http://<sim.listen>/hooks/local, secret `" + simtoken.NotifyWebhook + "`); an explicit [] → none; an entry without a name, with a repeated name, a url that is not http(s), no secret, a `whsec_` secret that is not base64, an unknown field or an unknown kind in types → startup error naming the entry (reload: old snapshot kept); outside --local an entry signed with a simulators' published secret → refused: serve does not start, a reload leaves that webhook out",
			why:      "an event sent unsigned, to the wrong place, or to nobody because of a typo in types would be a message nobody can trust or nobody gets; types empty = every kind", resolve: resolveNotifyWebhooks},
		{key: KeyNotifyChat, typ: "list of `{name, url, types}` (Slack/Mattermost incoming webhooks; env/etcd as for notify.webhooks); url masked",
			restart:  true,
			fallback: "missing/empty → none; an entry without a name, with a repeated name, a url that is not http(s), an unknown field or an unknown kind in types → startup error naming the entry, never its url (reload: old snapshot kept)",
			why:      "the incoming webhook's URL is its credential (whoever has it posts to the channel), so no message repeats it; a channel that silently hears nothing is worse than not starting", resolve: resolveNotifyChat},
		withType(stringItem(KeyNotifySMTPHost, "", restart, "missing/empty → e-mail off",
			"e-mail is optional; without a host no message is mailed (webhooks and chat still are)"), "host name or IP"),
		intItem(KeyNotifySMTPPort, DefaultNotifySMTPPort, 1, 65535, restart,
			"587 is message submission (STARTTLS, authenticated clients); implicit TLS (465) is not supported"),
		stringItem(KeyNotifySMTPUsername, "", restart, "missing/empty → no authentication",
			"with a username the strongest mechanism the server offers is used; PLAIN and LOGIN only over TLS, so a password never crosses a network in clear"),
		secretItem(KeyNotifySMTPPassword, restart, "missing/empty → empty password", "see notify.smtp.username"),
		{key: KeyNotifySMTPFrom, typ: "e-mail address (RFC 5322, e.g. `changeflow <changeflow@corp.example>`)", restart: true,
			fallback: "missing/empty with notify.smtp.host set, or not an address → startup error (reload: old snapshot kept); ignored while the host is empty",
			why:      "a message without a valid sender is refused by the server or lands in spam: better not to start than to lose every message", resolve: resolveNotifySMTPFrom},
		boolItem(KeyNotifySMTPStartTLS, false, restart,
			"true makes STARTTLS mandatory (a server without it, or whose certificate does not verify, fails the delivery); false is opportunistic (STARTTLS when offered, certificate still verified) for a relay on the same host or network"),
		{key: KeyNotifyOperators, typ: "list of e-mail addresses (YAML list, or comma-separated)", restart: true,
			fallback: "missing/empty → nobody hears of blocked batches and foreign heads by e-mail; an entry that is not an address → startup error naming it (reload: old snapshot kept)",
			why:      "the operators are who must act on a blocked batch or a commit changeflow did not write; a misspelt address would lose those messages without a word", resolve: resolveNotifyOperators},
		intItem(KeyNotifyMaxAttempts, DefaultNotifyMaxAttempts, 1, 100, hot,
			"how often one delivery is tried (with backoff) before it is dead-lettered for an operator; 0 would never try"),
		durItem(KeyNotifyInterval, time.Second, 50*time.Millisecond, time.Millisecond, hot,
			"how soon after its change an event goes out (a pass claims what is due, then waits this long); each pass is one indexed read when nothing is due"),
		durItem(KeyNotifyReminderScanInterval, 30*time.Second, time.Second, time.Second, hot,
			"a reminder is about hours, and the scan reads every access in effect that ends within the largest threshold"),
		{key: KeyNotifyExpiryReminders, typ: "list of durations (72h, 3d; bare integer = seconds)", def: defaultExpiryReminders,
			fallback: "missing/empty → 72h, 24h; an entry that is malformed, ≤ 0 or the same as another (72h and 3d) → startup error naming it (reload: old snapshot kept); sorted longest first",
			why:      "how long before a grant expires each access.expiring reminder goes out; a reminder read wrongly would tell people at the wrong time or never", resolve: resolveNotifyExpiryReminders},
	}
}

// entryFields names the fields a list entry may have, canonical spelling
// by lower-case spelling.
type entryFields map[string]string

// notifyEntries reads a list of maps: a YAML list from the file or the
// overlay, or the same list as YAML (or JSON) flow text from env or etcd.
// Field names are matched case-insensitively, like every key; an unknown
// field is an error, because a misspelt "secert" would otherwise leave a
// webhook unsigned or a "type" make it hear every kind.
func notifyEntries(key string, r raw, fields entryFields) ([]map[string]any, error) {
	v := r.v
	if s, ok := v.(string); ok {
		var parsed any
		if err := yaml.Unmarshal([]byte(s), &parsed); err != nil {
			// The text may hold a secret and the parser's message
			// quotes it, so the message is left out.
			return nil, fmt.Errorf("%w: %s (from %s) is not a YAML or JSON list of entries", ErrInvalid, key, r.source)
		}
		v = parsed
	}
	// A program's overlay may hold the Go type rather than YAML's.
	if ms, ok := v.([]map[string]any); ok {
		l := make([]any, len(ms))
		for i, m := range ms {
			l[i] = m
		}
		v = l
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s (from %s) is not a list of entries", ErrInvalid, key, r.source)
	}
	out := make([]map[string]any, 0, len(list))
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: %s[%d] (from %s) is not an entry of %s", ErrInvalid, key, i, r.source, fieldList(fields))
		}
		canon := map[string]any{}
		for k, fv := range m {
			c, known := fields[strings.ToLower(strings.TrimSpace(k))]
			if !known {
				return nil, fmt.Errorf("%w: %s[%d] (from %s) has the unknown field %s (known: %s)", ErrInvalid, key, i, r.source, quoted(k), fieldList(fields))
			}
			canon[c] = fv
		}
		out = append(out, canon)
	}
	return out, nil
}

func fieldList(fields entryFields) string {
	names := make([]string, 0, len(fields))
	for _, c := range fields {
		names = append(names, c)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// channelEntry is what a webhook and a chat entry share, read and checked.
type channelEntry struct {
	name, url string
	types     []notify.Kind
}

// readChannelEntry checks the fields every channel entry has. where names
// the entry in messages: the item, its index and the layer.
func readChannelEntry(m map[string]any, where string, seen map[string]bool) (channelEntry, error) {
	var e channelEntry
	if nv, ok := m["name"]; ok && isScalar(nv) {
		e.name = strings.TrimSpace(text(nv))
	}
	if !channelName(e.name) {
		if e.name == "" {
			return e, fmt.Errorf("%w: %s has no name", ErrInvalid, where)
		}
		return e, fmt.Errorf("%w: %s: name %s is not a channel name (a letter or digit, then letters, digits, . _ -; at most 64)", ErrInvalid, where, quoted(e.name))
	}
	where += " " + strconv.Quote(e.name)
	lower := strings.ToLower(e.name)
	if seen[lower] {
		return e, fmt.Errorf("%w: %s: the name is used by an earlier entry (names are unique, case-insensitively)", ErrInvalid, where)
	}
	seen[lower] = true
	uv, ok := m["url"]
	if !ok || !isScalar(uv) || isBlank(uv) {
		return e, fmt.Errorf("%w: %s has no url", ErrInvalid, where)
	}
	e.url = strings.TrimSpace(text(uv))
	if u, err := url.Parse(e.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return e, fmt.Errorf("%w: %s: url is not an absolute http or https URL (not shown: it may carry a credential)", ErrInvalid, where)
	}
	if tv, ok := m["types"]; ok && !isBlank(tv) {
		if _, isMap := tv.(map[string]any); isMap {
			return e, fmt.Errorf("%w: %s: types is not a list of event kinds", ErrInvalid, where)
		}
		names, _ := parseList(tv)
		for _, n := range names {
			e.types = append(e.types, notify.Kind(n))
		}
		if err := notify.CheckKinds(e.types); err != nil {
			return e, fmt.Errorf("%w: %s: types: %w (known: %s)", ErrInvalid, where, err, kindList())
		}
	}
	return e, nil
}

func kindList() string {
	names := make([]string, 0, len(notify.Kinds))
	for _, k := range notify.Kinds {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// channelName: a name that reads the same in a channel's name, a log
// line and the simulators' /hooks/<name>.
func channelName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i, c := range s {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("._-", c)) {
			return false
		}
	}
	return true
}

// isScalar reports whether a YAML value is one value, not a list or map.
func isScalar(v any) bool {
	switch v.(type) {
	case []any, map[string]any:
		return false
	}
	return true
}

// typesText shows a types list in a Resolution.
func typesText(types []notify.Kind) string {
	if len(types) == 0 {
		return "all"
	}
	parts := make([]string, len(types))
	for i, k := range types {
		parts[i] = string(k)
	}
	return strings.Join(parts, " ")
}

// shownURL is a webhook URL as /ops/config shows it: scheme and host
// only, since the path or query may carry a token.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return masked
	}
	if u.Path == "" && u.RawQuery == "" && u.User == nil {
		return u.Scheme + "://" + u.Host
	}
	return u.Scheme + "://" + u.Host + "/" + masked
}

// resolveNotifyWebhooks reads notify.webhooks. With the simulators
// embedded and nothing configured, the local run signs its webhooks for
// the simulators' receiver at /hooks/local, derived from sim.listen like
// the dependency URLs, so one setting still moves the whole local world.
func resolveNotifyWebhooks(it *item, r raw, done map[string]any) result {
	if !r.set || (isBlank(r.v) && !isEmptyList(r.v)) {
		embedded, _ := done[KeySimEmbedded].(bool)
		listen, _ := done[KeySimListen].(string)
		if base := LocalURL(listen); embedded && base != "" {
			hooks := []NotifyWebhook{{Name: LocalNotifyReceiver, URL: base + "/hooks/" + LocalNotifyReceiver, Secret: simtoken.NotifyWebhook}}
			return result{val: hooks, text: webhooksText(hooks), reason: "derived from sim.listen (sim.embedded on): the simulators' receiver " + LocalNotifyReceiver}
		}
		return emptyList(r, "none", []NotifyWebhook{})
	}
	if isEmptyList(r.v) {
		return result{val: []NotifyWebhook{}, reason: builtinOr(r)}
	}
	entries, err := notifyEntries(it.key, r, entryFields{"name": "name", "url": "url", "secret": "secret", "types": "types"})
	if err != nil {
		return result{err: err}
	}
	seen := map[string]bool{}
	hooks := make([]NotifyWebhook, 0, len(entries))
	for i, m := range entries {
		where := fmt.Sprintf("%s[%d] (from %s)", it.key, i, r.source)
		e, err := readChannelEntry(m, where, seen)
		if err != nil {
			return result{err: err}
		}
		where += " " + strconv.Quote(e.name)
		var secret string
		if sv, ok := m["secret"]; ok && isScalar(sv) {
			secret = strings.TrimSpace(text(sv))
		}
		if secret == "" {
			return result{err: fmt.Errorf("%w: %s has no secret: an unsigned webhook cannot be told from a forged one", ErrInvalid, where)}
		}
		if b64, ok := strings.CutPrefix(secret, "whsec_"); ok {
			if key, err := base64.StdEncoding.DecodeString(b64); err != nil || len(key) == 0 {
				return result{err: fmt.Errorf(`%w: %s: the secret starts with "whsec_" but what follows is not base64`, ErrInvalid, where)}
			}
		}
		hooks = append(hooks, NotifyWebhook{Name: e.name, URL: e.url, Secret: secret, Types: e.types})
	}
	return result{val: hooks, text: webhooksText(hooks), reason: builtinOr(r)}
}

func webhooksText(hooks []NotifyWebhook) string {
	parts := make([]string, len(hooks))
	for i, h := range hooks {
		parts[i] = h.Name + ": url " + shownURL(h.URL) + ", secret " + masked + ", types " + typesText(h.Types)
	}
	return strings.Join(parts, "; ")
}

// resolveNotifyChat reads notify.chat.
func resolveNotifyChat(it *item, r raw, _ map[string]any) result {
	if !r.set || isBlank(r.v) {
		if isEmptyList(r.v) {
			return result{val: []NotifyChat{}, reason: builtinOr(r)}
		}
		return emptyList(r, "none", []NotifyChat{})
	}
	entries, err := notifyEntries(it.key, r, entryFields{"name": "name", "url": "url", "types": "types"})
	if err != nil {
		return result{err: err}
	}
	seen := map[string]bool{}
	chats := make([]NotifyChat, 0, len(entries))
	parts := make([]string, 0, len(entries))
	for i, m := range entries {
		e, err := readChannelEntry(m, fmt.Sprintf("%s[%d] (from %s)", it.key, i, r.source), seen)
		if err != nil {
			return result{err: err}
		}
		chats = append(chats, NotifyChat{Name: e.name, URL: e.url, Types: e.types})
		parts = append(parts, e.name+": url "+masked+", types "+typesText(e.types))
	}
	return result{val: chats, text: strings.Join(parts, "; "), reason: builtinOr(r)}
}

// isEmptyList reports an explicit [] (a choice: no entries), as opposed
// to a missing or blank value.
func isEmptyList(v any) bool {
	l, ok := v.([]any)
	return ok && len(l) == 0
}

// resolveNotifySMTPFrom checks notify.smtp.from against notify.smtp.host,
// resolved before it: a sender is needed only when e-mail is on.
func resolveNotifySMTPFrom(it *item, r raw, done map[string]any) result {
	host, _ := done[KeyNotifySMTPHost].(string)
	s := ""
	if r.set && !isBlank(r.v) {
		s = strings.TrimSpace(text(r.v))
	}
	if host == "" {
		if s == "" {
			return result{val: "", reason: reasonBuiltin + " (unset; e-mail is off)"}
		}
		return result{val: s, text: s, reason: "notify.smtp.host is empty: used only for the embedded simulators' SMTP server (sim.embedded), else e-mail is off"}
	}
	if s == "" {
		return result{err: fmt.Errorf("%w: %s is empty but notify.smtp.host is set: e-mail needs a sender address", ErrInvalid, it.key)}
	}
	if _, err := netmail.ParseAddress(s); err != nil {
		return result{err: fmt.Errorf("%w: %s %s (from %s) is not an e-mail address: %w", ErrInvalid, it.key, quoted(s), r.source, err)}
	}
	return result{val: s, text: s, reason: builtinOr(r)}
}

// resolveNotifyOperators reads notify.operators, each an address
// net/mail parses.
func resolveNotifyOperators(it *item, r raw, _ map[string]any) result {
	if !r.set || isBlank(r.v) {
		return emptyList(r, "none", []string{})
	}
	entries, _ := parseList(r.v)
	for i, e := range entries {
		if _, err := netmail.ParseAddress(e); err != nil {
			return result{err: fmt.Errorf("%w: %s[%d] %s (from %s) is not an e-mail address: %w", ErrInvalid, it.key, i, quoted(e), r.source, err)}
		}
	}
	if entries == nil {
		entries = []string{}
	}
	return result{val: entries, text: strings.Join(entries, ", "), reason: builtinOr(r)}
}

// resolveNotifyExpiryReminders reads notify.expiryReminders and sorts it
// longest first, the order the reminders go out in.
func resolveNotifyExpiryReminders(it *item, r raw, _ map[string]any) result {
	if !r.set || isBlank(r.v) {
		def, _ := parseReminders(it.key, raw{v: it.def, set: true, source: SourceDefault})
		if !r.set || r.source == SourceDefault {
			return result{val: def, text: remindersText(def), reason: reasonBuiltin}
		}
		return result{val: def, text: remindersText(def), fellBack: true, reason: fellBack("empty → default %s", remindersText(def))}
	}
	ds, err := parseReminders(it.key, r)
	if err != nil {
		return result{err: err}
	}
	return result{val: ds, text: remindersText(ds), reason: builtinOr(r)}
}

func parseReminders(key string, r raw) ([]time.Duration, error) {
	entries, _ := parseList(r.v)
	ds := make([]time.Duration, 0, len(entries))
	first := map[time.Duration]string{}
	for i, e := range entries {
		d, why := parseDuration(e, time.Second)
		switch {
		case why != "":
			return nil, fmt.Errorf("%w: %s[%d] %s (from %s) is %s", ErrInvalid, key, i, quoted(e), r.source, why)
		case d <= 0:
			return nil, fmt.Errorf("%w: %s[%d] %s (from %s) is not after 0: a reminder goes out before the grant expires", ErrInvalid, key, i, quoted(e), r.source)
		}
		if prev, dup := first[d]; dup {
			return nil, fmt.Errorf("%w: %s[%d] %s (from %s) is the same reminder as %s", ErrInvalid, key, i, quoted(e), r.source, quoted(prev))
		}
		first[d] = e
		ds = append(ds, d)
	}
	slices.SortFunc(ds, func(a, b time.Duration) int { return cmp.Compare(b, a) })
	return ds, nil
}

func remindersText(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmtDur(d)
	}
	return strings.Join(parts, ", ")
}
