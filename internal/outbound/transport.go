package outbound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// RoundTripper is the transport for requests that are not made by Do
// (identity's discovery and JWKS reads hand an *http.Client around): each
// request gets the call's deadline, kept until its body is closed, and
// passes the breaker. A transport error or an answer of 5xx counts as a
// failure (IsSuccessful judges transport errors); the 5xx answer is still
// handed on, for the caller to read its status. While the breaker is open
// a request fails at once, untouched by the network. Failures come back
// as "<Service>: <cause>".
func (c *Client[S]) RoundTripper() http.RoundTripper { return roundTripper[S]{c} }

type roundTripper[S any] struct{ c *Client[S] }

// errServerAnswer marks a 5xx answer inside the breaker: it is counted,
// then dropped, and the answer returned.
var errServerAnswer = errors.New("server error answer")

func (t roundTripper[S]) RoundTrip(req *http.Request) (*http.Response, error) {
	s := t.c.CallSettings(t.c.settings())
	cb := t.c.breaker.For(s)
	ctx, cancel := context.WithTimeout(req.Context(), s.Timeout)
	var resp *http.Response
	_, err := cb.Execute(func() (struct{}, error) {
		r, err := t.c.http.Transport.RoundTrip(req.WithContext(ctx))
		if err != nil {
			return struct{}{}, err
		}
		resp = r
		if r.StatusCode >= 500 {
			return struct{}{}, errServerAnswer
		}
		return struct{}{}, nil
	})
	if errors.Is(err, errServerAnswer) {
		err = nil
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%s: %w", t.c.service, err)
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose releases the call's deadline once the body is consumed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
