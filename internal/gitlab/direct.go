package gitlab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"changeflow/internal/outbound"
)

// CheckItems implements CheckItemsAPI: GET /projects/:id/approval_check_items.
func (c *Client) CheckItems(ctx context.Context, bot Bot, project string) ([]CheckItem, error) {
	var items []CheckItem
	err := c.direct(ctx, "CheckItems", bot, http.MethodGet, "projects/"+url.PathEscape(project)+"/approval_check_items", nil, &items)
	if items == nil && err == nil {
		items = []CheckItem{}
	}
	return items, err
}

// ApproveWithCheckItems implements CheckItemsAPI: POST …/approve with JSON
// {sha, check_items}. The client library cannot send check_items, hence
// plain HTTP — with the same token, deadline, breaker and error type.
func (c *Client) ApproveWithCheckItems(ctx context.Context, bot Bot, project string, iid int64, sha string, items []CheckItem) error {
	if items == nil {
		items = []CheckItem{}
	}
	body := struct {
		SHA        string      `json:"sha,omitempty"`
		CheckItems []CheckItem `json:"check_items"`
	}{sha, items}
	raw, err := json.Marshal(body)
	if err != nil {
		return &Error{Op: "Approve", Message: err.Error(), Err: err}
	}
	path := "projects/" + url.PathEscape(project) + "/merge_requests/" + strconv.FormatInt(iid, 10) + "/approve"
	return c.direct(ctx, "Approve", bot, http.MethodPost, path, raw, nil)
}

// direct sends one JSON request as bot with the deadline, through the
// breaker, in this instance's pace (paced); a non-2xx answer is a *Error with GitLab's status and message
// (and, for a 422 carrying one, the current check items).
func (c *Client) direct(ctx context.Context, op string, bot Bot, method, path string, body []byte, out any) error {
	s := c.out.Settings()
	if s.BaseURL == "" {
		return &Error{Op: op, Message: "gitlab.baseURL is not configured"}
	}
	token := s.Tokens.token(bot)
	if token == "" {
		return &Error{Op: op, Message: fmt.Sprintf("no token for bot %q (gitlab.tokens.%s)", bot, bot)}
	}
	return c.paced(ctx, s, op, "", false, func(ctx context.Context) error {
		return c.out.Do(ctx, s, outbound.Request{Op: op, Method: method, URL: s.apiBase() + path,
			Header: http.Header{"Private-Token": {token}}, Body: body,
			Answer: func(status int, raw []byte) error {
				if !outbound.Success(status) {
					return answerError(op, status, raw)
				}
				return outbound.DecodeAnswer("gitlab", op, status, raw, out)
			}})
	})
}

// answerError reads GitLab's error body: {"message": string | [string] |
// object} or {"error": string}, and on approve's 422 {"check_items": […]}.
func answerError(op string, status int, raw []byte) *Error {
	e := &Error{Op: op, Status: status, Message: http.StatusText(status)}
	var b struct {
		Message    json.RawMessage `json:"message"`
		Error      string          `json:"error"`
		CheckItems []CheckItem     `json:"check_items"`
	}
	if json.Unmarshal(raw, &b) != nil {
		return e
	}
	var s string
	var list []string
	switch {
	case json.Unmarshal(b.Message, &s) == nil && s != "":
		e.Message = s
	case json.Unmarshal(b.Message, &list) == nil && len(list) > 0:
		e.Message = list[0]
	case len(b.Message) > 0 && string(b.Message) != "null":
		e.Message = string(b.Message)
	case b.Error != "":
		e.Message = b.Error
	}
	if b.CheckItems != nil {
		e.CurrentCheckItems = b.CheckItems
	}
	return e
}
