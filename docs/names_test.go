package docs

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocumentsNameOnlyWhatExists: every backticked name in the
// repository's Markdown that reads as a code identifier (`Store.InTx`,
// `retryConflict`, `lifecycle.Revoker.Revoke`) names something the code still
// has. A rename that leaves the prose behind fails here, instead of
// sending the next reader after a function that is gone.
//
// "Has" is lenient on purpose, since prose names more than Go: each
// dotted part must be an identifier or a word in a string literal of the
// Go code (not a comment — a name kept alive only by a comment is gone),
// or a word of the web app, the scripts, the SQL or the configuration
// files; a benchmark or test is named without its Benchmark/Test prefix,
// as benchstat prints it. Names are recognised by their shape: camelCase
// or MixedCase parts (`approveFirst`, `BatchApply`); plain words, codes
// in capitals and file names are prose.
func TestDocumentsNameOnlyWhatExists(t *testing.T) {
	root := filepath.Join("..")
	known := map[string]bool{}
	var docs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			switch name {
			case ".git", "node_modules", "dist", "testdata", "var", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		switch ext := filepath.Ext(name); {
		case ext == ".md":
			docs = append(docs, path)
		case ext == ".go":
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			goWords(src, known)
		case slices.Contains([]string{".ts", ".tsx", ".js", ".mjs", ".sql", ".sh", ".yaml", ".yml", ".json", ".html", ".css", ".service"}, ext),
			name == "Makefile", name == "Containerfile":
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			eachWord(string(src), func(w string) { known[w] = true })
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 5 || len(known) < 1000 {
		t.Fatalf("read %d documents and %d names: the walk did not find the repository", len(docs), len(known))
	}
	exists := func(part string) bool {
		return known[part] || known["Benchmark"+part] || known["Test"+part] || libraryNames[part] != ""
	}
	checked := 0
	for _, path := range docs {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			for _, m := range tickRE.FindAllStringSubmatch(line, -1) {
				name := strings.TrimSuffix(m[1], "()")
				if !pathRE.MatchString(name) {
					continue
				}
				parts := strings.Split(name, ".")
				if !slices.ContainsFunc(parts, isCodeName) {
					continue
				}
				checked++
				for _, p := range parts {
					if !exists(p) {
						t.Errorf("%s:%d: `%s` names %q, which the code does not have", path, i+1, m[1], p)
					}
				}
			}
		}
	}
	t.Logf("%d names in %d documents checked against %d in the code", checked, len(docs), len(known))
}

// libraryNames are names of the libraries changeflow uses that the docs
// explain (each with where it lives): the code does not spell them.
var libraryNames = map[string]string{
	"interpolateParams": "go-sql-driver/mysql's DSN parameter (the code sets Config.InterpolateParams)",
	"retryHTTPCheck":    "gitlab.com/gitlab-org/api/client-go, gitlab.go",
	"SessionLocker":     "pressly/goose's Provider option",
	"HasPending":        "pressly/goose's Provider method",
	"newRows":           "modernc.org/sqlite, rows.go",
}

var (
	tickRE = regexp.MustCompile("`([^`]+)`")
	pathRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	// wordRE is what eachWord finds, kept as the definition its test
	// compares against.
	wordRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	// camelRE: a lower-case letter followed by a capital (approveFirst,
	// BatchApply), the shape of a code name and not of a word.
	camelRE = regexp.MustCompile(`[a-z0-9][A-Z]`)
)

func isCodeName(part string) bool { return camelRE.MatchString(part) }

// goWords adds src's identifiers and the words of its string literals to
// known; comments are skipped.
func goWords(src []byte, known map[string]bool) {
	var s scanner.Scanner
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	s.Init(file, src, nil, 0) // mode 0: comments are not returned
	for {
		_, tok, lit := s.Scan()
		switch tok {
		case token.EOF:
			return
		case token.IDENT:
			known[lit] = true
		case token.STRING:
			eachWord(lit, func(w string) { known[w] = true })
		}
	}
}

// eachWord calls fn with every match of wordRE in s, in order: a letter
// or underscore, then letters, digits and underscores. The regular
// expression over every file of the repository was most of this
// package's CPU under -race; a byte loop finds the same words.
func eachWord(s string, fn func(string)) {
	for i := 0; i < len(s); {
		if !isWordStart(s[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(s) && (isWordStart(s[j]) || '0' <= s[j] && s[j] <= '9') {
			j++
		}
		fn(s[i:j])
		i = j
	}
}

func isWordStart(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
}

// TestEachWordFindsWhatWordREFinds: the byte loop and the regular
// expression it replaces agree, digits, underscores, non-ASCII letters
// and invalid UTF-8 included.
func TestEachWordFindsWhatWordREFinds(t *testing.T) {
	for _, s := range []string{
		"", "x", "9", "_", "_9 9_ a9b 99ab", "BatchApply(ctx, p)", "héllo wörld ß",
		"a\xffb\xc3", "camelCase.snake_case-kebab/path:1", "`store.BatchApply` \u00a73.2 R-2D2",
	} {
		var got []string
		eachWord(s, func(w string) { got = append(got, w) })
		if want := wordRE.FindAllString(s, -1); !slices.Equal(got, want) {
			t.Errorf("%q: eachWord found %q, wordRE %q", s, got, want)
		}
	}
}
