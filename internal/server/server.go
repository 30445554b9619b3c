package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/usock"
	"github.com/rexconsole/rex/internal/version"
)

// Names in the server's directory.
const (
	SocketName = "server.sock"
	InfoName   = "server.json"
	lockName   = "server.lock"
)

// DirPath is where the server's socket lives: $XDG_RUNTIME_DIR/rex; else,
// when /run/user/<uid> is this user's private directory (what login
// sessions set XDG_RUNTIME_DIR to), /run/user/<uid>/rex; else
// /tmp/rex-<uid>.
func DirPath() string {
	return dirPath(os.Getenv("XDG_RUNTIME_DIR"), "/run/user", os.Getuid())
}

// dirPath is DirPath with the runtime directories of the login sessions
// under runUser. Without it, a process started with a minimal environment
// (an MCP client's `rex mcp` gets HOME, PATH, USER and little more) looked
// in /tmp/rex-<uid>, missed the console that the operator's shell started
// under XDG_RUNTIME_DIR, and ran on local.
func dirPath(xdg, runUser string, uid int) string {
	if filepath.IsAbs(xdg) {
		return filepath.Join(xdg, "rex")
	}
	if d := filepath.Join(runUser, strconv.Itoa(uid)); privateDir(d, uid) {
		return filepath.Join(d, "rex")
	}
	return filepath.Join(os.TempDir(), "rex-"+strconv.Itoa(uid))
}

// privateDir reports whether d is a directory (not a symlink) of uid's
// with mode 0700.
func privateDir(d string, uid int) bool {
	fi, err := os.Lstat(d)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}

// OpenDir opens the server's directory, made 0700 and checked (never
// through a symlink, this user's, mode 0700): a client and the server
// both refuse one that fails.
func OpenDir() (*usock.Dir, error) {
	d, err := usock.OpenPrivate(DirPath())
	if err != nil {
		return nil, fmt.Errorf("the rex server's directory: %w", err)
	}
	return d, nil
}

// Info is server.json: who runs the server, for the next rex to tell when
// it is gone.
type Info struct {
	Pid       int       `json:"pid"`
	Version   string    `json:"version"`
	StartedAt time.Time `json:"started_at"`
	Log       string    `json:"log,omitempty"`
}

// ReadInfo reads server.json; ok is false when there is none.
func ReadInfo(d *usock.Dir) (Info, bool) {
	b, err := d.ReadFile(InfoName)
	if err != nil {
		return Info{}, false
	}
	var i Info
	if json.Unmarshal(b, &i) != nil {
		return Info{}, false
	}
	return i, true
}

// ErrRunning is returned by Listen when a server already runs.
var ErrRunning = errors.New("a rex server already runs for this user")

// Listener is the server's socket, held with its lock.
type Listener struct {
	dir     *usock.Dir
	ln      *net.UnixListener
	lock    *os.File
	started time.Time

	once     sync.Once
	stopping atomic.Bool
}

// Listen takes the server's lock and socket and writes server.json. Only
// one server runs per user: a second one gets ErrRunning. log names the
// server's log for server.json.
func Listen(log string) (*Listener, error) {
	d, err := OpenDir()
	if err != nil {
		return nil, err
	}
	lock, err := lockDir(d)
	if err != nil {
		d.Close()
		return nil, err
	}
	// Whatever socket is there belongs to a server that is gone: the lock
	// was free.
	d.Remove(SocketName)
	ln, err := d.Listen(SocketName)
	if err != nil {
		lock.Close()
		d.Close()
		return nil, err
	}
	l := &Listener{dir: d, ln: ln, lock: lock, started: time.Now().UTC()}
	b, _ := json.Marshal(Info{Pid: os.Getpid(), Version: version.Version, StartedAt: l.started, Log: log})
	if err := d.WriteFile(InfoName, b); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// lockDir takes server.lock (flock): held for the server's life, so two
// rex starting a server at once end with one.
func lockDir(d *usock.Dir) (*os.File, error) {
	fd, err := unix.Openat(int(dirFd(d)), lockName, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", filepath.Join(d.Path(), lockName), err)
	}
	f := os.NewFile(uintptr(fd), lockName)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, ErrRunning
		}
		return nil, fmt.Errorf("lock %s: %w", filepath.Join(d.Path(), lockName), err)
	}
	return f, nil
}

