package notify_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"changeflow/internal/notify"
)

func TestWantsKindAndCheckKinds(t *testing.T) {
	if !notify.WantsKind(nil, notify.KindBatchBlocked) {
		t.Fatal("no types means every kind")
	}
	only := []notify.Kind{notify.KindRequestFailed}
	if !notify.WantsKind(only, notify.KindRequestFailed) || notify.WantsKind(only, notify.KindRequestInEffect) {
		t.Fatal("types filter")
	}
	if err := notify.CheckKinds(notify.Kinds); err != nil {
		t.Fatal(err)
	}
	if err := notify.CheckKinds([]notify.Kind{"request.inEffect"}); err == nil {
		t.Fatal("a misspelt kind is refused")
	}
}

func TestRetryAfterIsFoundThroughWrapping(t *testing.T) {
	base := errors.New("webhook ops Send: status 429")
	err := fmt.Errorf("deliver: %w", &notify.RetryAfterError{After: 7 * time.Second, Err: base})
	if d, ok := notify.RetryAfter(err); !ok || d != 7*time.Second || !errors.Is(err, base) {
		t.Fatalf("%v %v", d, ok)
	}
	if _, ok := notify.RetryAfter(base); ok {
		t.Fatal("a plain error asks for no wait")
	}
	if got := (&notify.RetryAfterError{Err: base}).Error(); got != base.Error() {
		t.Fatalf("no wait named: %q", got)
	}
}
