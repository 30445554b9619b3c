package sshx

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/rexconsole/rex/internal/sshtest"
)

// TestFailedLearnLeavesNoPartialLine: when appending a new host's line to
// known_hosts fails part way (a full disk; here a file size limit, which
// makes write(2) stop short the same way), learn puts the file back as it
// was. A partial line left behind would make every later load of the file
// fail (x/crypto's knownhosts refuses a file with a line it cannot parse),
// so no connection through it would work until someone edited it by hand.
func TestFailedLearnLeavesNoPartialLine(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	other := sshtest.NewKey(t, "ed25519")
	before := "other.example " + strings.TrimSpace(other.AuthorizedLine()) + "\n"
	writeFile(t, e.knownHosts, before)

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
			t.Fatal(err)
		}
	}
	// Room for a few bytes of the new line, not all of it.
	lim := old
	lim.Cur = uint64(len(before) + 10)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	err, _ := dialErr(t, NewDialer(e.opts()), e.target("h1", s))
	restore()
	if !errors.Is(err, ErrHostKeyUnknown) {
		t.Fatalf("error %v, want the host key could not be recorded", err)
	}
	assertOneSentence(t, err, "cannot record the host key", e.knownHosts)
	if got := readFile(t, e.knownHosts); got != before {
		t.Errorf("known_hosts after the failed append is %q, want it as it was, %q", got, before)
	}

	// With room again, the next connection works and records the host.
	c := connect(t, NewDialer(e.opts()), e.target("h1", s))
	if out, code := runOn(t, c, "echo", "in"); out != "in\n" || code != 0 {
		t.Errorf("echo: %q exit %d", out, code)
	}
	if kh := readFile(t, e.knownHosts); !strings.HasPrefix(kh, before) || !strings.Contains(kh, sshtest.KnownHostsName(s.Addr)+" ") {
		t.Errorf("known_hosts is %q, want the old line and one for %s", kh, sshtest.KnownHostsName(s.Addr))
	}
}
