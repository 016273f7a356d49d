package main

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// localDir is where the local run keeps its database and files (README.md, "The local run").
const localDir = "var"

//go:embed local/changeflow.yaml local/directory.yaml
var localFiles embed.FS

// prepareLocal writes the local profile's configuration and identity
// directory into dir on first use and returns the configuration file's
// path. Existing files are left alone: they are the user's to edit, and
// the running service picks up their edits through hot reload.
func prepareLocal(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, name := range []string{"changeflow.yaml", "directory.yaml"} {
		dst := filepath.Join(dir, name)
		if _, err := os.Stat(dst); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		b, err := localFiles.ReadFile("local/" + name)
		if err != nil {
			return "", fmt.Errorf("embedded %s: %w", name, err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, "changeflow.yaml"), nil
}