// StopAccepting stops taking clients: the socket, server.json and the
// lock go, so that the next rex starts a fresh server while this one
// finishes stopping. Clients attached keep their connections.
func (l *Listener) StopAccepting() {
	l.once.Do(func() {
		l.stopping.Store(true)
		l.ln.Close()
		l.dir.Remove(SocketName)
		l.dir.Remove(InfoName)
		l.lock.Close()
	})
}

// Close stops accepting and releases the directory.
func (l *Listener) Close() error {
	l.StopAccepting()
	return l.dir.Close()
}

// StartedAt is when the server started.
func (l *Listener) StartedAt() time.Time { return l.started }

// Console is what the server serves: the console's engine.
type Console interface {
	// Attach runs a client's terminal until it detaches (ctx ends when
	// the client goes away) or the console quits, and says how it ended.
	Attach(ctx context.Context, t *Terminal) Detach
	// Status says what runs.
	Status() Status
	// Target is the console's current target.
	Target() string
	// Stop ends the console and everything in it; without force it
	// refuses while work runs, with the Status that says what.
	Stop(force bool) (Status, bool)
}

// Terminal is an attached client's terminal as the console sees it.
type Terminal struct {
	// In is the client's keystrokes, Out where its frames go.
	In  io.Reader
	Out io.Writer
	// Cols and Rows are its size when it attached; Resizes brings the
	// next ones.
	Cols, Rows int
	Env        []string
	Profile    string
	Dir        string // the client's working directory; empty: unknown
	resizes    chan ResizeParams
}

// Resizes are the client's window sizes after the first.
func (t *Terminal) Resizes() <-chan ResizeParams { return t.resizes }

// maxCols and maxRows bound the window a client may ask for: the console
// lays out and keeps a frame of that many cells for it, and terminal panes
// emulate screens that size. A larger window sees the frame cut.
const (
	maxCols = 2000
	maxRows = 1000
)

// Serve accepts clients until ctx ends. A peer of another uid is refused
// before anything is read from it.
func (l *Listener) Serve(ctx context.Context, c Console) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	var mu sync.Mutex
	open := map[*serverConn]bool{}
	go func() {
		<-ctx.Done()
		l.ln.Close()
		// Clients waiting for the server to end (rex server stop) see
		// their connection close; attached ones first get the news of
		// their detachment.
		mu.Lock()
		conns := make([]*serverConn, 0, len(open))
		for sc := range open {
			conns = append(conns, sc)
		}
		mu.Unlock()
		// One deadline for all: a timer's channel fires once, so the
		// clients after the first that timed out would wait for good (one
		// that reads nothing is told only once its connection closes).
		deadline := time.Now().Add(detachNewsWait)
		for _, sc := range conns {
			if wait := time.Until(deadline); sc.attached.Load() && wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-sc.told:
				case <-t.C:
				}
				t.Stop()
			}
			sc.replying.Lock()
			sc.conn.Close()
			sc.replying.Unlock()
		}
	}()
	for {
		conn, err := l.ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if l.stopping.Load() {
				<-ctx.Done() // the clients still attached stay until then
				return nil
			}
			return fmt.Errorf("rex server: accept: %w", err)
		}
		if err := usock.SameUser(conn); err != nil {
			fmt.Fprintf(os.Stderr, "rex server: refused a connection: %v\n", err)
			conn.Close()
			continue
		}
		sc := &serverConn{l: l, c: c, conn: conn, told: make(chan struct{})}
		mu.Lock()
		open[sc] = true
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				mu.Lock()
				delete(open, sc)
				mu.Unlock()
				conn.Close()
			}()
			sc.serve(ctx)
		}()
	}
}

// detachNewsWait bounds how long a stopping server waits for attached
// clients to be told that they are detached.
const detachNewsWait = 3 * time.Second

// serverConn is one client's connection.
type serverConn struct {
	l    *Listener
	c    Console
	conn *net.UnixConn
	enc  *protocol.Encoder
	// attached is set once the client attached; told is closed once it
	// was sent console.detached.
	attached atomic.Bool
	told     chan struct{}
	// replying is held from server.stop's decision until its reply is
	// written: the stop it starts closes every connection, and the
	// client that asked must read its answer first.
	replying sync.Mutex
}

