package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/sshx"
)

type report struct {
	src    Source
	state  string
	err    error
	target string
}

func TestContacts(t *testing.T) {
	refused := &sshx.Error{Target: "h1", Kind: sshx.ErrUnreachable, Msg: "connect h1 (127.0.0.1:9): connection refused; is sshd running there?",
		Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	auth := &sshx.Error{Target: "h1", Kind: sshx.ErrAuth, Msg: "log in to h1 as root: no key was accepted"}
	cancelled := &sshx.Error{Target: "h1", Kind: sshx.ErrTimeout, Msg: "connect h1: canceled", Err: context.Canceled}
	tests := []struct {
		name    string
		reports []report
		want    State
		label   string
	}{
		{"never reached", nil, Idle, "idle"},
		{"dial in flight", []report{{FromPool, fanout.StateConnecting, nil, ""}}, Connecting, "connecting"},
		{"pool dial through ssh, ready", []report{
			{FromPool, fanout.StateConnecting, nil, ""}, {FromSSH, sshx.StateConnecting, nil, ""},
			{FromSSH, sshx.StateBootstrapping, nil, ""}, {FromSSH, sshx.StateReady, nil, ""}, {FromPool, fanout.StateReady, nil, ""},
		}, Ready, "ready"},
		{"bootstrapping while in flight", []report{
			{FromPool, fanout.StateConnecting, nil, ""}, {FromSSH, sshx.StateConnecting, nil, ""}, {FromSSH, sshx.StateBootstrapping, nil, ""},
		}, Bootstrapping, "bootstrapping"},
		// The bug this board fixes: a check's dial that failed left the
		// sidebar saying connecting forever.
		{"a check that was refused", []report{
			{FromSSH, sshx.StateConnecting, nil, ""}, {FromSSH, sshx.StateFailed, refused, ""},
		}, Unreachable, "unreachable: connection refused"},
		{"refused through the pool too", []report{
			{FromPool, fanout.StateConnecting, nil, ""}, {FromSSH, sshx.StateConnecting, nil, ""},
			{FromSSH, sshx.StateFailed, refused, ""}, {FromPool, fanout.StateError, refused, ""},
		}, Unreachable, "unreachable: connection refused"},
		{"auth", []report{{FromSSH, sshx.StateConnecting, nil, ""}, {FromSSH, sshx.StateFailed, auth, ""}}, AuthFailed, "auth failed"},
		{"a cancelled dial is no contact", []report{
			{FromSSH, sshx.StateConnecting, nil, ""}, {FromSSH, sshx.StateReady, nil, ""},
			{FromSSH, sshx.StateConnecting, nil, ""}, {FromSSH, sshx.StateFailed, cancelled, ""},
		}, Ready, "ready"},
		{"an idle close keeps the last contact", []report{
			{FromPool, fanout.StateConnecting, nil, ""}, {FromPool, fanout.StateReady, nil, ""}, {FromPool, fanout.StateIdle, nil, ""},
		}, Ready, "ready"},
		{"a lost connection", []report{
			{FromPool, fanout.StateConnecting, nil, ""}, {FromPool, fanout.StateReady, nil, ""},
			{FromPool, fanout.StateError, fmt.Errorf("connection to h1 lost: %v", errors.New("EOF")), ""},
		}, Unreachable, "unreachable: connection lost"},
		{"one source's end does not end another's dial", []report{
			{FromSSH, sshx.StateConnecting, nil, ""}, {FromPool, fanout.StateError, refused, ""},
		}, Connecting, "connecting"},
		{"a report about another target", []report{{FromPool, fanout.StateConnecting, nil, "h2"}}, Idle, "idle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changes := 0
			c := NewContacts(func() time.Time { return time.Unix(100, 0) }, func() { changes++ })
			for _, r := range tt.reports {
				target := r.target
				if target == "" {
					target = "h1"
				}
				c.Report(r.src, target, r.state, r.err)
			}
			got := c.Get("h1")
			if got.State != tt.want || got.Label() != tt.label {
				t.Errorf("state %q (%q), want %q (%q)", got.State, got.Label(), tt.want, tt.label)
			}
			if changes != len(tt.reports) {
				t.Errorf("%d change calls for %d reports", changes, len(tt.reports))
			}
			if got.State.Failure() && got.Err == "" {
				t.Error("a failure without its sentence")
			}
		})
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		err    error
		state  State
		reason string
	}{
		{&sshx.Error{Kind: sshx.ErrHostKeyChanged, Msg: "the host key of h1 changed"}, HostKeyChanged, ""},
		{&sshx.Error{Kind: sshx.ErrTimeout, Msg: "connect h1: no answer within 10s", Err: context.DeadlineExceeded}, Unreachable, "no answer"},
		{&sshx.Error{Kind: sshx.ErrUnreachable, Msg: "x", Err: &net.DNSError{Err: "no such host", Name: "nosuch"}}, Unreachable, "unknown host"},
		{fmt.Errorf("connect h1: %w", &sshx.Error{Kind: sshx.ErrUnsupported, Msg: "h1 runs plan9"}), Failed, "platform not supported"},
		{errors.New("dial tcp 10.0.0.9:2222: connect: connection refused"), Unreachable, "connection refused"},
		{errors.New("something else"), Failed, ""},
		{context.Canceled, "", ""},
	}
	for _, tt := range tests {
		st, reason := Classify(tt.err)
		if st != tt.state || reason != tt.reason {
			t.Errorf("Classify(%v) = %q, %q; want %q, %q", tt.err, st, reason, tt.state, tt.reason)
		}
	}
}
