package server

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestServePprofOnASocket: the profiles are served only when asked for
// with 1, on a socket in the server's private directory that this user
// reaches; an address (the old form, a TCP port) is refused.
func TestServePprofOnASocket(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	for _, tc := range []struct {
		val   string
		ok    bool
		serve bool
	}{
		{"", true, false}, // off
		{"0", true, false},
		{"1", true, true},
		{"127.0.0.1:6060", false, false},
		{"0.0.0.0:0", false, false},
	} {
		t.Run(tc.val, func(t *testing.T) {
			t.Setenv(PprofEnv, tc.val)
			stop, err := ServePprof()
			if (err == nil) != tc.ok {
				t.Fatalf("%s=%q: err %v, want ok=%v", PprofEnv, tc.val, err, tc.ok)
			}
			if err != nil {
				return
			}
			defer stop()
			resp, err := PprofClient(DirPath()).Get("http://rex/debug/pprof/cmdline")
			if !tc.serve {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("%s=%q: profiles answered, want none", PprofEnv, tc.val)
				}
				return
			}
			if err != nil {
				t.Fatalf("get the profiles: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || len(body) == 0 {
				t.Fatalf("cmdline: %s %q", resp.Status, body)
			}
			d, err := OpenDir()
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			var st unix.Stat_t
			if err := unix.Fstatat(int(d.Fd()), PprofName, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&0o777 != 0o600 {
				t.Fatalf("the socket: mode %#o, err %v; want 0600", st.Mode&0o777, err)
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
