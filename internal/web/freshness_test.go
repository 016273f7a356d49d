package web

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// webSources is the app's source directory, relative to this package.
const webSources = "../../web"

// sourceHash is web/scripts/source-hash.mjs's fingerprint, in Go: the
// files the build reads, sorted by their path relative to web/, hashed as
// lines "<path> <sha256 of the content>\n".
func sourceHash(t *testing.T) string {
	t.Helper()
	var files []string
	for _, f := range []string{"index.html", "package.json", "package-lock.json", "tsconfig.json", "vite.config.ts"} {
		if _, err := os.Stat(filepath.Join(webSources, f)); err == nil {
			files = append(files, f)
		}
	}
	for _, tree := range []string{"src", "public"} {
		root := filepath.Join(webSources, tree)
		if _, err := os.Stat(root); err != nil {
			continue
		}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(webSources, p)
			files = append(files, filepath.ToSlash(rel))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(webSources, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		fmt.Fprintf(h, "%s %s\n", f, hex.EncodeToString(sum[:]))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestCommittedBuildMatchesSources fails when web/ changed but the
// committed build in dist/ was not rebuilt: the binary would ship an app
// that is not the one in the sources. Go alone checks it, so CI needs no
// Node for this.
func TestCommittedBuildMatchesSources(t *testing.T) {
	if _, err := os.Stat(filepath.Join(webSources, "package.json")); err != nil {
		t.Skip("web/ sources are not next to this package")
	}
	stamp, err := os.ReadFile("dist.sha256")
	if err != nil {
		t.Fatalf("no dist.sha256: run `npm run build --prefix web` and commit internal/web: %v", err)
	}
	if got, want := sourceHash(t), strings.TrimSpace(string(stamp)); got != want {
		t.Fatalf("internal/web/dist was built from other sources than web/ has now (%s, built from %s):\n"+
			"run `npm run build --prefix web` and commit internal/web/dist and internal/web/dist.sha256", got, want)
	}
}
