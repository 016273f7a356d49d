package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"changeflow/internal/domain"
)

// BindingApplyParams is one application for a (subject, target)
// relationship by a new request.
type BindingApplyParams struct {
	Subject     string
	TargetKey   string
	OperationID string
	// Status is the first state of the new application, e.g.
	// APPROVAL_SENDING.
	Status domain.BindingStatus
	// ExpiresAt is when the new application lapses; zero stores NULL.
	ExpiresAt time.Time
	// Renew, when set, accepts the application as a renewal of the grant
	// in effect on the row while the renewal window is open (database
	// clock): the row moves VALIDATED → RENEWING and to the new
	// operationId, its expiry untouched (docs/flows/lifecycle.md, "Renewal").
	// nil refuses a binding in effect, as before renewals existed.
	Renew *domain.RenewWindow
	// RenewTerms, when set, give a renewal its expiry from the grant's
	// current one (domain.RenewalExpiry, from the row as read): the
	// binding history records the expiry the renewal will really bring,
	// not ExpiresAt.
	RenewTerms *domain.RenewalTerms

	// step is the request's first step, for the plan's history row
	// (OperationSubmit; 0 for a bare application).
	step domain.StepStatus

	// afterRead, when set, runs between an attempt's read and its write;
	// tests make a concurrent writer win the race with it.
	afterRead func()
}

func (p BindingApplyParams) validate() error {
	switch {
	case p.Subject == "" || p.TargetKey == "" || p.OperationID == "":
		return errors.New("subject, target and operationId are required")
	case !p.Status.Valid():
		return fmt.Errorf("unknown binding status %q", p.Status)
	}
	return nil
}

// request is the application as domain.Submit reads it.
func (p BindingApplyParams) request() domain.SubmitRequest {
	return domain.SubmitRequest{Step: p.step, Binding: p.Status, ExpiresAt: p.ExpiresAt, Renew: p.Renew, Terms: p.RenewTerms}
}

// history is the binding-history row of plan's application.
func (p BindingApplyParams) history(plan domain.SubmitPlan) BindingApplyParams {
	return BindingApplyParams{Subject: p.Subject, TargetKey: p.TargetKey, OperationID: p.OperationID, Status: plan.Binding, ExpiresAt: plan.Expiry}
}

// BindingApplyResult says how an application was recorded.
type BindingApplyResult struct {
	// Binding is the row after the application.
	Binding Binding
	// First is true when the relationship had no row and one was inserted.
	First bool
	// Previous is the row as read before an in-place reset: the exact
	// status and version the reset was pinned to. Zero when First.
	Previous Binding
	// Renews is the grant this application renews (the row's owner as
	// read); "" when it is not a renewal.
	Renews string
}

// BindingRefusedError is the answer to an application for a relationship
// whose row may not be overwritten (I5). It is an answer, not a failure:
// the API maps Code to 409 REQUEST_IN_PROGRESS or ALREADY_IN_EFFECT.
type BindingRefusedError struct {
	// Current is the row that refused, as read.
	Current Binding
}

// Error describes the refusal for the log.
func (e *BindingRefusedError) Error() string {
	b := e.Current
	if b.InEffect() {
		if b.ExpiresAt.IsZero() {
			return fmt.Sprintf("binding %s/%s is in effect with no expiry (operation %s)", b.Subject, b.TargetKey, b.OperationID)
		}
		return fmt.Sprintf("binding %s/%s is in effect until %s (operation %s)",
			b.Subject, b.TargetKey, b.ExpiresAt.UTC().Format(time.RFC3339), b.OperationID)
	}
	if b.ExpiredAwaitingRemoval() {
		return fmt.Sprintf("binding %s/%s expired at %s and awaits its removal (operation %s)",
			b.Subject, b.TargetKey, b.ExpiresAt.UTC().Format(time.RFC3339), b.OperationID)
	}
	return fmt.Sprintf("binding %s/%s is %s for operation %s and may not be overwritten",
		b.Subject, b.TargetKey, b.Status, b.OperationID)
}

