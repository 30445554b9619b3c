package sshx

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"unicode"

	"github.com/rexconsole/rex/internal/sshtest"
)

// TestRemoteTextInErrorsIsPrintable: what a target prints is not trusted,
// and rex's error sentences quote its stderr and the paths it reports; a
// host must not be able to send escape sequences (a window title, OSC 52
// to the clipboard) to the operator's terminal through them.
func TestRemoteTextInErrorsIsPrintable(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{Extra: []string{
		`ForceCommand printf '\033]0;owned\007\033[2Jboom\r\n' >&2; exit 1`,
	}})
	err, _ := dialErr(t, NewDialer(e.opts()), e.target("h1", s))
	if !errors.Is(err, ErrBootstrap) {
		t.Fatalf("error %v, want a failed bootstrap", err)
	}
	assertOneSentence(t, err, "h1", "boom")
	for _, r := range err.Error() {
		if unicode.IsControl(r) {
			t.Fatalf("error carries control character %U from the target: %q", r, err.Error())
		}
	}
}

// TestStampsStayBoundedPerAccount: the stamps file remembers the rexd a
// target says it ran ("rexd-exec PATH STAT"), and every later boot script
// for that account carries all of them as known= arguments. What a target
// prints is not trusted: one that names a new path each time (or simply
// every rex version, each in its own directory) must not grow the file and
// the command line without end. At most 32 are kept per account.
func TestStampsStayBoundedPerAccount(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{Extra: []string{
		`ForceCommand echo "rexd-exec /nonexistent/$$/v-0123456789ab/rexd 1:2:3:4:5"; exit 1`,
	}})
	o := e.opts()
	o.StampsFile = filepath.Join(e.home, "stamps.json")
	d := NewDialer(o)
	for range 40 {
		dialErr(t, d, e.target("h1", s))
	}
	var m map[string]map[string]string
	if err := json.Unmarshal([]byte(readFile(t, o.StampsFile)), &m); err != nil {
		t.Fatal(err)
	}
	for account, paths := range m {
		if len(paths) > 32 {
			t.Errorf("account %q has %d stamps after 40 connections, want at most 32", account, len(paths))
		}
	}
	if n := len(d.knownArgs(s.User+"@"+s.Addr+" h1", nil)); n > 32 {
		t.Errorf("the boot script gets %d known= arguments, want at most 32", n)
	}
}

// TestClaimedPlatformMustBeOneRexCarries: a target that claims a cache
// directory (exit 3, rexd-dir) for a platform rex has no build of (a
// hostile or broken shell; the real script exits 4 then) is told apart as
// an unsupported platform, in words that name it, not sent into the
// upload with an empty build.
func TestClaimedPlatformMustBeOneRexCarries(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{Extra: []string{
		`ForceCommand printf 'rexd-uname Plan9 mips\nrexd-dir /tmp\n'; exit 3`,
	}})
	err, _ := dialErr(t, NewDialer(e.opts()), e.target("h1", s))
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("error %v, want an unsupported platform", err)
	}
	assertOneSentence(t, err, "h1", "Plan9 mips")
}
