package sshtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Agent is a running OpenSSH ssh-agent.
type Agent struct {
	Socket string // its SSH_AUTH_SOCK
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartAgent starts a real ssh-agent on a socket in a temporary directory,
// loads keys into it with ssh-add, and stops it by pid when the test ends.
// The keys must not be encrypted (ssh-add would prompt).
func StartAgent(t testing.TB, keys ...*Key) *Agent {
	t.Helper()
	bin, err := exec.LookPath("ssh-agent")
	if err != nil {
		t.Fatal("sshtest: ssh-agent not found: install openssh-client")
	}
	sock := filepath.Join(TempDir(t), "agent.sock")
	cmd := exec.Command(bin, "-D", "-a", sock)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		t.Fatalf("sshtest: start ssh-agent: %v", err)
	}
	a := &Agent{Socket: sock, cmd: cmd, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(a.exited)
	}()
	t.Cleanup(a.stop)
	// Ready once it accepts a connection: ssh-agent binds the socket (the
	// file appears) before it listens, and a connection in between is
	// refused.
	deadline := time.Now().Add(startTimeout)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		select {
		case <-a.exited:
			t.Fatal("sshtest: ssh-agent exited at start")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshtest: ssh-agent did not listen on %s within %s", sock, startTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, k := range keys {
		a.Add(t, k)
	}
	return a
}

// Add loads k into the agent with ssh-add.
func (a *Agent) Add(t testing.TB, k *Key) {
	t.Helper()
	if k.Passphrase != "" {
		t.Fatalf("sshtest: cannot ssh-add the encrypted key %s without a prompt", k.Path)
	}
	cmd := exec.Command("ssh-add", "-q", k.Path)
	cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK="+a.Socket)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sshtest: ssh-add %s: %v: %s", k.Path, err, strings.TrimSpace(string(out)))
	}
}

func (a *Agent) stop() {
	a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(5 * time.Second):
		a.cmd.Process.Kill()
		<-a.exited
	}
}

// String names the agent by its socket.
func (a *Agent) String() string { return fmt.Sprintf("ssh-agent at %s", a.Socket) }
