package bindingfile

import "strings"

// Op is a diff line's kind.
type Op string

// Diff line kinds, as in a unified diff.
const (
	OpKeep   Op = " "
	OpRemove Op = "-"
	OpAdd    Op = "+"
)

// Line is one line of a diff.
type Line struct {
	Op   Op     `json:"op"`
	Text string `json:"text"`
}

// maxDiffLines bounds the quadratic line diff; beyond it the diff is the
// whole old file removed and the whole new file added — still correct,
// only less helpful, and binding files are far smaller in practice.
const maxDiffLines = 4000

// Diff returns a line diff of before → after (a longest-common-subsequence
// diff: unchanged lines kept, removed ones before added ones at each
// change).
func Diff(before, after []byte) []Line {
	a, b := splitLines(string(before)), splitLines(string(after))
	if len(a)*len(b) > maxDiffLines*maxDiffLines/4 || len(a) > maxDiffLines || len(b) > maxDiffLines {
		out := make([]Line, 0, len(a)+len(b))
		for _, l := range a {
			out = append(out, Line{OpRemove, l})
		}
		for _, l := range b {
			out = append(out, Line{OpAdd, l})
		}
		return out
	}
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []Line
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			out = append(out, Line{OpKeep, a[i]})
			i++
			j++
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, Line{OpRemove, a[i]})
			i++
		default:
			out = append(out, Line{OpAdd, b[j]})
			j++
		}
	}
	for ; i < len(a); i++ {
		out = append(out, Line{OpRemove, a[i]})
	}
	for ; j < len(b); j++ {
		out = append(out, Line{OpAdd, b[j]})
	}
	return out
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
