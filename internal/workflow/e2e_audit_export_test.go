package workflow_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/auditchain"
	"changeflow/internal/auditlog"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// shiftRecords moves every record the chain copies one minute into the
// past, keeping their order: past the chainer's grace, so an export made
// now holds everything the test did.
func shiftRecords(t *testing.T, st *store.Store) {
	t.Helper()
	for table, col := range map[string]string{"operation_step": "created_at", "audit_log": "created_at", "approval_callback": "received_at"} {
		expr := "strftime('%Y-%m-%d %H:%M:%f', " + col + ", '-60 seconds')"
		if st.Dialect().IsMySQL() {
			expr = col + " - INTERVAL 1 MINUTE"
		}
		_, err := st.DB().ExecContext(t.Context(), "UPDATE "+table+" SET "+col+" = "+expr)
		require.NoError(t, err)
	}
}

// TestAuditExportOfAWholeLifecycle: two grants through the whole workflow
// (submitted, approved, merged, in effect), one given back by its owner
// and one revoked by an operator, both removals in effect. The export of
// the period verifies with the public key, and holds each request's
// steps in their order — submitted before in effect, each removal created
// and then removed — with who did what. The files on main say what the
// database says.
func TestAuditExportOfAWholeLifecycle(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.granted("mine", "amy", tSingle)
		w.granted("theirs", "ben", tOther)
		_, err := revoker(w.deps).Revoke(t.Context(), "mine", domain.RevokeGivenBack, "given back by its owner", "amy")
		require.NoError(t, err)
		_, err = revoker(w.deps).Revoke(t.Context(), "theirs", domain.RevokeOperator, "left the team", "ops-olga")
		require.NoError(t, err)
		w.eng.Wake()
		w.until(domain.RevocationID("mine"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		w.until(domain.RevocationID("theirs"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))

		shiftRecords(t, st)
		key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{6}, 32))
		chain := auditlog.New(auditlog.Options{Store: st, Settings: func() auditlog.Settings { return auditlog.Settings{SigningKey: key} }})
		var out bytes.Buffer
		now := time.Now()
		require.NoError(t, chain.Export(t.Context(), &out, auditlog.ExportParams{From: now.Add(-time.Hour), To: now.Add(time.Hour), Format: auditchain.FormatJSONL}))
		sum, err := auditchain.Verify(bytes.NewReader(out.Bytes()), key.Public().(ed25519.PublicKey))
		require.NoError(t, err)
		require.Equal(t, int64(1), sum.FirstSeq)

		// Each operation's kinds in seq order, and who the removals name.
		kinds := map[string][]string{}
		actors := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var r map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &r))
			op, _ := r["operationId"].(string)
			kind, _ := r["kind"].(string)
			if r["source"] == store.ChainSourceStep {
				kinds[op] = append(kinds[op], kind)
				actors[op+" "+r["actor"].(string)] = true
			}
		}
		for _, op := range []string{"mine", "theirs"} {
			requireInOrder(t, op, kinds[op], "grant.submitted", "grant.approval_sent", "grant.validated")
			requireInOrder(t, op, kinds[domain.RevocationID(op)], "revoke.submitted", "revoke.revoked")
		}
		require.True(t, actors[domain.RevocationID("mine")+" amy"], "the give-back names its owner: %v", actors)
		require.True(t, actors[domain.RevocationID("theirs")+" ops-olga"], "the operator's revocation names the operator: %v", actors)
		w.filesExact("mine", "theirs")
	})
}

// requireInOrder checks that want appear in got in this order (others
// may come between).
func requireInOrder(t *testing.T, op string, got []string, want ...string) {
	t.Helper()
	i := 0
	for _, k := range got {
		if i < len(want) && k == want[i] {
			i++
		}
	}
	require.Equal(t, len(want), i, "%s: %v holds %v in order", op, got, want)
}
