package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestDocumentedGoNamesExist: every backticked name in docs/ and the
// README that reads as a Go identifier resolves to a declaration of the
// module, so a rename or a removal that leaves the prose behind fails here.
// TestDocumentsNameOnlyWhatExists is the lenient check (each part is some
// word of the code); this one is precise: a part after a qualifier must be
// declared where the qualifier says.
//
// The rule, applied to the text between two backticks outside fenced
// blocks:
//
//   - The token is at most three dot-separated identifiers, optionally
//     ending in "()" (a call) or "*" (a prefix: `TestBatchClaim*`).
//     Anything else — paths, flags, SQL, metric names with labels,
//     `a/b`, `x = y` — is not a name.
//   - It is skipped when a part is in capitals (`REJECTED`,
//     `CHANGEFLOW_TEST_MYSQL_DSN`, `HTTP`: status words and variables);
//     when every part starts in lower case and it is not a call
//     (`batch.maxSize`, `approval.verifyDecisions`: configuration keys,
//     JSON fields, words); and when it is one plain word without a hump
//     and not a call (`Host`, `None`, `Containerfile`).
//   - A bare name (`BatchApply`, `retryConflict()`) must be declared by
//     the module — a package, type, function, method, field, constant,
//     variable, or a struct tag's json/yaml name — or be a selector the
//     code uses (a library's method the code calls: `LogAttrs`), a word
//     of the web app's TypeScript, deploy/, the Containerfile or
//     docs/openapi.yaml (browser APIs, unit directives, API schema
//     names), or one of libraryNames. A test or benchmark may be named
//     without its Test/Benchmark prefix, as benchstat prints it (not
//     with a "*").
//   - `p.X` with p a package of the module: X is declared in a package
//     of that name (at top level, or as a method or field of one of its
//     types, since prose writes `store.BatchApply` for the method).
//     `T.X` with T a type of the module: X is a field or method of T or of
//     a type T embeds. `p.T.X`: T in p, then X in T.
//   - A qualifier the module imports (`sql.Rows`, `slog.Logger`) names a
//     library: not checked. Any other qualifier (a field, a variable, a
//     library's type: `Current.ExpiresAt`, `Row.Scan`) needs its last
//     part declared by the module or used by its code as a selector.
func TestDocumentedGoNamesExist(t *testing.T) {
	decl, err := moduleNames()
	if err != nil {
		t.Fatal(err)
	}
	if len(decl.pkgs) < 20 || len(decl.any) < 2000 {
		t.Fatalf("found %d packages and %d names: the walk did not find the module", len(decl.pkgs), len(decl.any))
	}
	docs, err := markdownFiles(filepath.Join(".."))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, path := range docs {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range goNamesIn(string(src)) {
			checked++
			if why := decl.resolve(n.name); why != "" {
				t.Errorf("%s:%d: `%s`: %s", filepath.ToSlash(path), n.line, n.name, why)
			}
		}
	}
	if checked < 500 {
		t.Fatalf("checked %d names: the documents or the rule changed shape", checked)
	}
	t.Logf("%d Go names in %d documents resolved against %d declarations", checked, len(docs), len(decl.any))
}

// TestGoNamesRuleFindsEachForm keeps the rule honest: names that are gone
// fail, names that exist pass, and what only looks like a name is not
// checked.
func TestGoNamesRuleFindsEachForm(t *testing.T) {
	decl, err := moduleNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text  string
		names int
		bad   int
	}{
		{"`store.NoSuchOperation` and `Engine.RunNow`", 2, 2},
		{"`retryDeadlock()` and `BatchSettle*`", 2, 2},
		{"`store.BatchApply`, `domain.CheckStep()`, `Flow.Store`, `TestDocumentedGoNamesExist`", 4, 0},
		{"`lifecycle.Revoker.Revoke`, `BatchClaim*`, `DocumentedGoNamesExist`, `operationId`", 3, 0},
		{"`sql.Rows`, `slog.Logger`, `Current.ExpiresAt`", 3, 0},
		{"`batch.maxSize`, `REJECTED`, `CHANGEFLOW_TEST_MYSQL_DSN`, `docs/flows/batch.md`, `--local`, `Host`", 0, 0},
		{"```\n`store.NoSuchOperation`\n```", 0, 0},
	} {
		names := goNamesIn(c.text)
		bad := 0
		for _, n := range names {
			if decl.resolve(n.name) != "" {
				bad++
			}
		}
		if len(names) != c.names || bad != c.bad {
			t.Errorf("%q: %d names, %d unresolved; want %d and %d", c.text, len(names), bad, c.names, c.bad)
		}
	}
}

