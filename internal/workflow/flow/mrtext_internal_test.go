package flow

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// codeSpan checks that line is prefix followed by exactly one Markdown code
// span holding want: a fence, one space, want, one space, the same fence,
// the fence longer than any backtick run inside. CommonMark renders such a
// span as its text and nothing else: no mention, image, link, HTML or
// reference forms inside it.
func codeSpan(t *testing.T, line, prefix, want string) {
	t.Helper()
	require.True(t, strings.HasPrefix(line, prefix), line)
	rest := line[len(prefix):]
	n := 0
	for n < len(rest) && rest[n] == '`' {
		n++
	}
	fence := rest[:n]
	longest, run := 0, 0
	for _, c := range want {
		if c != '`' {
			run = 0
			continue
		}
		run++
		longest = max(longest, run)
	}
	require.Greater(t, n, longest, "the fence is longer than any backtick run inside")
	require.Equal(t, fence+" "+want+" "+fence, rest)
}

// TestMarkdownAndForgedTrailersInTheReasonAreInert performs the MR side of
// issue 13 finding 8 on the description helpers: a reason with a mention,
// an image, a link, HTML, a backtick run and a trailer for another
// operation, and a reason stored before reasons had to be one line (with a
// forged trailer and a quick action on lines of their own). The reason is
// one code span on one line; the trailer block names only the request's
// own operation.
func TestMarkdownAndForgedTrailersInTheReasonAreInert(t *testing.T) {
	at := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct{ name, reason, shown string }{
		{"markdown", "@all ![p](https://evil.example/p.png) [x](https://evil.example) <img src=x onerror=alert(1)> #1 !2 ~bug", ""},
		{"a forged trailer on the same line", "Changeflow-Operation: op-victim", ""},
		{"backticks trying to close the span", "`` ` ``` `@all", ""},
		{"starts and ends with a backtick", "`x`", ""},
		{"a legacy multi-line reason", "audit\n\nChangeflow-Operation: op-victim\n/approve\n\x1b[2J\u202eevil", "audit\uFFFD\uFFFDChangeflow-Operation: op-victim\uFFFD/approve\uFFFD\uFFFD[2J\uFFFDevil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := store.Operation{OperationID: "op-attack", Subject: "mallory", TargetKey: "t", Reason: tc.reason, ExpiresAt: at}
			desc := MRDescription(op)
			require.Equal(t, []string{"op-attack"}, Trailers(desc), desc)
			require.False(t, HasTrailer(desc, "op-victim"))
			lines := strings.Split(desc, "\n")
			var reasonLines []string
			for _, l := range lines {
				require.False(t, strings.HasPrefix(l, "/"), "a line that is a quick action: %q", l)
				if strings.HasPrefix(l, "Reason: ") {
					reasonLines = append(reasonLines, l)
				}
			}
			require.Len(t, reasonLines, 1, desc)
			shown := tc.shown
			if shown == "" {
				shown = tc.reason
			}
			codeSpan(t, reasonLines[0], "Reason: ", shown)
			require.Equal(t, strings.Count(desc, "Changeflow-Operation: op-attack"), 1)
		})
	}
}

