package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// citationRE matches a citation of a design write-up that is not in the
// repository: a requirement ID, or a section or sentence of the
// original design. A reader cannot follow either, so a rule must be said
// in words or point at docs/…. The character classes keep this file from
// matching itself.
var citationRE = regexp.MustCompile(`\bR-[A-Z]{1,5}-[0-9]+|(?i)\bseed[ ][\x{00A7}0-9]|\bthe[ ]seed\b|\bseed['’][s]\b`)

// sectionRE matches a section sign with a number: a citation of some
// document's section (the MR lifecycle's section 3.2, written with the
// sign). Only a published standard may be cited so (standardRE, right
// before the sign, on the same line or at the end of the one before);
// the design's sections are not in the repository. The sign is written
// as an escape so that this file does not match itself.
var (
	sectionRE  = regexp.MustCompile(`\x{00A7}[ ]?[0-9]`)
	standardRE = regexp.MustCompile(`(\bRFC[ ][0-9]+|\bOIDC[ ]Core)[ ]*$`)
)

// wrappedSeedRE catches the same section citation broken over two lines
// of a comment: a line ending in the word, the next starting with a
// section number.
var (
	endsWithSeedRE  = regexp.MustCompile(`(?i)\bseed$`)
	startsSectionRE = regexp.MustCompile(`^[\s/#*-]*[\x{00A7}0-9]`)
)

// TestNoDesignCitations: no source or document of the repository cites
// requirement IDs or the design write-up they came from, naming each
// offending file:line.
func TestNoDesignCitations(t *testing.T) {
	root := filepath.Join("..")
	var found []string
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "dist", "testdata", "var", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if !slices.Contains([]string{".go", ".ts", ".tsx", ".md", ".yaml", ".sh", ".sql"}, filepath.Ext(path)) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		files++
		found = append(found, citations(path, src)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d files: the walk did not find the repository", files)
	}
	for _, f := range found {
		t.Error(f)
	}
}

// citations returns "file:line: text" for every citation in src.
func citations(path string, src []byte) []string {
	var out []string
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	for i, line := range lines {
		if !mayCite(line) {
			continue
		}
		hit := citationRE.MatchString(line)
		if !hit && i+1 < len(lines) && endsWithSeedRE.MatchString(strings.TrimSpace(line)) {
			hit = startsSectionRE.MatchString(lines[i+1])
		}
		if !hit {
			hit = uncitedSection(line, lines, i)
		}
		if hit {
			out = append(out, fmt.Sprintf("%s:%d: %s", filepath.ToSlash(path), i+1, strings.TrimSpace(line)))
		}
	}
	return out
}

// mayCite reports whether line could hold a citation at all: each of the
// patterns above needs "R-", a section sign or the word's "eed" (in any
// case: (?i) folds 'e' and 'd' only to their ASCII capitals). The
// regular expressions are most of the test's CPU under -race, and almost
// no line passes this byte search, so they run only where they can match.
func mayCite(line string) bool {
	if strings.Contains(line, "R-") || strings.Contains(line, "\u00a7") {
		return true
	}
	for i := 0; i+3 <= len(line); i++ {
		if line[i]|0x20 == 'e' && line[i+1]|0x20 == 'e' && line[i+2]|0x20 == 'd' {
			return true
		}
	}
	return false
}

// uncitedSection reports whether line i holds a section sign that no
// standard's name precedes.
func uncitedSection(line string, lines []string, i int) bool {
	for _, loc := range sectionRE.FindAllStringIndex(line, -1) {
		before := line[:loc[0]]
		if strings.TrimLeft(before, " \t/#*-") == "" && i > 0 {
			before = strings.TrimSpace(lines[i-1])
		}
		if !standardRE.MatchString(before) {
			return true
		}
	}
	return false
}

// TestCitationsFindsEachForm keeps the patterns honest: each form the
// check exists for is found, and the words that only look alike are not.
func TestCitationsFindsEachForm(t *testing.T) {
	for _, c := range []struct {
		text string
		want int
	}{
		{"// Rate limiting (R" + "-RL-1).", 1},
		{"// the chain's order (R" + "-X-1)", 1},
		{"// as in the " + "seed: blank", 1},
		{"// the se" + "ed's limitation", 1},
		{"// (seed " + "\u00a73.2)", 1},
		{"// (Seed " + "3.2)", 1},
		{"// (SEED " + "3.2) and sEeD" + "'s", 1},
		{"// (docs/webapp.md, seed\n// 3.8) against", 1},
		{"// the seeded world; maphash.Seed; seedAccess(w, p, seed, now)", 0},
		{"// RFC 9700 \u00a74.1.3; MariaDB 11.6.2; R-2D2", 0},
		{"// as the MR lifecycle \u00a73.4 says", 1},
		{"// (design \u00a7 2) and", 1},
		{"// compared exactly (RFC 9700\n// \u00a74.1.3: no patterns)", 0},
		{"// what OIDC Core \u00a73.1.3.7 asks; RFC 6749 \u00a75.2's shape", 0},
	} {
		if got := len(citations("x.go", []byte(c.text))); got != c.want {
			t.Errorf("%q: %d citations, want %d", c.text, got, c.want)
		}
	}
}