// declarations is what the module declares, by where it is declared.
type declarations struct {
	any     map[string]bool            // every declared name and struct-tag name
	pkgs    map[string]map[string]bool // package name → names declared in it
	members map[string]map[string]bool // type name → its fields and methods
	embeds  map[string][]string        // type name → the types it embeds
	imports map[string]bool            // names under which files import other packages
	used    map[string]bool            // every selector the code uses (x.Sel), libraries' included
	others  map[string]bool            // words of the web app, the unit files and the API description
}

// moduleNames is declaredNames of the repository, parsed once for the
// tests that share it: parsing every Go file is most of their time. The
// tests only read the result.
var moduleNames = sync.OnceValues(func() (*declarations, error) {
	return declaredNames(filepath.Join(".."))
})

// declaredNames parses every .go file under root, tests included, since
// docs name tests and test helpers too.
func declaredNames(root string) (*declarations, error) {
	d := &declarations{
		any:     map[string]bool{},
		pkgs:    map[string]map[string]bool{},
		members: map[string]map[string]bool{},
		embeds:  map[string][]string{},
		imports: map[string]bool{},
		used:    map[string]bool{},
		others:  map[string]bool{},
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			switch e.Name() {
			case ".git", "node_modules", "dist", "var", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if otherSource(path) {
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			eachWord(string(src), func(w string) { d.others[w] = true })
			return nil
		}
		if filepath.Ext(path) != ".go" {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		d.addFile(f)
		return nil
	})
	return d, err
}

func (d *declarations) addFile(f *ast.File) {
	pkg := f.Name.Name
	if d.pkgs[pkg] == nil {
		d.pkgs[pkg] = map[string]bool{}
	}
	inPkg := func(name string) {
		d.any[name] = true
		d.pkgs[pkg][name] = true
	}
	inPkg(pkg)
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			d.used[sel.Sel.Name] = true
		}
		return true
	})
	for _, im := range f.Imports {
		p, err := strconv.Unquote(im.Path.Value)
		if err != nil {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		d.imports[name] = true
	}
	for _, dl := range f.Decls {
		switch dl := dl.(type) {
		case *ast.FuncDecl:
			inPkg(dl.Name.Name)
			if dl.Recv != nil && len(dl.Recv.List) > 0 {
				if recv := typeName(dl.Recv.List[0].Type); recv != "" {
					d.member(recv, dl.Name.Name)
				}
			}
		case *ast.GenDecl:
			for _, sp := range dl.Specs {
				switch sp := sp.(type) {
				case *ast.TypeSpec:
					inPkg(sp.Name.Name)
					d.addType(sp.Name.Name, sp.Type, inPkg)
				case *ast.ValueSpec:
					for _, n := range sp.Names {
						inPkg(n.Name)
					}
				}
			}
		}
	}
}

// addType records the fields and methods of type name, and the struct
// tags' names, so that API fields named in prose resolve.
func (d *declarations) addType(name string, expr ast.Expr, inPkg func(string)) {
	switch t := expr.(type) {
	case *ast.StructType:
		for _, fl := range t.Fields.List {
			if len(fl.Names) == 0 {
				if emb := typeName(fl.Type); emb != "" {
					d.member(name, emb)
					d.embeds[name] = append(d.embeds[name], emb)
				}
			}
			for _, n := range fl.Names {
				inPkg(n.Name)
				d.member(name, n.Name)
			}
			if fl.Tag != nil {
				if tag, err := strconv.Unquote(fl.Tag.Value); err == nil {
					for _, key := range []string{"json", "yaml"} {
						if v, _, _ := strings.Cut(reflect.StructTag(tag).Get(key), ","); v != "" && v != "-" {
							d.any[v] = true
						}
					}
				}
			}
		}
	case *ast.InterfaceType:
		for _, m := range t.Methods.List {
			if len(m.Names) == 0 {
				if emb := typeName(m.Type); emb != "" {
					d.embeds[name] = append(d.embeds[name], emb)
				}
			}
			for _, n := range m.Names {
				inPkg(n.Name)
				d.member(name, n.Name)
			}
		}
	}
}

func (d *declarations) member(typ, name string) {
	if d.members[typ] == nil {
		d.members[typ] = map[string]bool{}
	}
	d.members[typ][name] = true
	d.any[name] = true
}

// typeName is the name of the type expr refers to: T, *T, p.T, T[X].
func typeName(expr ast.Expr) string {
	switch t := expr.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return typeName(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.IndexExpr:
		return typeName(t.X)
	case *ast.IndexListExpr:
		return typeName(t.X)
	}
	return ""
}

// hasMember reports whether typ or a type it embeds declares name.
func (d *declarations) hasMember(typ, name string, seen map[string]bool) bool {
	if seen[typ] {
		return false
	}
	seen[typ] = true
	if d.members[typ][name] {
		return true
	}
	return slices.ContainsFunc(d.embeds[typ], func(e string) bool { return d.hasMember(e, name, seen) })
}

