package commands

import (
	"errors"
	"testing"

	"github.com/rexconsole/rex/internal/sshx"
)

// TestReachStatus: a device verb exits 255 when any target could not be
// reached (as rex run does), 1 when every failed target was reached and
// failed after logging in, 0 when none failed.
func TestReachStatus(t *testing.T) {
	kind := func(k error) error { return &sshx.Error{Kind: k, Msg: k.Error()} }
	for _, tc := range []struct {
		name string
		errs []error
		want int
	}{
		{"none failed", []error{nil, nil}, 0},
		{"refused", []error{nil, kind(sshx.ErrUnreachable)}, 255},
		{"timeout", []error{kind(sshx.ErrTimeout)}, 255},
		{"login", []error{kind(sshx.ErrAuth)}, 255},
		{"host key", []error{kind(sshx.ErrHostKeyChanged)}, 255},
		{"ssh_config", []error{kind(sshx.ErrConfig)}, 255},
		{"not an sshx error", []error{errors.New("resolve: no such host")}, 255},
		{"remote shell", []error{nil, kind(sshx.ErrBootstrap)}, 1},
		{"platform", []error{kind(sshx.ErrUnsupported)}, 1},
		{"sudo", []error{kind(sshx.ErrBecome)}, 1},
		{"reached and not", []error{kind(sshx.ErrBootstrap), kind(sshx.ErrUnreachable), kind(sshx.ErrNoCacheDir)}, 255},
	} {
		if got := reachStatus(tc.errs); got != tc.want {
			t.Errorf("%s: reachStatus = %d, want %d", tc.name, got, tc.want)
		}
	}
}
