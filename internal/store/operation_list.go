package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// OperationCursor is a position in a newest-first listing: the
// (created_at, id) of the last row returned. The id breaks ties between
// rows created in the same microsecond (millisecond on SQLite).
type OperationCursor struct {
	CreatedAt time.Time
	ID        int64
}

// IsZero reports whether c is the start of a listing.
func (c OperationCursor) IsZero() bool { return c.ID == 0 }

// Encode returns c as an opaque, URL-safe token for the API's nextCursor.
func (c OperationCursor) Encode() string {
	if c.IsZero() {
		return ""
	}
	raw := strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + "." + strconv.FormatInt(c.ID, 10)
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// ParseOperationCursor decodes a token from Encode; "" is the zero cursor.
// A token that does not decode is an error, which the API reports as
// INVALID_ARGUMENT.
func ParseOperationCursor(token string) (OperationCursor, error) {
	if token == "" {
		return OperationCursor{}, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return OperationCursor{}, fmt.Errorf("cursor: %w", err)
	}
	micros, id, ok := strings.Cut(string(raw), ".")
	if !ok {
		return OperationCursor{}, errors.New("cursor: malformed")
	}
	us, err1 := strconv.ParseInt(micros, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if err := errors.Join(err1, err2); err != nil || n <= 0 {
		return OperationCursor{}, fmt.Errorf("cursor: malformed: %w", err)
	}
	return OperationCursor{CreatedAt: time.UnixMicro(us).UTC(), ID: n}, nil
}

// OperationListBySubjectParams asks for one page of a subject's requests.
type OperationListBySubjectParams struct {
	Subject string
	// Limit is the page size, clamped to 1..MaxOperationPage.
	Limit int
	// After is the cursor of the previous page's last row; zero for the
	// first page.
	After OperationCursor
}

// MaxOperationPage is the largest page OperationListBySubject returns.
const MaxOperationPage = 200

// OperationPage is one page of a listing.
type OperationPage struct {
	Items []Operation
	// Next is the cursor of the next page; zero when this is the last.
	Next OperationCursor
}

// OperationListBySubject returns the subject's requests newest first
// ("my records"), one page at a time. It is a keyset page over the index
// (subject, created_at, id): no OFFSET, so a page costs the same however
// deep it is, and rows inserted meanwhile do not shift later pages.
func (s *Store) OperationListBySubject(ctx context.Context, p OperationListBySubjectParams) (OperationPage, error) {
	limit := min(max(p.Limit, 1), MaxOperationPage)
	q := "SELECT " + operationColumns + " FROM operation WHERE subject = ?"
	vals := []any{p.Subject}
	if !p.After.IsZero() {
		// The leading "created_at <= ?" bounds the index range; the OR
		// resolves ties by id.
		at := s.dialect.Time(p.After.CreatedAt)
		q += " AND created_at <= ? AND (created_at < ? OR id < ?)"
		vals = append(vals, at, at, p.After.ID)
	}
	q += " ORDER BY created_at DESC, id DESC LIMIT ?"
	vals = append(vals, limit+1)

	rows, err := s.db.QueryContext(ctx, q, vals...)
	if err != nil {
		return OperationPage{}, fmt.Errorf("list operations of %s: %w", p.Subject, translate(err))
	}
	defer rows.Close()
	var page OperationPage
	for rows.Next() {
		o, err := scanOperation(rows)
		if err != nil {
			return OperationPage{}, fmt.Errorf("list operations of %s: %w", p.Subject, err)
		}
		page.Items = append(page.Items, o)
	}
	if err := rows.Err(); err != nil {
		return OperationPage{}, fmt.Errorf("list operations of %s: %w", p.Subject, translate(err))
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		last := page.Items[limit-1]
		page.Next = OperationCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return page, nil
}