// resolve returns why name does not resolve, or "" when it does.
func (d *declarations) resolve(name string) string {
	prefix := strings.HasSuffix(name, "*")
	parts := strings.Split(strings.TrimSuffix(name, "*"), ".")
	last := len(parts) - 1
	// declared reports whether part i is in set, as a prefix for the
	// last part of a "Name*" token.
	declared := func(set map[string]bool, i int) bool {
		if i == last && prefix {
			for n := range set {
				if strings.HasPrefix(n, parts[i]) {
					return true
				}
			}
			return false
		}
		return set[parts[i]]
	}
	if len(parts) == 1 {
		if declared(d.any, 0) || declared(d.used, 0) || declared(d.others, 0) || libraryNames[parts[0]] != "" {
			return ""
		}
		if !prefix && (d.any["Test"+parts[0]] || d.any["Benchmark"+parts[0]]) {
			return ""
		}
		return "the module declares no such name"
	}
	q := parts[0]
	switch {
	case d.pkgs[q] != nil:
		if !declared(d.pkgs[q], 1) {
			return fmt.Sprintf("package %s declares no %s", q, parts[1])
		}
		if len(parts) == 3 && d.members[parts[1]] != nil && !d.memberOf(parts[1], parts[2], prefix) {
			return fmt.Sprintf("%s.%s has no field or method %s", q, parts[1], parts[2])
		}
		return ""
	case d.members[q] != nil:
		if !d.memberOf(q, parts[1], prefix && last == 1) {
			return fmt.Sprintf("type %s has no field or method %s", q, parts[1])
		}
		if len(parts) == 3 && !declared(d.any, 2) {
			return fmt.Sprintf("the module declares no %s", parts[2])
		}
		return ""
	case d.imports[q]:
		return "" // a library's name: not the module's to keep
	case declared(d.used, last) || declared(d.any, last):
		return "" // a field, variable or library type, and a member the code uses
	}
	return fmt.Sprintf("%s is no package, type or import of the module, and no code uses .%s", q, parts[last])
}

// memberOf reports whether part is a member of typ or of a type it
// embeds; as a prefix when prefix is set (a token ending in "*").
func (d *declarations) memberOf(typ, part string, prefix bool) bool {
	if !prefix {
		return d.hasMember(typ, part, map[string]bool{})
	}
	for m := range d.members[typ] {
		if strings.HasPrefix(m, part) {
			return true
		}
	}
	return slices.ContainsFunc(d.embeds[typ], func(e string) bool { return d.memberOf(e, part, true) })
}

// docName is a Go-looking name found in a document, with its line.
type docName struct {
	name string
	line int
}

var (
	// goTokenRE: up to three identifiers joined by dots, then "()" or "*".
	goTokenRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*){0,2})(\(\)|\*)?$`)
	capsRE    = regexp.MustCompile(`^[A-Z0-9_]*[A-Z][A-Z0-9_]*$`)
	fenceRE   = regexp.MustCompile("^\\s*(```|~~~)")
)

// goNamesIn returns the backticked tokens of markdown src that the rule
// of TestDocumentedGoNamesExist treats as Go names; a "Name*" token keeps
// its star.
func goNamesIn(src string) []docName {
	var out []docName
	fenced := false
	for i, line := range strings.Split(src, "\n") {
		if fenceRE.MatchString(line) {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range tickRE.FindAllStringSubmatch(line, -1) {
			g := goTokenRE.FindStringSubmatch(m[1])
			if g == nil {
				continue
			}
			parts := strings.Split(g[1], ".")
			if slices.ContainsFunc(parts, func(p string) bool { return len(p) > 1 && capsRE.MatchString(p) }) {
				continue
			}
			upper := slices.ContainsFunc(parts, func(p string) bool { return p[0] >= 'A' && p[0] <= 'Z' })
			if !upper && g[2] != "()" {
				continue
			}
			if len(parts) == 1 && g[2] != "()" && !camelRE.MatchString(parts[0]) {
				continue // one plain word: `Host`, `None`, `Containerfile`
			}
			name := g[1]
			if g[2] == "*" {
				name += "*"
			}
			out = append(out, docName{name: name, line: i + 1})
		}
	}
	return out
}

// otherSource reports whether path is a source whose names prose may
// give in backticks without Go declaring them: the web app's TypeScript,
// the unit and image files, the API description.
func otherSource(path string) bool {
	p := filepath.ToSlash(path)
	switch {
	case strings.Contains(p, "/web/src/") && (strings.HasSuffix(p, ".ts") || strings.HasSuffix(p, ".tsx")):
		return true
	case strings.Contains(p, "/deploy/"), strings.HasSuffix(p, "/Containerfile"), strings.HasSuffix(p, "/docs/openapi.yaml"):
		return true
	}
	return false
}

// markdownFiles lists the README and every page under docs/.
func markdownFiles(root string) ([]string, error) {
	files := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && filepath.Ext(path) == ".md" {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}