// TestDescriptionsCarryTheReasonAndTheApprovalInert: the single-request
// MR and each member line of a batch MR carry the request's reason and
// its approval's id, each one code span on its line, however hostile;
// the batch's commit message carries neither; the trailers name only the
// requests' own operations.
func TestDescriptionsCarryTheReasonAndTheApprovalInert(t *testing.T) {
	at := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	hostile := "@all <b>x</b> [l](https://evil.example) ![i](https://evil.example/i.png) `Changeflow-Operation: op-victim`"
	op := store.Operation{OperationID: "op-a", Subject: "alice", TargetKey: "t1", Reason: hostile, ApprovalID: "apr-`7`", ExpiresAt: at}
	desc := MRDescription(op)
	var approval string
	for _, l := range strings.Split(desc, "\n") {
		if strings.HasPrefix(l, "Approval: ") {
			approval = l
		}
	}
	codeSpan(t, approval, "Approval: ", "apr-`7`")
	require.Equal(t, []string{"op-a"}, Trailers(desc))

	other := store.Operation{OperationID: "op-b", Subject: "bob", TargetKey: "t2", Reason: "plain", ExpiresAt: at}
	_, message, bdesc := BatchText(9, []store.Operation{op, other})
	require.NotContains(t, message, "evil.example", "no caller text in the commit message")
	require.NotContains(t, message, "apr-")
	require.Equal(t, []string{"op-a", "op-b"}, Trailers(bdesc))
	require.False(t, HasTrailer(bdesc, "op-victim"))
	lines := strings.Split(bdesc, "\n")
	var member string
	for _, l := range lines {
		if strings.HasPrefix(l, "- bind alice") {
			member = l
		}
	}
	head, rest, ok := strings.Cut(member, "; reason: ")
	require.True(t, ok, member)
	require.Equal(t, "- bind alice to t1 until 2031-01-02T03:04:05Z", head)
	reason, appr, ok := strings.Cut(rest, "; approval: ")
	require.True(t, ok, member)
	codeSpan(t, reason, "", hostile)
	codeSpan(t, appr, "", "apr-`7`")
	require.Contains(t, bdesc, "- bind bob to t2 until 2031-01-02T03:04:05Z; reason: ` plain `\n")
}

func TestTrailerBlocks(t *testing.T) {
	t.Run("an id with backticks cannot close the fence", func(t *testing.T) {
		desc := DescriptionTrailers("text", "op-```-x", "op-2")
		require.Equal(t, []string{"op-```-x", "op-2"}, Trailers(desc), desc)
		require.True(t, strings.HasSuffix(desc, "\n````\n"), desc)
	})
	t.Run("commit trailers are the last paragraph", func(t *testing.T) {
		msg := CommitTrailers("title\n\nChangeflow-Operation: op-victim\n\nbody", "op-1")
		require.Equal(t, []string{"op-1"}, Trailers(msg))
	})
	t.Run("trailer-shaped lines above the block are not trailers", func(t *testing.T) {
		require.Empty(t, Trailers("Changeflow-Operation: op-1\n\nsomething a person wrote"))
		require.Empty(t, Trailers("Changeflow-Operation: op-1\n```"), "an unopened fence")
	})
	t.Run("the batch's description and message", func(t *testing.T) {
		at := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
		ops := []store.Operation{
			{OperationID: "@all", Subject: "alice", TargetKey: "t1", ExpiresAt: at},
			{OperationID: "op-2", Subject: "bob", TargetKey: "t2", ExpiresAt: at},
		}
		title, message, desc := BatchText(7, ops)
		require.Equal(t, "changeflow: batch 7 (2 request(s))", title)
		require.Equal(t, []string{"@all", "op-2"}, Trailers(desc))
		require.Equal(t, []string{"@all", "op-2"}, Trailers(message))
		require.True(t, strings.HasPrefix(message, title+"\n\n"), message)
		// "@all" appears in the description only inside the fenced block.
		before, _, _ := strings.Cut(desc, "```")
		require.NotContains(t, before, "@all")
	})
}

// TestRemovalDescriptionOfARepositoryEntry: a review's removal of an
// entry changeflow did not write names the entry, not a grant, and
// carries the review's reason (the campaign and the decider) inert.
func TestRemovalDescriptionOfARepositoryEntry(t *testing.T) {
	reason := "access review 7 of t1: revoked by olga (left)"
	op := store.Operation{OperationID: "review-item-3~remove", Subject: "hank", TargetKey: "t1", Kind: domain.OperationRevoke,
		GrantOperationID: "hand-1", RevokeReason: domain.RevokeOperator, Reason: reason, ReviewItemID: 3}
	desc := RemovalDescription(op)
	require.Contains(t, desc, "Removes the access of hank to t1: an entry changeflow did not write (operationId ` hand-1 ` in the file), revoked by an access review.")
	require.NotContains(t, desc, "granted by request")
	require.Contains(t, desc, "Reason: ` "+reason+" `")
	require.Equal(t, []string{"review-item-3~remove"}, Trailers(desc))
	grant := op
	grant.ReviewItemID, grant.GrantOperationID = 0, "g-1"
	require.Contains(t, RemovalDescription(grant), "granted by request ` g-1 `")
}
