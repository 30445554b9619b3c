package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/sshtest"
	"github.com/rexconsole/rex/internal/usock"
	"github.com/rexconsole/rex/internal/version"
)

// fakeConsole is a Console for the wire's tests: a target, a busy flag,
// and an attachment that echoes what it reads until it reads "detach".
type fakeConsole struct {
	mu      sync.Mutex
	target  string
	busy    bool
	stopped chan bool // force of each accepted Stop
}

func (f *fakeConsole) Attach(ctx context.Context, t *Terminal) Detach {
	fmt.Fprintf(t.Out, "hello %dx%d\n", t.Cols, t.Rows)
	r := bufio.NewReader(t.In)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return Detach{Reason: "the connection ended"}
		}
		if strings.TrimSpace(line) == "detach" {
			return Detach{Reason: "detached by the test"}
		}
		fmt.Fprintf(t.Out, "echo %s", line)
	}
}

func (f *fakeConsole) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := Status{Target: f.target}
	if f.busy {
		st.Tasks = []TaskStatus{{Command: "sleep 100", Targets: []string{"h1"}, Running: 1}}
	}
	return st
}

func (f *fakeConsole) Target() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.target
}

func (f *fakeConsole) Stop(force bool) (Status, bool) {
	st := f.Status()
	if !force && st.Busy() {
		return st, false
	}
	f.stopped <- force
	return st, true
}

// serve starts a server for this user in a private runtime directory
// and returns it with its console; it stops when the test ends.
func serve(t *testing.T) (*Listener, *fakeConsole) {
	t.Helper()
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	ln, err := Listen("")
	if err != nil {
		t.Fatal(err)
	}
	con := &fakeConsole{target: "web", stopped: make(chan bool, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ln.Serve(ctx, con) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		ln.Close()
	})
	return ln, con
}