// Code is the API's answer: ALREADY_IN_EFFECT for a VALIDATED binding that
// has not expired (the message gives Current.ExpiresAt), else
// REQUEST_IN_PROGRESS — the row is in flight, a failed row awaiting
// manual recovery, whose operationId must not be replaced, or an expired
// grant whose removal is due (Binding.Reappliable). domain.SubmitRow.Refusal
// decides it.
func (e *BindingRefusedError) Code() domain.Code {
	code, _ := e.Current.submitRow().Refusal()
	return code
}

// Reason is which refusal of its Code this is, the API's data.reason:
// in_effect, in_progress or expired_being_removed
// (domain.SubmitRow.Refusal).
func (e *BindingRefusedError) Reason() domain.Reason {
	_, reason := e.Current.submitRow().Refusal()
	return reason
}

// applyAttempts bounds how often an application re-reads and decides again
// after losing a race. Each loss means another request changed the row in
// between, which leaves it in flight, so the second attempt almost always
// answers with a refusal; three covers a reset racing a quick rejection.
const applyAttempts = 3

// applyRaceError marks an attempt that lost a race to a concurrent writer
// of the same relationship (a duplicate first insert, or a pinned reset
// that matched no row). The attempt's transaction rolls back and the
// application re-reads in a new one: on MariaDB a re-read inside the same
// REPEATABLE READ snapshot would still show the stale row.
type applyRaceError struct{ cause error }

func (e applyRaceError) Error() string { return "binding changed concurrently: " + e.cause.Error() }
func (e applyRaceError) Unwrap() error { return e.cause }

// BindingApply records a new request's application for a relationship
// (I5):
//   - no row: insert one (version 1);
//   - a re-appliable row (Binding.Reappliable; not an expired VALIDATED
//     one, whose removal is due): reset it in place — new
//     operationId, status and expiry, version+1 — with the UPDATE pinned to
//     the exact status and version that were read (BindingResetIfVersion);
//   - any other row: refuse with *BindingRefusedError, nothing written.
//
// Every application is appended to binding_history in the same
// transaction. Losing a race is an answer, not an error: a duplicate key
// on the insert (a concurrent first application) or a pinned reset that
// matched no row re-reads and decides again, so the caller gets the
// refusal the winner's row now calls for. Only after applyAttempts lost
// races does it return an error wrapping domain.ErrPreempted.
func (s *Store) BindingApply(ctx context.Context, p BindingApplyParams) (BindingApplyResult, error) {
	if err := p.validate(); err != nil {
		return BindingApplyResult{}, fmt.Errorf("apply binding: %w", err)
	}
	var res BindingApplyResult
	err := s.retryApply(ctx, func(tx *sql.Tx) error {
		var err error
		res, _, err = bindingApplyTx(ctx, tx, s.dialect, p)
		return err
	})
	if err != nil {
		return BindingApplyResult{}, fmt.Errorf("apply binding %s/%s for %s: %w", p.Subject, p.TargetKey, p.OperationID, err)
	}
	return res, nil
}

// retryApply runs fn in a transaction, again in a fresh one while it
// returns an applyRaceError, at most applyAttempts times.
func (s *Store) retryApply(ctx context.Context, fn func(tx *sql.Tx) error) error {
	var err error
	for range applyAttempts {
		err = s.InTx(ctx, nil, fn)
		var race applyRaceError
		if !errors.As(err, &race) {
			return err
		}
	}
	return fmt.Errorf("gave up after %d attempts: %w", applyAttempts, err)
}

