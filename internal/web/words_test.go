package web

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"changeflow/internal/domain"
)

var update = flag.Bool("update", false, "rewrite web/tests/testdata/states.json from the domain's states")

// wordsFile is the app's one table of words for the API's states.
const wordsFile = webSources + "/src/words.ts"

// statesFixture is what the browser tests render: every binding state,
// every step and the hint the API gives for each pair (domain.HintFor),
// generated from the domain so the tests see a new state the day it is
// added.
const statesFixture = webSources + "/tests/testdata/states.json"

// objectKeys returns the keys of the object literal `const <name> ... = {`
// in src, one key per line ("  KEY: 'words',"), as words.ts writes them.
func objectKeys(t *testing.T, src, name string) []string {
	t.Helper()
	start := regexp.MustCompile(`(?m)^const ` + name + `\b[^=]*= \{$`).FindStringIndex(src)
	if start == nil {
		t.Fatalf("%s: no `const %s … = {` block", wordsFile, name)
	}
	rest := src[start[1]:]
	end := strings.Index(rest, "\n};")
	if end < 0 {
		t.Fatalf("%s: the %s block does not end with `};`", wordsFile, name)
	}
	var keys []string
	for _, m := range regexp.MustCompile(`(?m)^\s+([A-Z][A-Z0-9_]*):`).FindAllStringSubmatch(rest[:end], -1) {
		keys = append(keys, m[1])
	}
	return keys
}

// TestWordsCoverEveryState: web/src/words.ts has words for exactly the
// binding states and steps the API can return — a new state without words
// fails here, and words for a state that no longer exists too.
func TestWordsCoverEveryState(t *testing.T) {
	raw, err := os.ReadFile(wordsFile)
	if err != nil {
		t.Skipf("web/ sources are not next to this package: %v", err)
	}
	src := string(raw)
	var statuses []string
	for _, s := range domain.BindingStatuses {
		statuses = append(statuses, string(s))
	}
	steps := []string{domain.StepNone.String()}
	for _, s := range domain.Steps() {
		steps = append(steps, s.String())
	}
	var keys, states []string
	for _, k := range domain.ProgressKeys {
		keys = append(keys, string(k))
	}
	for _, s := range domain.ProgressStates {
		states = append(states, string(s))
	}
	for _, c := range []struct {
		block string
		want  []string
	}{{"statusWords", statuses}, {"stepWords", steps}, {"progressWords", keys}, {"progressStateWords", states}} {
		got := objectKeys(t, src, c.block)
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("%s: %s has no words for %s", wordsFile, c.block, w)
			}
		}
		for _, g := range got {
			if !slices.Contains(c.want, g) {
				t.Errorf("%s: %s has words for %s, which the API never returns", wordsFile, c.block, g)
			}
		}
	}
}

type fixtureStep struct {
	Code int    `json:"code"`
	Name string `json:"name"`
}

type fixturePair struct {
	Step   string `json:"step"`
	Status string `json:"status"`
	Hint   string `json:"hint"`
}

// TestStatesFixtureIsCurrent keeps web/tests/testdata/states.json equal to
// the domain (go test ./internal/web -run TestStatesFixtureIsCurrent
// -update rewrites it).
func TestStatesFixtureIsCurrent(t *testing.T) {
	if _, err := os.Stat(filepath.Join(webSources, "tests")); err != nil {
		t.Skip("web/ sources are not next to this package")
	}
	var f struct {
		Statuses []string      `json:"statuses"`
		Steps    []fixtureStep `json:"steps"`
		Pairs    []fixturePair `json:"pairs"`
	}
	all := append([]domain.StepStatus{domain.StepNone}, domain.Steps()...)
	for _, s := range domain.BindingStatuses {
		f.Statuses = append(f.Statuses, string(s))
	}
	for _, st := range all {
		f.Steps = append(f.Steps, fixtureStep{Code: int(st), Name: st.String()})
		for _, b := range domain.BindingStatuses {
			f.Pairs = append(f.Pairs, fixturePair{Step: st.String(), Status: string(b), Hint: string(domain.HintFor(st, b))})
		}
	}
	want, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *update {
		if err := os.MkdirAll(filepath.Dir(statesFixture), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(statesFixture, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(statesFixture)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s is not the domain's states (%v): run go test ./internal/web -run TestStatesFixtureIsCurrent -update", statesFixture, err)
	}
}
