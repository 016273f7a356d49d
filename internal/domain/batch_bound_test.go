package domain

import "testing"

func TestAdaptiveBatchBound(t *testing.T) {
	ok := BatchRound{Merged: true}
	bad := BatchRound{ChecksFailed: true}
	half := func(r BatchRound) BatchRound { r.Depth = 1; return r }
	other := BatchRound{} // failed for another reason (conflict, timeout)
	rep := func(r BatchRound, n int) []BatchRound {
		out := make([]BatchRound, n)
		for i := range out {
			out[i] = r
		}
		return out
	}
	cat := func(parts ...[]BatchRound) []BatchRound {
		var out []BatchRound
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, c := range []struct {
		name    string
		rounds  []BatchRound
		ceiling int
		want    int
	}{
		{"no history: the ceiling", nil, 50, 50},
		{"successes stay at the ceiling", rep(ok, 5), 50, 50},
		{"a failed round halves", []BatchRound{ok, bad}, 50, 25},
		{"two in a row quarter", []BatchRound{bad, bad}, 50, 12},
		{"then each merge grows by an eighth of the ceiling", []BatchRound{bad, bad, ok}, 50, 18},
		{"and back to the ceiling, never above", cat([]BatchRound{bad, bad}, rep(ok, 10)), 50, 50},
		{"a bisection's halves change nothing", []BatchRound{bad, half(bad), half(ok), half(ok)}, 50, 25},
		{"a failure that is not the checks changes nothing", []BatchRound{bad, other}, 50, 25},
		{"never below one", rep(bad, 12), 50, 1},
		{"a small ceiling grows by one", []BatchRound{bad, bad, ok}, 4, 2},
		{"a ceiling below one is one", []BatchRound{ok}, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := AdaptiveBatchBound(c.rounds, c.ceiling); got != c.want {
				t.Fatalf("AdaptiveBatchBound = %d, want %d", got, c.want)
			}
		})
	}
}