// bindingApplyTx is one attempt of BindingApply inside tx: it loads what
// the decision needs (submitLoad), lets domain.Submit decide, and applies
// the plan with its guards — the unique key on insert, the reset and the
// renewal pinned to the status and version read. It returns the plan too,
// for OperationSubmit's writes to the operation.
//
// The read is a plain (non-locking) one: correctness comes
// from the unique key on insert and from the pinned UPDATE on reset, not
// from holding a lock between the read and the write.
func bindingApplyTx(ctx context.Context, tx *sql.Tx, d Dialect, p BindingApplyParams) (BindingApplyResult, domain.SubmitPlan, error) {
	cur, v, err := submitLoad(ctx, tx, d, p)
	if err != nil {
		return BindingApplyResult{}, domain.SubmitPlan{}, err
	}
	plan, err := domain.Submit(v)
	if err != nil {
		return BindingApplyResult{}, domain.SubmitPlan{}, err
	}
	var res BindingApplyResult
	switch plan.Write {
	case domain.SubmitInsert:
		res, err = bindingInsertTx(ctx, tx, d, p, plan)
	case domain.SubmitRenew:
		res, err = bindingRenewTx(ctx, tx, d, p, cur, plan)
	case domain.SubmitReset:
		res, err = bindingReapplyTx(ctx, tx, d, p, cur, plan)
	default:
		return BindingApplyResult{}, domain.SubmitPlan{}, &BindingRefusedError{Current: cur}
	}
	if err != nil {
		return BindingApplyResult{}, domain.SubmitPlan{}, err
	}
	return res, plan, nil
}

// submitLoad reads the relationship's row and, only for a renewal of the
// access in effect, the grant's operation (its window is a share of the
// grant's duration) and whether the window has opened by the database
// clock: the view domain.Submit decides from, and the row as read (zero
// when there is none).
func submitLoad(ctx context.Context, tx *sql.Tx, d Dialect, p BindingApplyParams) (Binding, domain.SubmitView, error) {
	v := domain.SubmitView{Request: p.request()}
	cur, err := bindingGet(ctx, tx, d, p.Subject, p.TargetKey, "")
	if p.afterRead != nil {
		p.afterRead()
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Binding{}, v, nil
	case err != nil:
		return Binding{}, domain.SubmitView{}, fmt.Errorf("read binding: %w", translate(err))
	}
	row := cur.submitRow()
	v.Row = &row
	if v.NeedsGrant() {
		grant, err := operationGet(ctx, tx, cur.OperationID)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			// A row without its operation (written by hand): nothing to renew.
		case err != nil:
			return Binding{}, domain.SubmitView{}, fmt.Errorf("read the grant in effect: %w", translate(err))
		default:
			v.GrantFound, v.GrantDuration = true, grant.Duration()
		}
	}
	if v.NeedsWindow() {
		if v.WindowOpen, err = clockPassed(ctx, tx, d, v.RenewFrom()); err != nil {
			return Binding{}, domain.SubmitView{}, fmt.Errorf("renewal window: %w", err)
		}
	}
	return cur, v, nil
}

// submitRow is b as domain.Submit reads it.
func (b Binding) submitRow() domain.SubmitRow {
	return domain.SubmitRow{Status: b.Status, Owner: b.OperationID, ExpiresAt: b.ExpiresAt, Expired: b.Expired}
}

// clockPassed reports whether t has come by the database clock: the
// comparison is the database's, like every other time test of a decision
// (docs/storage.md, the database clock).
func clockPassed(ctx context.Context, tx *sql.Tx, d Dialect, t time.Time) (bool, error) {
	var open int
	if err := tx.QueryRowContext(ctx, "SELECT CASE WHEN ? <= "+d.Now()+" THEN 1 ELSE 0 END", d.Time(t)).Scan(&open); err != nil {
		return false, translate(err)
	}
	return open == 1, nil
}

// bindingInsertTx applies a first application: the row inserted (version
// 1) and its history. A duplicate key is a concurrent first application
// that won: a lost race, decided again in a new transaction.
func bindingInsertTx(ctx context.Context, tx *sql.Tx, d Dialect, p BindingApplyParams, plan domain.SubmitPlan) (BindingApplyResult, error) {
	_, err := tx.ExecContext(ctx,
		"INSERT INTO binding (subject_id, target_key, status, operation_id, expires_at) VALUES (?, ?, ?, ?, ?)",
		p.Subject, p.TargetKey, string(plan.Binding), p.OperationID, d.Time(plan.Expiry))
	if err != nil {
		err = translate(err)
		if errors.Is(err, domain.ErrDuplicate) {
			return BindingApplyResult{}, applyRaceError{cause: err}
		}
		return BindingApplyResult{}, fmt.Errorf("insert binding: %w", err)
	}
	if err := bindingHistoryInsert(ctx, tx, d, p.history(plan)); err != nil {
		return BindingApplyResult{}, err
	}
	b, err := bindingGet(ctx, tx, d, p.Subject, p.TargetKey, "")
	if err != nil {
		return BindingApplyResult{}, fmt.Errorf("re-read binding: %w", translate(err))
	}
	return BindingApplyResult{Binding: b, First: true}, nil
}

