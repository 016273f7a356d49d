package httppost

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestSnippetIsOneShortLine(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"white space collapses", "  bad \r\n\t request  ", "bad request"},
		{"control and invalid bytes are spaces", "a\x00b\xffc", "a b c"},
		{"clipped", strings.Repeat("x", 300), strings.Repeat("x", snippetMax) + "…"},
		{"exactly the bound is not clipped", strings.Repeat("y", snippetMax), strings.Repeat("y", snippetMax)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Snippet([]byte(tt.in)); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRetryAfterReadsSecondsAndDates(t *testing.T) {
	now := time.Date(2026, 12, 4, 5, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"soon", 0}, {"-3", 0}, {"30", 30 * time.Second}, {"86400", time.Hour},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.in, now); got != tt.want {
			t.Errorf("%q: %s, want %s", tt.in, got, tt.want)
		}
	}
}
