package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"changeflow/internal/domain"
)

// RepoCursor is how far the periodic reader of a binding file's history
// has applied it (access_repo_cursor): the last commit and its committed
// date. The zero cursor is a file never read.
type RepoCursor struct {
	SHA string
	At  time.Time
}

// RepoAccessWrite is one change a commit makes to a repo period
// (domain.RepoAccessChanges): Opens starts the subject's period at At
// with MergeSHA = SHA; otherwise its open period ends at At with
// end_sha = SHA.
type RepoAccessWrite struct {
	Subject     string
	OperationID string
	Opens       bool
	SHA         string
	At          time.Time
}

// AccessRepoCursor reads the cursor of target's file (zero when never
// read).
func (s *Store) AccessRepoCursor(ctx context.Context, target, file string) (RepoCursor, error) {
	var (
		c  RepoCursor
		at dbTime
	)
	err := s.db.QueryRowContext(ctx, "SELECT last_sha, last_at FROM access_repo_cursor WHERE target_key = ? AND file_path = ?",
		target, file).Scan(&c.SHA, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return RepoCursor{}, nil
	}
	if err != nil {
		return RepoCursor{}, fmt.Errorf("read the history cursor of %s: %w", target, translate(err))
	}
	c.At = at.t
	return c, nil
}

// AccessRepoApply applies what the commits after from up to to did to
// target's repo periods (writes, in commit order) and moves the cursor
// from from to to, in one transaction. The cursor move is the guard: an
// UPDATE … WHERE last_sha = from.SHA (for a file never read, an INSERT
// of the row), so of two instances that read the same commits exactly
// one applies them; the other gets an error wrapping
// domain.ErrPreempted and nothing of its writes stays.
//
// The periods themselves are written leniently (and the ending of an
// entry whose review removal is under way is left to its confirmation,
// applyRepoWrite): an opening while the
// subject's repo period is open, or an ending with none open, changes
// nothing (the file may have been edited while the reader was off, or a
// first read start in the middle of an entry's life). An end earlier
// than its start (committed dates on the first-parent line are the
// committers' clocks) is clamped to the start.
func (s *Store) AccessRepoApply(ctx context.Context, target, file string, from, to RepoCursor, writes []RepoAccessWrite) error {
	d := s.dialect
	return s.InTx(ctx, nil, func(tx *sql.Tx) error {
		if err := moveRepoCursor(ctx, tx, d, target, file, from, to); err != nil {
			return err
		}
		for _, w := range writes {
			if err := applyRepoWrite(ctx, tx, d, target, w); err != nil {
				return fmt.Errorf("access history of %s at %s: %w", target, w.SHA, err)
			}
		}
		return nil
	})
}

// moveRepoCursor is AccessRepoApply's guard.
func moveRepoCursor(ctx context.Context, tx *sql.Tx, d Dialect, target, file string, from, to RepoCursor) error {
	if from.SHA == "" {
		ok, err := insertOnce(ctx, tx, "INSERT INTO access_repo_cursor (target_key, file_path, last_sha, last_at) VALUES (?, ?, ?, ?)",
			target, file, to.SHA, d.Time(to.At))
		if err != nil {
			return fmt.Errorf("start the history cursor of %s: %w", target, err)
		}
		if !ok {
			return fmt.Errorf("start the history cursor of %s: another reader started it: %w", target, domain.ErrPreempted)
		}
		return nil
	}
	if err := execN(ctx, tx, 1, "UPDATE access_repo_cursor SET last_sha = ?, last_at = ?, updated_at = "+d.Now()+
		" WHERE target_key = ? AND file_path = ? AND last_sha = ?", to.SHA, d.Time(to.At), target, file, from.SHA); err != nil {
		return fmt.Errorf("move the history cursor of %s: %w", target, err)
	}
	return nil
}

// applyRepoWrite opens or ends one repo period.
func applyRepoWrite(ctx context.Context, tx *sql.Tx, d Dialect, target string, w RepoAccessWrite) error {
	at := d.Time(w.At)
	if w.Opens {
		var op any
		if w.OperationID != "" {
			op = w.OperationID
		}
		if _, err := insertOnce(ctx, tx, "INSERT INTO access_interval (subject, target_key, from_at, source, operation_id, merge_sha) VALUES (?, ?, ?, ?, ?, ?)",
			w.Subject, target, at, AccessSourceRepo, op, w.SHA); err != nil {
			return fmt.Errorf("open the repo period of %s: %w", w.Subject, err)
		}
		return nil
	}
	// A removal of the entry that changeflow carries out for an access
	// review (operation.review_item_id) ends the period itself, at its
	// confirmation (accessEndOpen): while it is REVOKING the reader leaves
	// the period open, so the history does not end the access at the
	// merge, before it was in effect.
	if _, err := tx.ExecContext(ctx, "UPDATE access_interval SET until_at = CASE WHEN from_at > ? THEN from_at ELSE ? END, end_sha = ?"+
		" WHERE target_key = ? AND subject = ? AND source = ? AND open_slot = 1"+
		" AND NOT EXISTS (SELECT 1 FROM binding b JOIN operation o ON o.operation_id = b.operation_id"+
		" WHERE b.subject_id = ? AND b.target_key = ? AND b.status = ? AND o.review_item_id IS NOT NULL)",
		at, at, w.SHA, target, w.Subject, AccessSourceRepo, w.Subject, target, string(domain.BindingRevoking)); err != nil {
		return fmt.Errorf("end the repo period of %s: %w", w.Subject, translate(err))
	}
	return nil
}
