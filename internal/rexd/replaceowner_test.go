package rexd_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestReplaceKeepsTheOwner: an atomic fs.write replace (the agent's
// write and edit, rex push's files) writes a new file and renames it over
// the old one. It keeps the mode, but the new file belongs to rexd's user:
// a rexd running as root (rex --sudo, become: true) that edits a file of
// www-data or of a login user hands it to root, and that user can no
// longer write their own file. The write must keep the owner and group.
func TestReplaceKeepsTheOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the file another owner")
	}
	h := start(t)
	sid := h.open()
	p := filepath.Join(h.root, "owned.conf")
	if err := os.WriteFile(p, []byte("a=1\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 4321, 4322); err != nil {
		t.Fatal(err)
	}
	h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "owned.conf", Content: "a=2\n"}, nil)
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 4321 || st.Gid != 4322 {
		t.Errorf("after a replace the file belongs to %d:%d, not 4321:4322 as before", st.Uid, st.Gid)
	}
}

// TestReplaceKeepsTheSpecialBits: a replace keeps the setuid and setgid
// bits with the permissions (a setgid helper edited by the agent must stay
// one); they used to be dropped with everything but Perm.
func TestReplaceKeepsTheSpecialBits(t *testing.T) {
	h := start(t)
	sid := h.open()
	p := filepath.Join(h.root, "helper")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := 0o755 | fs.ModeSetuid | fs.ModeSetgid
	if err := os.Chmod(p, want); err != nil {
		t.Fatal(err)
	}
	h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "helper", Content: "#!/bin/sh\nexit 0\n"}, nil)
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode() &^ fs.ModeType; got != want {
		t.Errorf("after a replace the mode is %v, was %v", got, want)
	}
}
