package sshx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/sshtest"
)

// procOf reads a process's parent and nice value from /proc.
func procOf(t *testing.T, pid int) (ppid, nice int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ppid, _ = strconv.Atoi(f[1])
	nice, _ = strconv.Atoi(f[16])
	return ppid, nice
}

// TestLaneHasItsOwnConnection: a bulk lane runs over an SSH connection of
// its own (its own sshd process, so its data never sits ahead of a
// keystroke in the terminal's TCP stream or sshd), dialled without asking
// anything again (the passphrase and the host key were settled by the
// first connection), and its rexd and sshd run at a lower CPU priority,
// while the terminal's keep theirs.
func TestLaneHasItsOwnConnection(t *testing.T) {
	e := newEnv(t)
	key := sshtest.NewEncryptedKey(t, "ed25519", "open sesame")
	s := sshtest.Start(t, sshtest.Options{Authorized: []*sshtest.Key{key}})
	var mu sync.Mutex
	var asked []string
	o := e.opts()
	o.StrictHostKeys = "ask"
	o.KnownHostsFile = os.DevNull // nothing to record the key in: only the pin stops a second question
	o.AskHostKey = func(_ context.Context, q HostKeyQuestion) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, "host key")
		return true, nil
	}
	o.Passphrase = func(path string) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, "passphrase")
		return []byte("open sesame"), nil
	}
	c := connect(t, NewDialer(o), Target{Name: "h1", Host: s.Host, Port: s.Port, User: s.User, KeyPath: key.Path})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rc, sess, err := c.Lane(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	mu.Lock()
	if len(asked) != 2 {
		t.Errorf("asked %v, want the host key and the passphrase once each", asked)
	}
	mu.Unlock()

	rexdPid := func(s *rexclient.Session) int {
		var out strings.Builder
		p, err := s.Exec(ctx, protocol.ExecStartParams{Argv: []string{"sh", "-c", "echo $PPID"}}, rexclient.ExecOptions{Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		p.Wait(ctx)
		pid, err := strconv.Atoi(strings.TrimSpace(out.String()))
		if err != nil {
			t.Fatalf("rexd's pid: %q", out.String())
		}
		return pid
	}
	_, base := procOf(t, os.Getpid())
	mainSSHD, mainNice := procOf(t, rexdPid(c.Session))
	laneSSHD, laneNice := procOf(t, rexdPid(sess))
	if mainSSHD == laneSSHD {
		t.Errorf("the lane's rexd runs under the terminal's sshd (pid %d): it shares its connection", mainSSHD)
	}
	_, mainSSHDNice := procOf(t, mainSSHD)
	_, laneSSHDNice := procOf(t, laneSSHD)
	if mainNice != base || mainSSHDNice != base {
		t.Errorf("the connection's rexd and sshd run at nice %d and %d, want %d", mainNice, mainSSHDNice, base)
	}
	want, _ := strconv.Atoi(LaneNice)
	if laneNice < want || laneSSHDNice < want {
		t.Errorf("the lane's rexd and sshd run at nice %d and %d, want at least %d", laneNice, laneSSHDNice, want)
	}

	// The lane's connection ends with its rexd.
	sshdGone := func(pid int) bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return err != nil
	}
	rc.Close()
	for deadline := time.Now().Add(30 * time.Second); !sshdGone(laneSSHD); {
		if time.Now().After(deadline) {
			t.Fatalf("the lane's sshd (pid %d) still runs after the lane closed", laneSSHD)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, code := runOn(t, c, "echo", "still here"); code != 0 || out != "still here\n" {
		t.Errorf("after the lane closed: %q, exit %d", out, code)
	}
}

// TestLanePinsTheHostKey: the lane's second connection accepts only the
// host key the first one verified, without known_hosts or a question.
func TestLanePinsTheHostKey(t *testing.T) {
	a := sshtest.NewKey(t, "ed25519").Public
	b := sshtest.NewKey(t, "ed25519").Public
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}
	e := &endpoint{name: "h1", host: "127.0.0.1", port: 22, pin: a}
	h := &hostKeyChecker{e: e}
	if err := h.check("", addr, a); err != nil || e.key == nil {
		t.Fatalf("the pinned key was refused: %v", err)
	}
	e.key = nil
	err := h.check("", addr, b)
	if !errors.Is(err, ErrHostKeyChanged) || e.key != nil {
		t.Fatalf("another key: %v, want a changed-key refusal", err)
	}
	if !strings.Contains(err.Error(), "second connection") {
		t.Errorf("the refusal does not say what happened: %v", err)
	}
}
