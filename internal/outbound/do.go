package outbound

import (
	"bytes"
	"context"
	"io"
	"net/http"
)

// MaxBody bounds what is read of an answer: the answers of these
// dependencies are small, and a huge body from a broken proxy must not
// fill memory.
const MaxBody = 1 << 20

// Do sends one request (a JSON body when body is not nil, with the given
// extra headers) and reads at most MaxBody of the answer. ctx carries the
// call's deadline (Breaker.Call gives it). A failure without an answer is
// a TransportError; a body cut short after the status arrived is a *Error
// with that status (the outcome is known). Any status comes back as is:
// what a non-2xx means is the caller's to say.
func Do(ctx context.Context, hc *http.Client, service, op, method, url string, header http.Header, body []byte) (status int, raw []byte, err error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, &Error{Service: service, Op: op, Message: err.Error(), Err: err}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, TransportError(service, op, err)
	}
	defer resp.Body.Close()
	raw, err = io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		return resp.StatusCode, nil, &Error{Service: service, Op: op, Status: resp.StatusCode, Message: "reading answer: " + err.Error(), Err: err}
	}
	return resp.StatusCode, raw, nil
}