// bindingReapplyTx applies the reset of the re-appliable row cur, pinned
// to the status and version read (bindingResetTx); a miss is a lost race.
func bindingReapplyTx(ctx context.Context, tx *sql.Tx, d Dialect, p BindingApplyParams, cur Binding, plan domain.SubmitPlan) (BindingApplyResult, error) {
	b, err := bindingResetTx(ctx, tx, d, BindingResetParams{
		Subject: p.Subject, TargetKey: p.TargetKey,
		FromStatus: cur.Status, FromVersion: cur.Version,
		OperationID: p.OperationID, Status: plan.Binding, ExpiresAt: plan.Expiry,
	})
	if errors.Is(err, domain.ErrPreempted) {
		return BindingApplyResult{}, applyRaceError{cause: err}
	}
	if err != nil {
		return BindingApplyResult{}, err
	}
	return BindingApplyResult{Binding: b, Previous: cur}, nil
}

// bindingRenewTx applies the renewal of the grant in effect on cur:
// VALIDATED → RENEWING, the row handed to p's operationId, the expiry
// left as it is (the grant's, until the renewal is deployed); the history
// records the renewal's own expiry (plan.Expiry). Pinned to the status
// and version read and to the expiry still ahead (database clock): a
// grant that expired in between is refused on the re-read, as any expired
// grant is.
func bindingRenewTx(ctx context.Context, tx *sql.Tx, d Dialect, p BindingApplyParams, cur Binding, plan domain.SubmitPlan) (BindingApplyResult, error) {
	err := execOne(ctx, tx,
		"UPDATE binding "+d.PrimaryKeyHint()+" SET status = ?, operation_id = ?, version = version + 1"+
			" WHERE id = ? AND status = ? AND version = ? AND expires_at > "+d.Now(),
		string(plan.Binding), p.OperationID, cur.ID, string(domain.BindingValidated), cur.Version)
	if errors.Is(err, domain.ErrPreempted) {
		return BindingApplyResult{}, applyRaceError{cause: err}
	}
	if err != nil {
		return BindingApplyResult{}, fmt.Errorf("renew binding: %w", err)
	}
	if err := bindingHistoryInsert(ctx, tx, d, p.history(plan)); err != nil {
		return BindingApplyResult{}, err
	}
	b, err := bindingGet(ctx, tx, d, p.Subject, p.TargetKey, "")
	if err != nil {
		return BindingApplyResult{}, fmt.Errorf("re-read binding: %w", translate(err))
	}
	return BindingApplyResult{Binding: b, Previous: cur, Renews: plan.Renews}, nil
}

// BindingResetParams is an in-place reset of a re-appliable binding for a
// new request, pinned to the status and version the caller read.
type BindingResetParams struct {
	Subject     string
	TargetKey   string
	FromStatus  domain.BindingStatus
	FromVersion int64
	OperationID string
	Status      domain.BindingStatus
	ExpiresAt   time.Time
}

// BindingResetIfVersion resets the binding of (Subject, TargetKey) in place
// for a new request — new operationId, status and expiry, version+1 — and
// appends the application to binding_history, in one transaction.
//
// The UPDATE is pinned to the exact FromStatus and FromVersion that were
// read, not to "any re-appliable status": a change in between — even one
// that left and came back to the same status (ABA) — bumps the version and
// fails the guard. The WHERE clause also re-checks re-appliability itself
// (domain.BindingStatus.Reappliable), so a row can only be reset from a
// re-appliable state whatever the caller passes. A miss returns an error
// wrapping domain.ErrPreempted.
func (s *Store) BindingResetIfVersion(ctx context.Context, p BindingResetParams) (Binding, error) {
	if !p.FromStatus.Reappliable() {
		return Binding{}, fmt.Errorf("reset binding %s/%s: status %s is never re-appliable", p.Subject, p.TargetKey, p.FromStatus)
	}
	if err := (BindingApplyParams{Subject: p.Subject, TargetKey: p.TargetKey, OperationID: p.OperationID, Status: p.Status}).validate(); err != nil {
		return Binding{}, fmt.Errorf("reset binding: %w", err)
	}
	var b Binding
	err := s.InTx(ctx, nil, func(tx *sql.Tx) error {
		var err error
		b, err = bindingResetTx(ctx, tx, s.dialect, p)
		return err
	})
	if err != nil {
		return Binding{}, fmt.Errorf("reset binding %s/%s from %s@v%d: %w", p.Subject, p.TargetKey, p.FromStatus, p.FromVersion, err)
	}
	return b, nil
}

