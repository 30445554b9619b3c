package rexd

import "testing"

// TestLookupOwnerRange: a numeric owner is a uid or gid the kernel can
// hold. chown takes 32 bits, so 4294967296 was uid 0 (root, under sudo),
// and a negative id other than -1 a huge one; both are refused.
func TestLookupOwnerRange(t *testing.T) {
	for _, tc := range []struct {
		spec     string
		uid, gid int
		ok       bool
	}{
		{"1000", 1000, -1, true},
		{"1000:50", 1000, 50, true},
		{":50", -1, 50, true},
		{"2147483647:65534", 2147483647, 65534, true},
		{"4294967296", 0, 0, false},
		{"0:4294967296", 0, 0, false},
		{"4294967295", 0, 0, false}, // (uid_t)-1: "leave alone" to chown
		{"-5:0", 0, 0, false},
		{"0:-2", 0, 0, false},
		{"+0", 0, 0, false},
	} {
		o, err := lookupOwner(tc.spec)
		if !tc.ok {
			if err == nil {
				t.Errorf("lookupOwner(%q) = %+v, want an error", tc.spec, *o)
			}
			continue
		}
		if err != nil || o.UID != tc.uid || o.GID != tc.gid {
			t.Errorf("lookupOwner(%q) = %+v, %v; want %d:%d", tc.spec, o, err, tc.uid, tc.gid)
		}
	}
}
