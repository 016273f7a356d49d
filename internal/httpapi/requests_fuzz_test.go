package httpapi

import (
	"errors"
	"slices"
	"testing"
	"unicode/utf8"

	"changeflow/internal/domain"
)

// FuzzDecodeSubmit: decoding a submission never panics, fails only with
// INVALID_ARGUMENT, and what it accepts has a usable operationId — the
// header alias applied, never two different keys.
func FuzzDecodeSubmit(f *testing.F) {
	for _, c := range []struct{ body, header string }{
		{`{"targetKey":"payments-db-readonly","reason":"audit"}`, ""},
		{`{"targetKey":"t","reason":"r","days":3,"operationId":"op-1"}`, "op-1"},
		{`{"operationId":"a"}`, "b"},
		{`{"days":"3"}`, ""},
		{`[]`, ""},
		{`{"targetKey":"t"} {}`, ""},
		{`{"operationId":"a b"}`, ""},
		{``, "k"},
	} {
		f.Add([]byte(c.body), c.header)
	}
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		b, problems, err := decodeSubmit(body, header)
		if err == nil {
			err = problems.err()
		}
		if err != nil {
			var de *domain.Error
			if !errors.As(err, &de) || de.Code != domain.CodeInvalidArgument {
				t.Fatalf("error %v is not INVALID_ARGUMENT", err)
			}
			// Every problem names a field of the submission, never an
			// empty or made-up one.
			for _, p := range de.Fields {
				if !slices.Contains([]string{"operationId", "targetKey", "reason", "days", headerIdempotencyKey}, p.Field) || p.Problem == "" {
					t.Fatalf("problem %+v", p)
				}
			}
			return
		}
		if b.OperationID != "" {
			if !utf8.ValidString(b.OperationID) || utf8.RuneCountInString(b.OperationID) > maxOperationIDRunes {
				t.Fatalf("accepted operationId %q", b.OperationID)
			}
		}
	})
}