// TestServerWire: hello, status, target, stop (refused while busy, then
// forced), and an attachment's bytes both ways until the server detaches
// the client; a second server for the same user is refused.
func TestServerWire(t *testing.T) {
	_, con := serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Dial(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Hello.Version != version.Version || c.Hello.Wire != Wire || c.Hello.Pid != os.Getpid() {
		t.Fatalf("hello: %+v", c.Hello)
	}
	if tg, err := c.Target(ctx); err != nil || tg != "web" {
		t.Fatalf("target: %q %v", tg, err)
	}
	con.mu.Lock()
	con.busy = true
	con.mu.Unlock()
	st, err := c.Status(ctx)
	if err != nil || st.Pid != os.Getpid() || len(st.Tasks) != 1 || !st.Busy() {
		t.Fatalf("status: %+v %v", st, err)
	}
	var busy *BusyError
	if _, err := c.Stop(ctx, false); !errors.As(err, &busy) || busy.Status.Tasks[0].Command != "sleep 100" {
		t.Fatalf("stop while busy: %v, want a refusal with what runs", err)
	}
	select {
	case <-con.stopped:
		t.Fatal("a refused stop stopped the console")
	default:
	}
	// A forced stop answers with what it ended, for rex server stop to say.
	if st, err := c.Stop(ctx, true); err != nil || len(st.Tasks) != 1 || st.Tasks[0].Command != "sleep 100" || st.Pid != os.Getpid() {
		t.Fatalf("stop --force: %+v %v, want what ran in it", st, err)
	}
	if force := <-con.stopped; !force {
		t.Fatal("stop --force arrived without force")
	}

	if _, err := Listen(""); !errors.Is(err, ErrRunning) {
		t.Fatalf("a second server: %v, want ErrRunning", err)
	}

	// An attachment: frames in, keys out, then the server detaches it.
	a, err := Dial(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	size := func() (int, int) { return 100, 30 }
	type result struct {
		d   Detach
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := a.Attach(ctx, Window{In: inR, Out: outW, Size: size})
		outW.Close()
		done <- result{d, err}
	}()
	out := bufio.NewReader(outR)
	if l, _ := out.ReadString('\n'); l != "hello 100x30\n" {
		t.Fatalf("first frame %q", l)
	}
	io.WriteString(inW, "ping\n")
	if l, _ := out.ReadString('\n'); l != "echo ping\n" {
		t.Fatalf("echo %q", l)
	}
	io.WriteString(inW, "detach\n")
	io.Copy(io.Discard, out)
	r := <-done
	if r.err != nil || r.d.Reason != "detached by the test" || r.d.Quit {
		t.Fatalf("detach: %+v %v", r.d, r.err)
	}
}

// TestServerDirectory: the directory is $XDG_RUNTIME_DIR/rex, else
// /tmp/rex-<uid> (under TMPDIR), made 0700; a symlink there, a directory
// of another owner, or one of a mode rex cannot fix is refused by the
// server and the client alike.
func TestServerDirectory(t *testing.T) {
	run := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", run)
	if got := DirPath(); got != filepath.Join(run, "rex") {
		t.Fatalf("DirPath %s", got)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_RUNTIME_DIR", "")
	// This machine's /run/user decides (TestServerDirectoryFallback tries
	// each case).
	want := dirPath("", "/run/user", os.Getuid())
	if got := DirPath(); got != want {
		t.Fatalf("DirPath without XDG_RUNTIME_DIR: %s, want %s", got, want)
	}
	ln, err := Listen("")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(want)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: %v %v", want, fi.Mode(), err)
	}
	if fi, err := os.Lstat(filepath.Join(want, SocketName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v %v", fi.Mode(), err)
	}
	ln.Close()
	os.RemoveAll(want)

	// A symlink planted where the directory goes (to a directory of ours,
	// 0700: only the link is wrong).
	target := t.TempDir()
	os.Chmod(target, 0o700)
	if err := os.Symlink(target, want); err != nil {
		t.Fatal(err)
	}
	refused := func(what, says string) {
		t.Helper()
		if _, err := Listen(""); !errors.Is(err, usock.ErrUnsafe) || !strings.Contains(err.Error(), says) {
			t.Fatalf("%s: Listen: %v, want a refusal saying %q", what, err, says)
		}
		if _, err := Dial(context.Background(), "test"); !errors.Is(err, usock.ErrUnsafe) || !strings.Contains(err.Error(), says) {
			t.Fatalf("%s: Dial: %v, want a refusal saying %q", what, err, says)
		}
	}
	refused("a symlink", "is a symlink")
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Fatalf("something was made through the symlink: %v", entries)
	}
	os.Remove(want)

	if os.Geteuid() != 0 {
		t.Fatal("the rest of this test needs root to give a directory to another uid (CI runs as root)")
	}
	os.Mkdir(want, 0o700)
	if err := os.Chown(want, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	refused("another owner", "belongs to uid 65534")
}

// TestServerRefusesOtherUser: a process of another uid that reaches the
// socket (the directory opened up for the test: it is 0700) is closed on
// before a byte is read or answered (SO_PEERCRED); this user's next
// client is served as before.
func TestServerRefusesOtherUser(t *testing.T) {
	other := sshtest.NewUser(t, sshtest.UserOptions{})
	ln, _ := serve(t)
	dir := ln.dir.Path()
	// As it is, the other user cannot even reach the socket.
	pub := sshtest.TempDir(t)
	os.Chmod(pub, 0o755)
	bin := filepath.Join(pub, "server.test")
	copyExe(t, os.Args[0], bin)
	cred := &syscall.Credential{Uid: uint32(other.UID), Gid: uint32(other.GID)}
	sock := filepath.Join(dir, SocketName)
	if got := dialAs(t, bin, cred, sock); !strings.HasPrefix(got, "dial:") || !strings.Contains(got, "permission denied") {
		t.Fatalf("another uid through the 0700 directory: %q, want permission denied", got)
	}
	// Opened up: it connects, and is hung up on unanswered.
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o711)
	}
	os.Chmod(sock, 0o666)
	if got := dialAs(t, bin, cred, sock); got != "answered:" {
		t.Fatalf("another uid on the socket: %q, want the connection closed unanswered", got)
	}
	os.Chmod(dir, 0o700)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Dial(ctx, "test")
	if err != nil {
		t.Fatalf("this user after the refusal: %v", err)
	}
	c.Close()
}

// dialAs runs this test binary as another uid to dial sock and say hello;
// it returns what the child reports: "dial: ERR" or "answered:LINE".
func dialAs(t *testing.T, bin string, cred *syscall.Credential, sock string) string {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), "REX_SERVER_TEST_DIAL="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the dialling child: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
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

func init() {
	if sock := os.Getenv("REX_SERVER_TEST_DIAL"); sock != "" {
		dialHelper(sock)
	}
}

// dialHelper is dialAs's child: it runs instead of the tests.
func dialHelper(sock string) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Println("dial:", err)
		os.Exit(0)
	}
	req, _ := protocol.NewRequest(1, MethodHello, HelloParams{Version: version.Version, Wire: Wire})
	enc := protocol.NewEncoder(c)
	enc.Encode(req)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	// Closed on: an end of file, or a reset when the hello was unread.
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		fmt.Println("read:", err)
		os.Exit(0)
	}
	fmt.Println("answered:" + strings.TrimSpace(line))
	os.Exit(0)
}

