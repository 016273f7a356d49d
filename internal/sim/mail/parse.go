package mail

import (
	"bytes"
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	netmail "net/mail"
	"strings"
	"time"
)

// Message is one accepted message, parsed for people and tests.
type Message struct {
	Seq int64 `json:"seq"`
	// EnvelopeFrom and EnvelopeTo are MAIL FROM and RCPT TO.
	EnvelopeFrom string   `json:"envelopeFrom"`
	EnvelopeTo   []string `json:"envelopeTo"`
	// MessageID, From, To, Subject and Date are the headers, decoded.
	MessageID string   `json:"messageId"`
	From      string   `json:"from"`
	To        []string `json:"to"`
	Subject   string   `json:"subject"`
	Date      string   `json:"date"`
	// Headers are every header, decoded, by canonical name.
	Headers map[string][]string `json:"headers"`
	// Text and HTML are the text/plain and text/html parts (or the body
	// of a single-part message of that type), transfer-decoded, with LF
	// line ends.
	Text string `json:"text"`
	HTML string `json:"html"`
	// ParseError says what could not be read; the raw message is kept.
	ParseError string    `json:"parseError,omitempty"`
	TLS        bool      `json:"tls"`
	AuthUser   string    `json:"authUser,omitempty"`
	ReceivedAt time.Time `json:"receivedAt"`
	Raw        string    `json:"raw"`
}

var wordDecoder = mime.WordDecoder{}

// parse reads raw as far as it can; what it cannot read is in ParseError.
func parse(raw []byte) Message {
	m := Message{Raw: string(raw), Headers: map[string][]string{}}
	msg, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		m.ParseError = err.Error()
		return m
	}
	for k, vs := range msg.Header {
		for _, v := range vs {
			m.Headers[k] = append(m.Headers[k], decodeWords(v))
		}
	}
	m.MessageID, m.Subject, m.Date = msg.Header.Get("Message-Id"), decodeWords(msg.Header.Get("Subject")), msg.Header.Get("Date")
	m.From = decodeWords(msg.Header.Get("From"))
	if to, err := msg.Header.AddressList("To"); err == nil {
		for _, a := range to {
			m.To = append(m.To, a.Address)
		}
	}
	if err := m.readPart(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body, 0); err != nil {
		m.ParseError = err.Error()
	}
	return m
}

func decodeWords(v string) string {
	if d, err := wordDecoder.DecodeHeader(v); err == nil {
		return d
	}
	return v
}

// readPart fills Text and HTML from a part, descending into multiparts
// (alternative inside mixed, a few levels at most).
func (m *Message) readPart(contentType, encoding string, body io.Reader, depth int) error {
	if contentType == "" {
		contentType = "text/plain"
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return err
	}
	if strings.HasPrefix(mt, "multipart/") && depth < 4 {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := m.readPart(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p, depth+1); err != nil {
				return err
			}
		}
	}
	b, err := io.ReadAll(decodeTransfer(encoding, body))
	if err != nil {
		return err
	}
	// Line ends are CRLF on the wire; the parts are kept with LF, as
	// people and tests read them.
	text := strings.ReplaceAll(string(b), "\r\n", "\n")
	switch {
	case mt == "text/plain" && m.Text == "":
		m.Text = text
	case mt == "text/html" && m.HTML == "":
		m.HTML = text
	}
	return nil
}

func decodeTransfer(encoding string, r io.Reader) io.Reader {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "quoted-printable":
		return quotedprintable.NewReader(r)
	case "base64":
		return base64.NewDecoder(base64.StdEncoding, r) // it skips the line breaks
	}
	return r
}
