package sshtest

import (
	"strings"
	"testing"
)

// A server whose port another process already listens on must fail to
// start, not pass for ready because the other one accepts: parallel test
// binaries share the loopback ports, and a free port is only free until
// someone takes it.
func TestStartOnATakenPortFails(t *testing.T) {
	other := Start(t, Options{HostKeyTypes: []string{"ed25519"}})
	s, err := start(t, Options{Port: other.Port, HostKeyTypes: []string{"ed25519"}})
	if err == nil {
		s.Stop()
		t.Fatalf("a second sshd on port %d, which another sshd holds, was reported ready", other.Port)
	}
	if !strings.Contains(err.Error(), "Address already in use") {
		t.Errorf("error does not say why: %v", err)
	}
}
