package fleettest

import (
	"slices"
	"testing"
)

func TestAuditLinesLeaveOutAnEntryBeingWritten(t *testing.T) {
	for _, tc := range []struct {
		log  string
		want []string
	}{
		{"", nil},
		{`{"a":1`, nil},
		{"{\"a\":1}\n", []string{`{"a":1}`}},
		{"{\"a\":1}\n{\"b\":2}\n", []string{`{"a":1}`, `{"b":2}`}},
		{"{\"a\":1}\n{\"event\":\"exec.exit\",\"res", []string{`{"a":1}`}},
	} {
		if got := AuditLines([]byte(tc.log)); !slices.Equal(got, tc.want) {
			t.Errorf("AuditLines(%q) = %q, want %q", tc.log, got, tc.want)
		}
	}
}