// bindingResetTx is BindingResetIfVersion inside tx.
func bindingResetTx(ctx context.Context, tx *sql.Tx, d Dialect, p BindingResetParams) (Binding, error) {
	// Pinned to the unique key: with a status condition in the WHERE,
	// MariaDB may plan this on idx_binding_status_updated instead and
	// next-key-lock every row in the old status, so unrelated applications
	// deadlock (seen in the race test: 1,226 deadlocks in 1.5 s without it).
	q := "UPDATE binding" + d.forceIndex("uk_binding_subject_target") +
		" SET operation_id = ?, status = ?, expires_at = ?, version = version + 1 " +
		"WHERE subject_id = ? AND target_key = ? AND status = ? AND version = ? AND status IN (" +
		placeholders(len(reappliableStatuses())) + ")"
	vals := []any{p.OperationID, string(p.Status), d.Time(p.ExpiresAt),
		p.Subject, p.TargetKey, string(p.FromStatus), p.FromVersion}
	for _, st := range reappliableStatuses() {
		vals = append(vals, string(st))
	}
	if err := execOne(ctx, tx, q, vals...); err != nil {
		return Binding{}, fmt.Errorf("reset binding: %w", err)
	}
	if err := bindingHistoryInsert(ctx, tx, d, BindingApplyParams{
		Subject: p.Subject, TargetKey: p.TargetKey, OperationID: p.OperationID, Status: p.Status, ExpiresAt: p.ExpiresAt,
	}); err != nil {
		return Binding{}, err
	}
	b, err := bindingGet(ctx, tx, d, p.Subject, p.TargetKey, "")
	if err != nil {
		return Binding{}, fmt.Errorf("re-read binding: %w", translate(err))
	}
	return b, nil
}

// reappliableStatuses lists the statuses domain.BindingStatus.Reappliable
// accepts, derived from the one definition rather than repeated here.
func reappliableStatuses() []domain.BindingStatus {
	var out []domain.BindingStatus
	for _, st := range domain.BindingStatuses {
		if st.Reappliable() {
			out = append(out, st)
		}
	}
	return out
}

// bindingHistoryInsert appends one application to binding_history.
func bindingHistoryInsert(ctx context.Context, tx *sql.Tx, d Dialect, p BindingApplyParams) error {
	_, err := tx.ExecContext(ctx,
		"INSERT INTO binding_history (subject_id, target_key, operation_id, status, expires_at) VALUES (?, ?, ?, ?, ?)",
		p.Subject, p.TargetKey, p.OperationID, string(p.Status), d.Time(p.ExpiresAt))
	if err != nil {
		return fmt.Errorf("append binding history: %w", translate(err))
	}
	return nil
}

// execOne runs a guarded write that must affect exactly one row; any other
// count is domain.ErrPreempted (I6). MariaDB's 1020 (snapshot isolation saw
// a concurrent change) arrives translated to the same sentinel.
func execOne(ctx context.Context, q queryer, query string, args ...any) error {
	return execN(ctx, q, 1, query, args...)
}

// execN runs a guarded write that must affect exactly want rows.
func execN(ctx context.Context, q queryer, want int64, query string, args ...any) error {
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return translate(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("rows affected: %w", err)
	}
	if n != want {
		return fmt.Errorf("guarded write matched %d of %d rows: %w", n, want, domain.ErrPreempted)
	}
	return nil
}
