package domain

import (
	"testing"
	"time"
)

func TestSubmit(t *testing.T) {
	var (
		asked   = time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)
		expires = asked.Add(7 * 24 * time.Hour) // the new request's own expiry
		current = asked.Add(36 * time.Hour)     // the grant in effect ends in 1.5 days
		window  = &RenewWindow{Percent: 25, Min: 24 * time.Hour}
		terms   = &RenewalTerms{At: asked, Days: 7, MaxDays: 30}
		week    = 7 * 24 * time.Hour
	)
	request := func(renew *RenewWindow, t *RenewalTerms) SubmitRequest {
		return SubmitRequest{Step: StepCreateApprovalSubmitting, Binding: BindingApprovalSending, ExpiresAt: expires, Renew: renew, Terms: t}
	}
	row := func(st BindingStatus, expiresAt time.Time, expired bool) *SubmitRow {
		return &SubmitRow{Status: st, Owner: "old", ExpiresAt: expiresAt, Expired: expired}
	}
	inEffect := row(BindingValidated, current, false)
	// grant is a renewal's view of the access in effect: its operation
	// read (found, lasting d), and the window as the database clock saw it.
	grant := func(v SubmitView, found bool, d time.Duration, open bool) SubmitView {
		v.GrantFound, v.GrantDuration, v.WindowOpen = found, d, open
		return v
	}
	fresh := func(w SubmitWrite) SubmitPlan {
		return SubmitPlan{Write: w, Binding: BindingApprovalSending, Expiry: expires,
			History: StepMove{To: StepCreateApprovalSubmitting, ToBinding: BindingApprovalSending, Note: "submitted"}}
	}
	refused := func(code Code, reason Reason) SubmitPlan {
		return SubmitPlan{Write: SubmitRefuse, Code: code, Reason: reason}
	}
	renewed := func(expiry time.Time) SubmitPlan {
		return SubmitPlan{Write: SubmitRenew, Binding: BindingRenewing, Expiry: expiry, Renews: "old",
			History: StepMove{To: StepCreateApprovalSubmitting, FromBinding: BindingValidated, ToBinding: BindingRenewing,
				Note: "submitted: renewal of old"}}
	}
	inProgress := refused(CodeRequestInProgress, ReasonInProgress)

	for _, c := range []struct {
		name string
		view SubmitView
		want SubmitPlan
	}{
		{"no row: the first application inserts", SubmitView{Request: request(nil, nil)}, fresh(SubmitInsert)},
		{"no row, renewal allowed: still a first application", SubmitView{Request: request(window, terms)}, fresh(SubmitInsert)},

		{"REJECTED is reset in place", SubmitView{Request: request(nil, nil), Row: row(BindingRejected, time.Time{}, false)}, fresh(SubmitReset)},
		{"CLOSED is reset in place", SubmitView{Request: request(nil, nil), Row: row(BindingClosed, time.Time{}, false)}, fresh(SubmitReset)},
		{"REVOKED is reset in place, renewal allowed or not", SubmitView{Request: request(window, terms), Row: row(BindingRevoked, current, true)}, fresh(SubmitReset)},
		{"REJECTED with an expiry in the past is still re-appliable", SubmitView{Request: request(nil, nil), Row: row(BindingRejected, asked, true)}, fresh(SubmitReset)},

		{"VALIDATED past its expiry awaits its removal",
			SubmitView{Request: request(nil, nil), Row: row(BindingValidated, asked, true)},
			refused(CodeRequestInProgress, ReasonExpiredBeingRemoved)},
		{"VALIDATED past its expiry is no renewal either: its removal is due",
			SubmitView{Request: request(window, terms), Row: row(BindingValidated, asked, true)},
			refused(CodeRequestInProgress, ReasonExpiredBeingRemoved)},
		{"VALIDATED and not expired is already in effect",
			SubmitView{Request: request(nil, nil), Row: inEffect}, refused(CodeAlreadyInEffect, ReasonInEffect)},
		{"VALIDATED with no expiry is in effect for good",
			SubmitView{Request: request(nil, nil), Row: row(BindingValidated, time.Time{}, false)}, refused(CodeAlreadyInEffect, ReasonInEffect)},
		{"VALIDATED with no expiry never needs renewing",
			grant(SubmitView{Request: request(window, terms), Row: row(BindingValidated, time.Time{}, false)}, true, week, false),
			refused(CodeAlreadyInEffect, ReasonInEffect)},

		{"in effect, window open: renewed, the days left kept",
			grant(SubmitView{Request: request(window, terms), Row: inEffect}, true, week, true),
			renewed(current.Add(week))},
		{"in effect, window open, no terms: renewed with the request's own expiry",
			grant(SubmitView{Request: request(window, nil), Row: inEffect}, true, week, true),
			renewed(expires)},
		{"in effect, window open: the renewal's expiry is capped at the target's longest access",
			grant(SubmitView{Request: request(window, &RenewalTerms{At: asked, Days: 7, MaxDays: 3}), Row: inEffect}, true, week, true),
			renewed(asked.Add(3 * 24 * time.Hour))},
		{"in effect, window not yet open: already in effect",
			grant(SubmitView{Request: request(window, terms), Row: inEffect}, true, week, false),
			refused(CodeAlreadyInEffect, ReasonInEffect)},
		{"in effect, its grant's operation missing: nothing to renew",
			grant(SubmitView{Request: request(window, terms), Row: inEffect}, false, 0, true),
			refused(CodeAlreadyInEffect, ReasonInEffect)},
		{"in effect, no renewal asked for: already in effect whatever the window",
			grant(SubmitView{Request: request(nil, terms), Row: inEffect}, true, week, true),
			refused(CodeAlreadyInEffect, ReasonInEffect)},

		{"APPROVAL_SENDING is in progress", SubmitView{Request: request(window, terms), Row: row(BindingApprovalSending, expires, false)}, inProgress},
		{"APPROVAL_SENT is in progress", SubmitView{Request: request(nil, nil), Row: row(BindingApprovalSent, expires, false)}, inProgress},
		{"MR_CREATING is in progress", SubmitView{Request: request(nil, nil), Row: row(BindingMRCreating, expires, false)}, inProgress},
		{"MR_CREATED is in progress", SubmitView{Request: request(nil, nil), Row: row(BindingMRCreated, expires, false)}, inProgress},
		{"MERGING is in progress", SubmitView{Request: request(nil, nil), Row: row(BindingMerging, expires, false)}, inProgress},
		{"MERGED is in progress", SubmitView{Request: request(nil, nil), Row: row(BindingMerged, expires, false)}, inProgress},
		{"CREATE_FAILED awaits recovery", SubmitView{Request: request(nil, nil), Row: row(BindingCreateFailed, expires, false)}, inProgress},
		{"HANDLE_FAILED awaits recovery", SubmitView{Request: request(nil, nil), Row: row(BindingHandleFailed, expires, false)}, inProgress},
		{"REVOKING: its removal under way", SubmitView{Request: request(window, terms), Row: row(BindingRevoking, current, false)}, inProgress},
		{"REVOKING past its expiry: still in progress", SubmitView{Request: request(nil, nil), Row: row(BindingRevoking, asked, true)}, inProgress},
		{"REVOKE_FAILED awaits recovery", SubmitView{Request: request(nil, nil), Row: row(BindingRevokeFailed, current, false)}, inProgress},
		{"RENEWING: a renewal under way is not renewed again",
			grant(SubmitView{Request: request(window, terms), Row: row(BindingRenewing, current, false)}, true, week, true), inProgress},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Submit(c.view)
			if err != nil {
				t.Fatalf("Submit: %v", err)
			}
			if got != c.want {
				t.Fatalf("Submit:\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// TestSubmitRefusesEveryRowThatIsNotReappliable: without a renewal, every
// status but the re-appliable ones refuses, so a status added later is
// refused until Submit says otherwise.
func TestSubmitRefusesEveryRowThatIsNotReappliable(t *testing.T) {
	for _, st := range BindingStatuses {
		for _, expired := range []bool{false, true} {
			r := SubmitRow{Status: st, Owner: "old", Expired: expired}
			got, err := Submit(SubmitView{Request: SubmitRequest{Binding: BindingApprovalSending}, Row: &r})
			if err != nil {
				t.Fatalf("%s expired=%v: %v", st, expired, err)
			}
			want := SubmitRefuse
			if st.Reappliable() {
				want = SubmitReset
			}
			if got.Write != want {
				t.Errorf("%s expired=%v: %s, want %s", st, expired, got.Write, want)
			}
			code, reason := r.Refusal()
			if want == SubmitRefuse && (got.Code != code || got.Reason != reason) {
				t.Errorf("%s expired=%v: refused %s/%s, want %s/%s", st, expired, got.Code, got.Reason, code, reason)
			}
		}
	}
}

// TestSubmitReadsOnlyWhatItNeeds: the grant is read only for a renewal of
// an access in effect, and the database clock only when its window has a
// start.
func TestSubmitReadsOnlyWhatItNeeds(t *testing.T) {
	current := time.Date(2030, 5, 3, 0, 0, 0, 0, time.UTC)
	window := &RenewWindow{Percent: 25, Min: 24 * time.Hour}
	for _, c := range []struct {
		name                string
		view                SubmitView
		wantGrant, wantWait bool
		wantFrom            time.Time
	}{
		{"no row", SubmitView{Request: SubmitRequest{Renew: window}}, false, false, time.Time{}},
		{"no renewal asked for", SubmitView{Row: &SubmitRow{Status: BindingValidated, ExpiresAt: current}}, false, false, time.Time{}},
		{"expired access", SubmitView{Request: SubmitRequest{Renew: window}, Row: &SubmitRow{Status: BindingValidated, ExpiresAt: current, Expired: true}}, false, false, time.Time{}},
		{"in flight", SubmitView{Request: SubmitRequest{Renew: window}, Row: &SubmitRow{Status: BindingMerged, ExpiresAt: current}}, false, false, time.Time{}},
		{"in effect, grant not read yet", SubmitView{Request: SubmitRequest{Renew: window}, Row: &SubmitRow{Status: BindingValidated, ExpiresAt: current}}, true, false, time.Time{}},
		{"in effect, grant of 8 days: the last 2 days",
			SubmitView{Request: SubmitRequest{Renew: window}, Row: &SubmitRow{Status: BindingValidated, ExpiresAt: current}, GrantFound: true, GrantDuration: 8 * 24 * time.Hour},
			true, true, current.Add(-48 * time.Hour)},
		{"in effect for good: no window",
			SubmitView{Request: SubmitRequest{Renew: window}, Row: &SubmitRow{Status: BindingValidated}, GrantFound: true, GrantDuration: time.Hour},
			true, false, time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.view.NeedsGrant(); got != c.wantGrant {
				t.Errorf("NeedsGrant = %v, want %v", got, c.wantGrant)
			}
			if got := c.view.NeedsWindow(); got != c.wantWait {
				t.Errorf("NeedsWindow = %v, want %v", got, c.wantWait)
			}
			if got := c.view.RenewFrom(); !got.Equal(c.wantFrom) {
				t.Errorf("RenewFrom = %v, want %v", got, c.wantFrom)
			}
		})
	}
}
