package main

import (
	"context"
	"fmt"
	"io"
)

// runMigrate applies pending migrations and reports what it did. Safe to
// run while instances are serving and on several machines at once: the
// store serializes concurrent runs.
func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	flags, err := parseCommon("migrate", args, stderr)
	if err != nil {
		return err
	}
	env, err := setUp(ctx, flags, getenv, stderr)
	if err != nil {
		return err
	}
	defer env.close()
	applied, err := env.store.Migrate(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	cur, _, _, err := env.store.MigrationStatus(ctx)
	if err != nil {
		return fmt.Errorf("migration status: %w", err)
	}
	if len(applied) == 0 {
		fmt.Fprintf(stdout, "changeflow: schema is current at version %d\n", cur)
		return nil
	}
	fmt.Fprintf(stdout, "changeflow: applied %d migration(s) %v; schema at version %d\n", len(applied), applied, cur)
	return nil
}