// stoppingConsole ends the server the moment a stop is accepted, as the
// console's own end does when it is quick.
type stoppingConsole struct {
	fakeConsole
	cancel context.CancelFunc
}

func (s *stoppingConsole) Stop(force bool) (Status, bool) {
	s.cancel()
	return Status{}, true
}

// TestServerStopAnswered: the client that asked for the stop reads its
// answer even when the stop closes every connection at once (CI saw
// "server.stop: the server closed the connection").
func TestServerStopAnswered(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	for i := range 100 {
		ln, err := Listen("")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		con := &stoppingConsole{cancel: cancel}
		served := make(chan error, 1)
		go func() { served <- ln.Serve(ctx, con) }()
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		c, err := Dial(dctx, "test")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Stop(dctx, false); err != nil {
			t.Fatalf("stop %d: %v, want its answer", i, err)
		}
		if err := c.WaitGone(dctx); err != nil {
			t.Fatal(err)
		}
		c.Close()
		dcancel()
		if err := <-served; err != nil {
			t.Fatalf("Serve: %v", err)
		}
		ln.Close()
	}
}

// A client's window is bounded: a 65535×65535 attach must not make the
// console lay out, and keep, four billion cells.
func TestAttachSizeIsBounded(t *testing.T) {
	serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := Dial(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	defer inW.Close()
	go func() {
		a.Attach(ctx, Window{In: inR, Out: outW, Size: func() (int, int) { return 65535, 65535 }})
		outW.Close()
	}()
	want := fmt.Sprintf("hello %dx%d\n", maxCols, maxRows)
	if l, _ := bufio.NewReader(outR).ReadString('\n'); l != want {
		t.Fatalf("first frame %q, want %q", l, want)
	}
}

// TestServerDirectoryFallback: without XDG_RUNTIME_DIR the directory is
// under /run/user/<uid> when that is this user's private directory (a
// login session's runtime directory), so that rex started with a minimal
// environment (an MCP client's `rex mcp`) finds the console the
// operator's shell started; anything else there falls back to TMPDIR.
func TestServerDirectoryFallback(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	uid := os.Getuid()
	fallback := filepath.Join(tmp, "rex-"+strconv.Itoa(uid))
	tests := []struct {
		name string
		make func(d string)
		want string // "" means the runtime directory's rex
	}{
		{"private", func(d string) { os.Mkdir(d, 0o700) }, ""},
		{"missing", func(string) {}, fallback},
		{"open to others", func(d string) { os.Mkdir(d, 0o755); os.Chmod(d, 0o755) }, fallback},
		{"a symlink", func(d string) {
			o := t.TempDir()
			os.Chmod(o, 0o700)
			os.Symlink(o, d)
		}, fallback},
		{"a file", func(d string) { os.WriteFile(d, nil, 0o700) }, fallback},
		{"another's", func(d string) { os.Mkdir(d, 0o700); os.Chown(d, 65534, 65534) }, fallback},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "another's" && os.Geteuid() != 0 {
				t.Fatal("this case needs root to give a directory to another uid (CI runs as root)")
			}
			runUser := t.TempDir()
			d := filepath.Join(runUser, strconv.Itoa(uid))
			tt.make(d)
			want := tt.want
			if want == "" {
				want = filepath.Join(d, "rex")
			}
			if got := dirPath("", runUser, uid); got != want {
				t.Errorf("dirPath: %s, want %s", got, want)
			}
			if got := dirPath("/x/run", runUser, uid); got != "/x/run/rex" {
				t.Errorf("dirPath with XDG_RUNTIME_DIR: %s", got)
			}
		})
	}
}
