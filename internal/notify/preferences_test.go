package notify

import "testing"

func TestAllowed(t *testing.T) {
	off := func(ks ...Kind) map[Kind]bool {
		m := map[Kind]bool{}
		for _, k := range ks {
			m[k] = false
		}
		return m
	}
	for _, c := range []struct {
		name   string
		kind   Kind
		set    map[Kind]bool
		optOut bool
		want   bool
	}{
		{"nothing chosen: on", KindRequestInEffect, nil, false, true},
		{"turned off", KindRequestInEffect, off(KindRequestInEffect), false, false},
		{"turned on again", KindRequestInEffect, map[Kind]bool{KindRequestInEffect: true}, false, true},
		{"another kind off: this one stays on", KindRequestRejected, off(KindRequestInEffect), false, true},
		{"safety: stays on while opting out is not allowed", KindAccessExpiring, off(KindAccessExpiring), false, true},
		{"safety: removed stays on too", KindAccessRemoved, off(KindAccessRemoved), false, true},
		{"safety: off once the operator allows it", KindAccessExpiring, off(KindAccessExpiring), true, false},
		{"an operators' kind is not a person's to turn off", KindBatchBlocked, off(KindBatchBlocked), true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Allowed(c.kind, c.set, c.optOut); got != c.want {
				t.Fatalf("Allowed(%s) = %v, want %v", c.kind, got, c.want)
			}
		})
	}
}

func TestPreferencesListEveryPersonalKindAndLockSafety(t *testing.T) {
	got := Preferences(map[Kind]bool{KindRequestSubmitted: false, KindAccessRemoved: false}, false)
	if len(got) != len(PersonalKinds) {
		t.Fatalf("%d preferences, want %d", len(got), len(PersonalKinds))
	}
	for i, p := range got {
		if p.Kind != PersonalKinds[i] {
			t.Fatalf("preference %d is %s, want %s", i, p.Kind, PersonalKinds[i])
		}
		wantOn := p.Kind != KindRequestSubmitted
		if p.Enabled != wantOn || p.Locked != p.Kind.Safety() {
			t.Errorf("%s: enabled %v locked %v", p.Kind, p.Enabled, p.Locked)
		}
	}
	for _, p := range Preferences(nil, true) {
		if p.Locked {
			t.Errorf("%s locked although opting out is allowed", p.Kind)
		}
	}
}