func (s *serverConn) reply(m *protocol.Message, res any, perr *protocol.Error) {
	if perr != nil {
		s.enc.Encode(protocol.NewErrorResponse(m.ID, perr))
		return
	}
	if r, err := protocol.NewResponse(m.ID, res); err == nil {
		s.enc.Encode(r)
	}
}

func (s *serverConn) serve(ctx context.Context) {
	s.enc = protocol.NewEncoder(s.conn)
	dec := protocol.NewDecoder(s.conn, 1<<20)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var term *Terminal
	var input *io.PipeWriter
	defer func() {
		if input != nil {
			input.Close()
		}
	}()
	for {
		line, err := dec.ReadLine()
		if err != nil {
			return // the client is gone: an attachment ends (ctx)
		}
		m, perr := protocol.ParseMessage(line)
		if perr != nil {
			continue
		}
		if term != nil {
			// Attached: only the terminal's notifications.
			switch m.Method {
			case MethodInput:
				var p DataParams
				if json.Unmarshal(m.Params, &p) != nil {
					continue
				}
				if b, err := p.Bytes(); err == nil && len(b) > 0 {
					if _, err := input.Write(b); err != nil {
						return
					}
				}
			case MethodResize:
				var p ResizeParams
				if json.Unmarshal(m.Params, &p) == nil && p.Cols > 0 && p.Rows > 0 {
					p.Cols, p.Rows = min(p.Cols, maxCols), min(p.Rows, maxRows)
					select {
					case term.resizes <- p:
					case <-ctx.Done():
						return
					}
				}
			}
			continue
		}
		if !m.IsRequest() {
			continue
		}
		switch m.Method {
		case MethodHello:
			s.reply(m, HelloResult{Version: version.Version, Wire: Wire, Pid: os.Getpid(), StartedAt: s.l.started}, nil)
		case MethodStatus:
			st := s.c.Status()
			st.Pid, st.Version, st.StartedAt = os.Getpid(), version.Version, s.l.started
			s.reply(m, st, nil)
		case MethodTarget:
			s.reply(m, TargetResult{Target: s.c.Target()}, nil)
		case MethodStop:
			var p StopParams
			json.Unmarshal(m.Params, &p)
			s.replying.Lock()
			st, ok := s.c.Stop(p.Force)
			st.Pid, st.Version, st.StartedAt = os.Getpid(), version.Version, s.l.started
			if !ok {
				s.reply(m, nil, protocol.Errorf(CodeBusy, st, "work is running in the rex server; stop it with force"))
			} else {
				s.reply(m, st, nil) // what the stop ended
			}
			s.replying.Unlock()
		case MethodAttach:
			var p AttachParams
			if json.Unmarshal(m.Params, &p) != nil || p.Cols <= 0 || p.Rows <= 0 {
				s.reply(m, nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "console.attach needs the terminal's cols and rows"))
				continue
			}
			p.Cols, p.Rows = min(p.Cols, maxCols), min(p.Rows, maxRows)
			s.attached.Store(true)
			s.reply(m, struct{}{}, nil)
			pr, pw := io.Pipe()
			input = pw
			term = &Terminal{In: pr, Out: &outputWriter{enc: s.enc}, Cols: p.Cols, Rows: p.Rows, Env: p.Env, Profile: p.Profile,
				Dir: p.Dir, resizes: make(chan ResizeParams, 8)}
			go func() {
				d := s.c.Attach(ctx, term)
				pr.Close()
				if n, err := protocol.NewNotification(MethodDetached, d); err == nil {
					s.enc.Encode(n)
				}
				close(s.told)
				// The client closes once it has read the news; the
				// read side then ends this connection (or its deadline).
				s.conn.CloseWrite()
				s.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				cancel()
			}()
		default:
			s.reply(m, nil, protocol.Errorf(protocol.CodeMethodNotFound, nil, "method %q not found", m.Method))
		}
	}
}

// outputWriter sends what the console draws as console.output.
type outputWriter struct {
	enc *protocol.Encoder
}

func (w *outputWriter) Write(p []byte) (int, error) {
	n, err := protocol.NewNotification(MethodOutput, NewData(p))
	if err != nil {
		return 0, err
	}
	if err := w.enc.Encode(n); err != nil {
		return 0, err
	}
	return len(p), nil
}

// dirFd is the directory's descriptor, for the lock next to the socket.
func dirFd(d *usock.Dir) uintptr { return d.Fd() }
