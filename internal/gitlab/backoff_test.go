package gitlab

import (
	"testing"
	"time"
)

func TestBackoffDoublesAndIsCapped(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		base    time.Duration
		attempt int
		want    time.Duration
	}{
		{500 * ms, 1, 500 * ms},
		{500 * ms, 2, time.Second},
		{500 * ms, 3, 2 * time.Second},
		{500 * ms, 100, MaxBackoffWait}, // no shift overflow
		{0, 5, 0},
		{-ms, 1, 0},
	}
	for _, tt := range tests {
		if got := backoff(tt.base, tt.attempt); got != tt.want {
			t.Errorf("backoff(%v, %d) = %v, want %v", tt.base, tt.attempt, got, tt.want)
		}
	}
}
