package sshx

import (
	"errors"
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
