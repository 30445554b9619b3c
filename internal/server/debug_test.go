package server

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

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

// The attached client's keystrokes go out base64 in a line of its own
// making (no plain copy of a typed password in the client), and the
// server reads them back.
func TestInputLine(t *testing.T) {
	for _, keys := range []string{"s3cret-pw", "\x1b[A", "é\r", string([]byte{0xff, 0})} {
		line := appendInputLine(make([]byte, 0, inputLineLen(len(keys))), []byte(keys))
		if bytes.Contains(line, []byte(keys)) {
			t.Fatalf("the line carries %q in plain: %s", keys, line)
		}
		if line[len(line)-1] != '\n' || cap(line) != inputLineLen(len(keys)) {
			t.Fatalf("line %q: cap %d, want %d", line, cap(line), inputLineLen(len(keys)))
		}
		m, perr := protocol.ParseMessage(line[:len(line)-1])
		if perr != nil || m.Method != MethodInput || !m.IsNotification() {
			t.Fatalf("parse %s: %v", line, perr)
		}
		var p DataParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			t.Fatal(err)
		}
		if b, err := p.Bytes(); err != nil || string(b) != keys {
			t.Fatalf("read back %q (%v), want %q", b, err, keys)
		}
	}
}
