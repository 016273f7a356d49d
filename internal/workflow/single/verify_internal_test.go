package single

import (
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/gitlab"
	"changeflow/internal/workflow/flow"
)

// TestJudgeHead is the head check's decision, no database and no GitLab:
// given the commits since the merge base, the paths their diff touches,
// what changeflow writes from the base and what the head holds.
func TestJudgeHead(t *testing.T) {
	const bot = "changeflow-bot@changeflow.local"
	const path = "bindings/payments-db.yaml"
	ours := gitlab.Commit{ID: "c0ffee00aa", AuthorName: "changeflow bot", AuthorEmail: bot}
	theirs := gitlab.Commit{ID: "badbad00bb", AuthorName: "Dev Eloper", AuthorEmail: "developer@changeflow.local"}
	want := map[string][]byte{path: []byte("- subject: alice\n")}
	cases := []struct {
		name  string
		facts headFacts
		kind  verdictKind
		why   string
	}{
		{"our one commit, exactly our edit", headFacts{BotEmail: bot, Commits: []gitlab.Commit{ours}, Paths: []string{path},
			Want: want, Head: map[string][]byte{path: []byte("- subject: alice\n")}}, headVerified, ""},
		{"the author email differs only in case", headFacts{BotEmail: bot, Commits: []gitlab.Commit{{ID: "1234567890", AuthorEmail: "Changeflow-Bot@changeflow.local"}},
			Paths: []string{path}, Want: want, Head: map[string][]byte{path: want[path]}}, headVerified, ""},
		{"a person's commit on top of ours", headFacts{BotEmail: bot, Commits: []gitlab.Commit{ours, theirs}, Paths: []string{path},
			Want: want, Head: map[string][]byte{path: want[path]}}, headForeign, "commit badbad00 is by Dev Eloper"},
		{"a person's commit, even with exactly our content", headFacts{BotEmail: bot, Commits: []gitlab.Commit{theirs}, Paths: []string{path},
			Want: want, Head: map[string][]byte{path: want[path]}}, headForeign, "not the committer bot"},
		{"our author, another path (a forged author)", headFacts{BotEmail: bot, Commits: []gitlab.Commit{ours}, Paths: []string{path, "bindings/sneak.yaml"},
			Want: want, Head: map[string][]byte{path: want[path]}}, headForeign, "touches bindings/sneak.yaml"},
		{"our commits, content not byte-exact (a 3-way rebase)", headFacts{BotEmail: bot, Commits: []gitlab.Commit{ours}, Paths: []string{path},
			Want: want, Head: map[string][]byte{path: []byte("- subject: alice\n- subject: bob\n")}}, headRebuild, "is not what changeflow writes"},
		{"our commits, our file gone", headFacts{BotEmail: bot, Commits: []gitlab.Commit{ours}, Paths: []string{path},
			Want: want, Head: map[string][]byte{}}, headRebuild, "is not what changeflow writes"},
		{"no commit of its own (the branch is the base)", headFacts{BotEmail: bot, Want: want, Head: map[string][]byte{}}, headRebuild, "no commit of its own"},
		{"GitLab cut the comparison short", headFacts{BotEmail: bot, Commits: []gitlab.Commit{ours}, Paths: []string{path}, Timeout: true,
			Want: want, Head: map[string][]byte{path: want[path]}}, headRebuild, "cut the comparison short"},
		{"the bot's email unknown: nothing is ours", headFacts{Commits: []gitlab.Commit{ours}, Paths: []string{path},
			Want: want, Head: map[string][]byte{path: want[path]}}, headForeign, "not the committer bot"},
		{"a batch: two files, both exact", headFacts{BotEmail: bot, Commits: []gitlab.Commit{ours}, Paths: []string{"a.yaml", "b.yaml"},
			Want: map[string][]byte{"a.yaml": []byte("a"), "b.yaml": []byte("b")}, Head: map[string][]byte{"a.yaml": []byte("a"), "b.yaml": []byte("b")}}, headVerified, ""},
		{"a batch: a member's file missing from the change", headFacts{BotEmail: bot, Commits: []gitlab.Commit{ours}, Paths: []string{"a.yaml"},
			Want: map[string][]byte{"a.yaml": []byte("a"), "b.yaml": []byte("b")}, Head: map[string][]byte{"a.yaml": []byte("a"), "b.yaml": []byte("old")}}, headRebuild, "b.yaml is not"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := judgeHead(c.facts)
			require.Equal(t, c.kind, got.Kind, got.Why)
			require.Contains(t, got.Why, c.why)
		})
	}
}

// TestFreshBranchNames: the n-th branch of a request or a batch is found
// again from its name alone, and no fresh name is another's first branch.
func TestFreshBranchNames(t *testing.T) {
	first := flow.BranchName("op-1")
	require.Equal(t, first, flow.FreshBranchName(first, 1))
	require.Equal(t, "changeflow/r2/op-op-1", flow.FreshBranchName(first, 2))
	require.Equal(t, "changeflow/r3/batch-7", flow.FreshBranchName(flow.BatchBranchName(7), 3))
	for n := 1; n <= flow.MaxBranchAttempts; n++ {
		got, ok := flow.BranchAttempt(flow.FreshBranchName(first, n), first)
		require.True(t, ok)
		require.Equal(t, n, got)
	}
	for _, other := range []string{"changeflow/r2/op-op-2", "changeflow/r02/op-op-1", "changeflow/r1/op-op-1", "changeflow/rx/op-op-1", flow.BranchName("r2/op-op-1"), ""} {
		_, ok := flow.BranchAttempt(other, first)
		require.False(t, ok, other)
	}
}
