package rexd_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/sshtest"
)

// rexdAs is a real `rexd --stdio` of the tests, run as cred (nil: as the
// test) with env, and how the network would drop it.
type rexdAs struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	exited chan struct{}
}

func startRexd(t *testing.T, cred *syscall.Credential, env []string, args ...string) *rexdAs {
	t.Helper()
	return startRexdBin(t, rexdBin, cred, env, args...)
}

func startRexdBin(t *testing.T, bin string, cred *syscall.Credential, env []string, args ...string) *rexdAs {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--stdio"}, args...)...)
	cmd.Env = env
	cmd.Stderr = os.Stderr
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &rexdAs{cmd: cmd, stdin: stdin, stdout: stdout, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-r.exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-r.exited
		}
	})
	return r
}

// Close drops the connection as a network does: both directions at once.
func (r *rexdAs) Close() error {
	r.stdin.Close()
	r.stdout.Close()
	return nil
}

// resumeEnv is the environment of a rexd whose caches and audit log live
// in dir.
func resumeEnv(dir, home string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CACHE_HOME=" + filepath.Join(dir, "cache"),
		"XDG_STATE_HOME=" + filepath.Join(dir, "state"),
	}
}

type outBuf struct {
	mu   sync.Mutex
	b    strings.Builder
	cond *sync.Cond
}

func newOutBuf() *outBuf { o := &outBuf{}; o.cond = sync.NewCond(&o.mu); return o }

func (o *outBuf) Write(p []byte) (int, error) {
	o.mu.Lock()
	o.b.Write(p)
	o.cond.Broadcast()
	o.mu.Unlock()
	return len(p), nil
}

func (o *outBuf) waitFor(t *testing.T, s string) {
	t.Helper()
	stop := time.AfterFunc(30*time.Second, func() { o.mu.Lock(); o.cond.Broadcast(); o.mu.Unlock() })
	defer stop.Stop()
	deadline := time.Now().Add(30 * time.Second)
	o.mu.Lock()
	defer o.mu.Unlock()
	for !strings.Contains(o.b.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %q in %q", s, o.b.String())
		}
		o.cond.Wait()
	}
}

// TestResumeThroughAnotherRexd: the rexd that held a connection lost its
// stdin (as over SSH, where the channel is gone): it keeps the session,
// and a new `rexd --stdio` relays session.resume and everything after to
// it over the session's socket. The output written meanwhile comes once.
func TestResumeThroughAnotherRexd(t *testing.T) {
	dir := sshtest.TempDir(t)
	root := t.TempDir()
	env := resumeEnv(dir, root)
	r1 := startRexd(t, nil, env, "--root", root)
	c := rexclient.NewConn(r1.stdout, r1.stdin, r1)
	ctx := context.Background()
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "test", ResumeGraceMS: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Resumable() {
		t.Fatalf("not resumable: %s", s.Info.ResumeError)
	}
	sock := filepath.Join(dir, "cache", "rexd", "sessions", s.ID+".sock")
	if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the session's socket %s: %v", sock, err)
	}
	if fi, err := os.Lstat(filepath.Dir(sock)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the session directory: %v %v", fi.Mode(), err)
	}
	gate := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	out := newOutBuf()
	argv := []string{"sh", "-c", `i=0; while [ $i -lt 300 ]; do i=$((i+1)); echo line-$i; done; read x < "$1"; ` +
		`while [ $i -lt 600 ]; do i=$((i+1)); echo line-$i; done`, "gated", gate}
	p, err := s.Exec(ctx, protocol.ExecStartParams{Argv: argv}, rexclient.ExecOptions{Stdout: out})
	if err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "line-300\n")
	dropped := c.Dropped()
	r1.Close()
	<-dropped
	os.WriteFile(gate, []byte("go\n"), 0o600)

	r2 := startRexd(t, nil, env, "--root", root)
	if err := c.Resume(ctx, r2.stdout, r2.stdin, r2); err != nil {
		t.Fatalf("resume through a second rexd: %v", err)
	}
	exit, err := p.Wait(ctx)
	if err != nil || exit.ExitCode == nil || *exit.ExitCode != 0 {
		t.Fatalf("exit: %+v %v", exit, err)
	}
	got := strings.Fields(out.b.String())
	if len(got) != 600 || got[0] != "line-1" || got[599] != "line-600" {
		t.Fatalf("%d lines: %v … %v", len(got), got[:3], got[len(got)-3:])
	}
	for i, l := range got {
		if l != fmt.Sprintf("line-%d", i+1) {
			t.Fatalf("line %d is %s", i+1, l)
		}
	}
	// Closing the client closes the session: both rexds end.
	c.Close()
	for _, r := range []*rexdAs{r1, r2} {
		select {
		case <-r.exited:
		case <-time.After(20 * time.Second):
			t.Fatal("a rexd did not end after the session closed")
		}
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the socket is left behind: %v", err)
	}
}

