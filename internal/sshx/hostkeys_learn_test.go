package sshx

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
	// The advice fits the cause: no permission is wrong here.
	assertOneSentence(t, err, "cannot record the host key", e.knownHosts, "ulimit -f")
	if strings.Contains(err.Error(), "permissions") {
		t.Errorf("error %q sends the operator to the file's permissions", err)
	}
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

// TestHostKeyAliasMustBeOneName: HostKeyAlias is written into known_hosts
// as the line's host pattern field, so a comma makes it two hosts (the key
// would vouch for the other one too), whitespace makes a line no loader
// can parse (and every later load of the file fails), and a wildcard
// makes the key every host's. Such an alias is refused as a configuration
// error before anything is dialled or written.
func TestHostKeyAliasMustBeOneName(t *testing.T) {
	for _, alias := range []string{"web,other.example", "web other", "*", "!web"} {
		t.Run(alias, func(t *testing.T) {
			e := newEnv(t)
			s := e.server(sshtest.Options{})
			cfg := filepath.Join(e.home, "config")
			writeFile(t, cfg, s.ConfigBlock("h1", e.key, "")+"    HostKeyAlias "+alias+"\n")
			o := e.opts()
			o.ConfigFile = cfg
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := NewDialer(o).Connect(ctx, Target{Host: "h1"})
			if err == nil {
				c.Close()
				t.Fatalf("HostKeyAlias %q was accepted, and known_hosts now reads %q", alias, readFile(t, e.knownHosts))
			}
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v, want a configuration error", err)
			}
			assertOneSentence(t, err, "HostKeyAlias", cfg)
			if kh := readFile(t, e.knownHosts); kh != "" {
				t.Errorf("known_hosts was written: %q", kh)
			}
		})
	}
}
