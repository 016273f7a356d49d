package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeMapsEveryPackageAndDocument: the README is the way in, so its
// map of the code names every package under internal/ and its list of
// documentation links every page in docs/ and docs/flows/. A package or a page added
// without its line fails here, instead of staying invisible to the next
// reader.
func TestReadmeMapsEveryPackageAndDocument(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	mapStart := strings.Index(text, "## Map of the code")
	docsStart := strings.Index(text, "## Documentation")
	if mapStart < 0 || docsStart < 0 {
		t.Fatal(`the README has no "## Map of the code" or no "## Documentation" section`)
	}
	codeMap, docList := section(text[mapStart:]), section(text[docsStart:])

	pkgs, err := os.ReadDir(filepath.Join("..", "internal"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		if p.IsDir() && !strings.Contains(codeMap, "`internal/"+p.Name()+"/`") {
			t.Errorf("the README's map of the code does not name `internal/%s/`", p.Name())
		}
	}
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	// A flow's page is a page of its own, so it is listed like the others.
	flows, err := filepath.Glob(filepath.Join("flows", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 5 {
		t.Fatalf("found %d pages in docs/: not the docs directory", len(pages))
	}
	if len(flows) == 0 {
		t.Fatal("found no page in docs/flows/: the flows moved or the walk is wrong")
	}
	for _, p := range append(pages, flows...) {
		p = filepath.ToSlash(p)
		if !strings.Contains(docList, "(docs/"+p+")") {
			t.Errorf("the README's documentation list does not link docs/%s", p)
		}
	}
}

// section is s up to its next level-2 heading.
func section(s string) string {
	if i := strings.Index(s[1:], "\n## "); i >= 0 {
		return s[:i+1]
	}
	return s
}
