//go:build linux

package rexd_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestAtomicReplaceNeverShowsTheContentToOthers: an atomic replace
// of a private file (0600: a key, a password file, /etc/shadow for a rexd
// running as root) writes the new content into a temp file beside it
// before it gives the temp file the old file's mode. The temp file must
// not be readable by others meanwhile: one who opens it then keeps
// reading it after the chmod (and after a crash it stays behind). The
// test watches the directory and looks at the temp file's mode as soon as
// it appears.
func TestAtomicReplaceNeverShowsTheContentToOthers(t *testing.T) {
	h := start(t)
	sid := h.open()
	dir := filepath.Join(h.root, "priv")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "key")
	if err := os.WriteFile(target, []byte("old secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	content := strings.Repeat("new secret\n", 400_000) // a write that takes a while
	seen := 0
	for attempt := 0; attempt < 10; attempt++ {
		fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
		if err != nil {
			t.Fatalf("inotify: %v", err)
		}
		if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE); err != nil {
			unix.Close(fd)
			t.Fatal(err)
		}
		modes := make(chan []uint32, 1)
		go func() {
			var got []uint32
			defer func() { modes <- got }()
			buf := make([]byte, 64<<10)
			for {
				n, err := unix.Read(fd, buf)
				if err != nil || n <= 0 {
					return
				}
				for off := 0; off+unix.SizeofInotifyEvent <= n; {
					ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
					name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
					off += unix.SizeofInotifyEvent + int(ev.Len)
					if name == "stop" {
						return
					}
					if strings.Contains(name, ".rexd-") {
						var st unix.Stat_t
						if unix.Fstatat(unix.AT_FDCWD, filepath.Join(dir, name), &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
							got = append(got, st.Mode&0o777)
						}
					}
				}
			}
		}()
		h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "priv/key", Content: content}, nil)
		os.WriteFile(filepath.Join(dir, "stop"), nil, 0o600)
		got := <-modes
		unix.Close(fd)
		os.Remove(filepath.Join(dir, "stop"))
		for _, m := range got {
			seen++
			if m&0o077 != 0 {
				t.Fatalf("the temp file holding the new content of a 0600 file was mode %#o while it was written: others could open it", m)
			}
		}
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the replaced file: %v, %v", fi, err)
	}
	if seen == 0 {
		t.Fatal("never caught the temp file in 10 writes of 4.4 MB: the test showed nothing")
	}
}
