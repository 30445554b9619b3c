package sshx

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/rexconsole/rex/internal/sshtest"
)

// TestCertAuthorityUncertifiedHost: a host that known_hosts trusts only
// through a @cert-authority line but that has no certificate is refused
// under every policy, in one sentence that says so and gives the line that
// would trust its plain key; never as a "changed" key with ssh-keygen -R
// for a host that was never recorded. With that line added it is let in.
func TestCertAuthorityUncertifiedHost(t *testing.T) {
	ca := sshtest.NewKey(t, "ed25519")
	for _, policy := range []string{"accept-new", "no", "yes"} {
		t.Run(policy, func(t *testing.T) {
			e := newEnv(t)
			s := e.server(sshtest.Options{})
			caLine := sshtest.CertAuthorityLine(ca)
			writeFile(t, e.knownHosts, caLine+"\n")
			o := e.opts()
			o.StrictHostKeys = policy
			err, _ := dialErr(t, NewDialer(o), e.target("h1", s))
			if !errors.Is(err, ErrHostKeyUnknown) {
				t.Fatalf("error %v, want an unknown host key", err)
			}
			name := sshtest.KnownHostsName(s.Addr)
			var line string
			for _, l := range s.KnownHostsLines(false) {
				if strings.HasSuffix(err.Error(), l) {
					line = l
				}
			}
			assertOneSentence(t, err, "h1", name, "@cert-authority", ssh.FingerprintSHA256(s.HostKeys[0]), e.knownHosts)
			if strings.Contains(err.Error(), "ssh-keygen -R") {
				t.Errorf("error tells to remove a host key that was never recorded: %v", err)
			}
			if got := readFile(t, e.knownHosts); got != caLine+"\n" {
				t.Errorf("known_hosts changed: %q", got)
			}
			if l := s.LogLines("Accepted publickey"); len(l) != 0 {
				t.Errorf("the uncertified host got a login: %v", l)
			}
			if line == "" {
				t.Fatalf("error %q does not end with a known_hosts line for the key it names", err)
			}
			// The line it gives lets the host in, strictly.
			writeFile(t, e.knownHosts, caLine+"\n"+line+"\n")
			o.StrictHostKeys = "yes"
			c := connect(t, NewDialer(o), e.target("h1", s))
			if out, code := runOn(t, c, "echo", "in"); out != "in\n" || code != 0 {
				t.Errorf("echo: %q exit %d", out, code)
			}
		})
	}
}

// TestCertAuthorityWrongAuthority: a host whose certificate no
// @cert-authority line trusts is refused in one sentence that names the
// host as rex reached it, never a port it did not use.
func TestCertAuthorityWrongAuthority(t *testing.T) {
	signer, other := sshtest.NewKey(t, "ed25519"), sshtest.NewKey(t, "ed25519")
	e := newEnv(t)
	s := e.server(sshtest.Options{HostCA: signer})
	writeFile(t, e.knownHosts, sshtest.CertAuthorityLine(other)+"\n")
	err, _ := dialErr(t, NewDialer(e.opts()), e.target("h1", s))
	if !errors.Is(err, ErrHostKeyChanged) {
		t.Fatalf("error %v, want a refused host key", err)
	}
	assertOneSentence(t, err, "h1", sshtest.KnownHostsName(s.Addr), "@cert-authority", e.knownHosts)
	if strings.Contains(err.Error(), ":22") {
		t.Errorf("the refusal names port 22, which rex did not use (%s): %v", s.Addr, err)
	}
	if l := s.LogLines("Accepted publickey"); len(l) != 0 {
		t.Errorf("the host got a login: %v", l)
	}
}
