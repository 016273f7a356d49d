package flowtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// importPath is this package's import path.
const importPath = "changeflow/internal/workflow/flowtest"

// TestOnlyTestsImportFlowtest: no file of the product — a .go file that is
// not a _test.go file, outside this package — imports flowtest. Its fakes
// answer what a test scripted and record calls without bound; a binary
// that linked them could serve a fake's answer for the store's.
func TestOnlyTestsImportFlowtest(t *testing.T) {
	root := moduleRoot(t)
	got, err := productImporters(root, importPath, filepath.Join(root, "internal", "workflow", "flowtest"))
	require.NoError(t, err)
	require.Empty(t, got, "non-test files import %s; only tests may", importPath)
}

// TestProductImportersFindsEachForm: the check of TestOnlyTestsImportFlowtest
// reports a product file that imports the package, plainly, renamed or
// inside a group, and passes over a test file, one inside the package
// itself and one under testdata.
func TestProductImportersFindsEachForm(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		t.Helper()
		p := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(src), 0o600))
	}
	write("a/plain.go", "package a\n\nimport \""+importPath+"\"\n")
	write("a/renamed.go", "package a\n\nimport ft \""+importPath+"\"\n")
	write("b/grouped.go", "package b\n\nimport (\n\t\"fmt\"\n\t_ \""+importPath+"\"\n)\n")
	write("b/other.go", "package b\n\nimport \"fmt\"\n")
	write("a/plain_test.go", "package a\n\nimport \""+importPath+"\"\n")
	write("self/self.go", "package self\n\nimport \""+importPath+"\"\n")
	write("a/testdata/x.go", "package x\n\nimport \""+importPath+"\"\n")
	got, err := productImporters(root, importPath, filepath.Join(root, "self"))
	require.NoError(t, err)
	require.Equal(t, []string{"a/plain.go", "a/renamed.go", "b/grouped.go"}, got)
}

// productImporters lists, relative to root and in walk order, the .go
// files under root that are not tests, not under self, testdata or a
// directory the go tool ignores (".x", "_x", node_modules), and import
// path.
func productImporters(root, path, self string) ([]string, error) {
	var got []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p == self || (p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
				name == "testdata" || name == "node_modules")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			if v, _ := strconv.Unquote(im.Path.Value); v == path {
				rel, _ := filepath.Rel(root, p)
				got = append(got, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	return got, err
}

// moduleRoot is the directory of the go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test")
		dir = parent
	}
}