// TestResumeFromAnotherUserIsRefused: a resume token is bound to the user
// the session runs as. Another user's rexd finds no such session in its
// own directory, refuses a directory that is not its own, and a process of
// another uid that reaches the socket is turned away before a byte is read
// (SO_PEERCRED).
func TestResumeFromAnotherUserIsRefused(t *testing.T) {
	other := sshtest.NewUser(t, sshtest.UserOptions{})
	dir := sshtest.TempDir(t)
	os.Chmod(dir, 0o755)
	root := t.TempDir()
	env := resumeEnv(dir, root)
	r1 := startRexd(t, nil, env, "--root", root)
	c := rexclient.NewConn(r1.stdout, r1.stdin, r1)
	ctx := context.Background()
	raw := &struct{ token string }{}
	// A raw session.open: rexclient keeps its tokens out of reach.
	var res protocol.SessionOpenResult
	if err := c.Call(ctx, protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "raw", ResumeGraceMS: 60_000}, &res); err != nil || res.ResumeToken == "" {
		t.Fatalf("open: %v %s", err, res.ResumeError)
	}
	defer c.Call(ctx, protocol.MethodSessionClose, protocol.SessionRef{SessionID: res.SessionID}, nil)
	raw.token = res.ResumeToken
	cred := &syscall.Credential{Uid: uint32(other.UID), Gid: uint32(other.GID)}
	// The other user runs a copy of rexd (and of this test binary) it may
	// execute.
	pub := sshtest.TempDir(t)
	os.Chmod(pub, 0o755)
	rexdPub, testPub := filepath.Join(pub, "rexd"), filepath.Join(pub, "rexd.test")
	copyExe(t, rexdBin, rexdPub)
	copyExe(t, os.Args[0], testPub)
	resume := func(env []string) *protocol.Error {
		t.Helper()
		r := startRexdBin(t, rexdPub, cred, env, "--root", other.Home)
		c2 := rexclient.NewConn(r.stdout, r.stdin, r)
		defer c2.Close()
		err := c2.Call(ctx, protocol.MethodSessionResume, protocol.SessionResumeParams{SessionID: res.SessionID, ResumeToken: raw.token}, nil)
		var perr *protocol.Error
		if !errors.As(err, &perr) {
			t.Fatalf("resume as another user: %v, want a refusal", err)
		}
		return perr
	}
	// Its own directory: no such session.
	if perr := resume(resumeEnv(other.Home, other.Home)); !strings.Contains(perr.Message, "unknown session") {
		t.Fatalf("in its own directory: %s", perr.Message)
	}
	// Pointed at ours: refused, it is not its directory.
	theirs := resumeEnv(other.Home, other.Home)
	theirs[2] = "XDG_CACHE_HOME=" + filepath.Join(dir, "cache")
	if perr := resume(theirs); !strings.Contains(perr.Message, "cannot look for session") {
		t.Fatalf("in our directory: %s", perr.Message)
	}
	// Straight at the socket (the directory opened up for the test): the
	// connection is closed unanswered, and the audit log says so.
	sessions := filepath.Join(dir, "cache", "rexd", "sessions")
	for _, d := range []string{filepath.Join(dir, "cache"), filepath.Join(dir, "cache", "rexd"), sessions} {
		os.Chmod(d, 0o711)
	}
	os.Chmod(filepath.Join(sessions, res.SessionID+".sock"), 0o666) // it is 0600
	answer := dialAs(t, testPub, cred, filepath.Join(sessions, res.SessionID+".sock"), res.SessionID, raw.token)
	if answer != "" {
		t.Fatalf("another uid got an answer on the socket: %q", answer)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "state", "rexd", "audit.log"))
	if !strings.Contains(string(b), `"event":"session.resume_refused"`) || !strings.Contains(string(b), fmt.Sprintf("uid %d", other.UID)) {
		t.Fatalf("the audit log does not record the refusal:\n%s", b)
	}
	if strings.Contains(string(b), raw.token) {
		t.Fatal("the token is in the audit log")
	}
}

func copyExe(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// dialAs connects to sock as cred (a child process: this test binary in
// helper mode) and sends a session.resume; it returns the first line that
// came back, "" when the connection was closed unanswered.
func dialAs(t *testing.T, bin string, cred *syscall.Credential, sock, sid, token string) string {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), "REXD_TEST_DIAL="+sock, "REXD_TEST_SID="+sid, "REXD_TEST_TOKEN="+token)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the dialling child: %v: %s", err, out)
	}
	got := strings.TrimSpace(string(out))
	if !strings.HasPrefix(got, "dialled:") {
		t.Fatalf("the child could not dial: %s", got)
	}
	return strings.TrimPrefix(got, "dialled:")
}

func init() {
	if os.Getenv("REXD_TEST_DIAL") != "" {
		dialHelper()
	}
}

// dialHelper is the child of dialAs: it runs instead of the tests when
// REXD_TEST_DIAL is set.
func dialHelper() {
	sock := os.Getenv("REXD_TEST_DIAL")
	c, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Println("dial:", err)
		os.Exit(0)
	}
	req, _ := protocol.NewRequest(1, protocol.MethodSessionResume, protocol.SessionResumeParams{
		SessionID: os.Getenv("REXD_TEST_SID"), ResumeToken: os.Getenv("REXD_TEST_TOKEN")})
	b, _ := json.Marshal(req)
	c.Write(append(b, '\n'))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	fmt.Println("dialled:" + strings.TrimSpace(line))
	os.Exit(0)
}
