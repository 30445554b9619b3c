package server

import "testing"

func TestServePprofOnlyOnLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"", true}, // off
		{"127.0.0.1:0", true},
		{"0.0.0.0:0", false},
		{"example.com:6060", false},
		{"6060", false},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			t.Setenv(PprofEnv, tc.addr)
			stop, err := ServePprof()
			if (err == nil) != tc.ok {
				t.Fatalf("%s=%q: err %v, want ok=%v", PprofEnv, tc.addr, err, tc.ok)
			}
			if stop != nil {
				stop()
			}
		})
	}
}
