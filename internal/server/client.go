package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/usock"
	"github.com/rexconsole/rex/internal/version"
)

// ErrNoServer says no server runs for this user. Gone, when set, is the
// server that ran and ended without stopping (server.json was left).
type ErrNoServer struct {
	Gone *Info
}

func (e *ErrNoServer) Error() string {
	if e.Gone != nil {
		return e.Gone.GoneSentence()
	}
	return "no rex server runs for this user"
}

// GoneSentence says, in one sentence, that the server i was gone.
func (i Info) GoneSentence() string {
	s := fmt.Sprintf("the rex server (pid %d, started %s) was gone: it ended without being stopped, and what ran in it ended with it (rexd stops remote processes once their resume grace runs out)",
		i.Pid, i.StartedAt.Local().Format("Jan 2 15:04"))
	if i.Log != "" {
		s += "; its log is " + i.Log
	}
	return s
}

// VersionError refuses a server of another version.
type VersionError struct {
	Server HelloResult
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("the rex server that runs (pid %d) is rex %s (wire %d); this is rex %s (wire %d)",
		e.Server.Pid, e.Server.Version, e.Server.Wire, version.Version, Wire)
}

// Client is a connection to the server.
type Client struct {
	conn  *net.UnixConn
	enc   *protocol.Encoder
	dec   *protocol.Decoder
	Hello HelloResult

	mu     sync.Mutex
	nextID int64
}

// Dial connects to the server for this user, if one runs, and says
// hello. It returns *ErrNoServer when none runs, and a *VersionError
// (with the connection, to stop it) when it is another version.
func Dial(ctx context.Context, client string) (*Client, error) {
	d, err := OpenDir()
	if err != nil {
		return nil, err
	}
	defer d.Close()
	conn, err := d.Dial(ctx, SocketName)
	if err != nil {
		if usock.IsMissing(err) || usock.IsStale(err) {
			e := &ErrNoServer{}
			if i, ok := ReadInfo(d); ok {
				e.Gone = &i // it wrote server.json and did not remove it
			}
			return nil, e
		}
		return nil, fmt.Errorf("reach the rex server: %w", err)
	}
	c := &Client{conn: conn, enc: protocol.NewEncoder(conn), dec: protocol.NewDecoder(conn, 64<<20)}
	if err := c.call(ctx, MethodHello, HelloParams{Version: version.Version, Wire: Wire, Client: client}, &c.Hello); err != nil {
		conn.Close()
		return nil, err
	}
	if c.Hello.Version != version.Version || c.Hello.Wire != Wire {
		return c, &VersionError{Server: c.Hello}
	}
	return c, nil
}

// Forget removes what a server that is gone left (server.json, its
// socket); the next one starts clean.
func Forget() {
	if d, err := OpenDir(); err == nil {
		d.Remove(InfoName)
		d.Remove(SocketName)
		d.Close()
	}
}

// Close ends the connection.
func (c *Client) Close() error { return c.conn.Close() }

// call sends a request and reads its answer. A Client is used for one
// thing at a time (a call, or an attachment), so the next line read is
// the answer.
func (c *Client) call(ctx context.Context, method string, params, result any) error {
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.mu.Unlock()
	req, err := protocol.NewRequest(id, method, params)
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.conn.SetDeadline(dl)
		defer c.conn.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Now()) })
	defer stop()
	if err := c.enc.Encode(req); err != nil {
		return fmt.Errorf("rex server: %s: %w", method, err)
	}
	want := strconv.FormatInt(id, 10)
	for {
		line, err := c.dec.ReadLine()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("rex server: %s: the server closed the connection", method)
			}
			return fmt.Errorf("rex server: %s: %w", method, err)
		}
		m, perr := protocol.ParseMessage(line)
		if perr != nil || !m.IsResponse() || string(m.ID) != want {
			continue
		}
		if m.Error != nil {
			return m.Error
		}
		if result != nil {
			return json.Unmarshal(m.Result, result)
		}
		return nil
	}
}

// Status asks what runs.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.call(ctx, MethodStatus, nil, &st)
	return st, err
}

// Target asks for the console's current target.
func (c *Client) Target(ctx context.Context) (string, error) {
	var r TargetResult
	err := c.call(ctx, MethodTarget, nil, &r)
	return r.Target, err
}

// BusyError is Stop's refusal while work runs.
type BusyError struct {
	Status Status
}

func (e *BusyError) Error() string { return "work is running in the rex server" }

// Stop asks the server to stop and returns what ran in it, which the
// stop ends; without force it refuses with *BusyError while work runs.
func (c *Client) Stop(ctx context.Context, force bool) (Status, error) {
	var st Status
	err := c.call(ctx, MethodStop, StopParams{Force: force}, &st)
	var perr *protocol.Error
	if errors.As(err, &perr) && perr.Code == CodeBusy {
		json.Unmarshal(perr.Data, &st)
		return Status{}, &BusyError{Status: st}
	}
	return st, err
}

// WaitGone waits until the server's process has ended (its connection
// closes when it exits), bounded by ctx.
func (c *Client) WaitGone(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { c.conn.SetReadDeadline(time.Now()) })
	defer stop()
	for {
		if _, err := c.dec.ReadLine(); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("the rex server (pid %d) has not ended: %w", c.Hello.Pid, ctx.Err())
			}
			return nil
		}
	}
}

// Window is the client's terminal as Attach drives it.
type Window struct {
	In io.Reader // keystrokes, raw
	// StopIn, when set, makes a read of In that is in flight return (a
	// cancelreader's Cancel). Attach then returns only once nothing reads
	// In any more: a read left behind would take the next bytes the
	// terminal sends to whoever reads it after rex (a reply to a query, the
	// shell's first keystrokes).
	StopIn func()
	Out    io.Writer
	// Size reads the window's size; Resized brings a value when it changed.
	Size    func() (cols, rows int)
	Resized <-chan struct{}
	Env     []string
	Profile string
	Dir     string // the working directory (AttachParams.Dir)
}

// Attach attaches the window to the console until the server detaches it
// (or the console quits), and returns how it ended. ctx ending detaches.
func (c *Client) Attach(ctx context.Context, w Window) (Detach, error) {
	cols, rows := w.Size()
	if err := c.call(ctx, MethodAttach, AttachParams{Cols: cols, Rows: rows, Env: w.Env, Profile: w.Profile, Dir: w.Dir}, nil); err != nil {
		return Detach{}, err
	}
	done := make(chan struct{})
	defer close(done)
	reading := make(chan struct{})
	if w.StopIn != nil {
		defer func() {
			w.StopIn()
			// A key read just before may be on its way to a server that
			// no longer reads: it must not hold the reader up.
			c.conn.SetWriteDeadline(time.Now())
			<-reading
			c.conn.SetWriteDeadline(time.Time{})
		}()
	}
	// Keys and sizes go out on their own goroutines, straight to the
	// socket (no encoder's buffers: keys are at times a secret, a sudo
	// password typed into the console, which must stay in the server's
	// memory only); what to draw comes in on this one.
	var wmu sync.Mutex
	send := func(line []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_, err := c.conn.Write(line)
		return err
	}
	go func() {
		defer close(reading)
		buf := make([]byte, 32<<10)
		line := make([]byte, 0, inputLineLen(len(buf)))
		for {
			n, err := w.In.Read(buf)
			if n > 0 {
				line = appendInputLine(line[:0], buf[:n])
				werr := send(line)
				clear(buf[:n])
				clear(line)
				if werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		for {
			select {
			case <-w.Resized:
				cols, rows := w.Size()
				if m, err := protocol.NewNotification(MethodResize, ResizeParams{Cols: cols, Rows: rows}); err == nil {
					if b, err := json.Marshal(m); err == nil {
						send(append(b, '\n'))
					}
				}
			case <-ctx.Done():
				c.conn.CloseWrite() // the server detaches us
				return
			case <-done:
				return
			}
		}
	}()
	for {
		line, err := c.dec.ReadLine()
		if err != nil {
			return Detach{}, fmt.Errorf("the rex server (pid %d) closed the connection unexpectedly: %w", c.Hello.Pid, err)
		}
		if method, data, ok := parseOutput(line); ok && method == MethodOutput {
			if _, err := w.Out.Write(data); err != nil {
				return Detach{}, err
			}
			continue
		}
		m, perr := protocol.ParseMessage(line)
		if perr != nil || m.Method != MethodDetached {
			continue
		}
		var d Detach
		json.Unmarshal(m.Params, &d)
		return d, nil
	}
}

// The console.input notification around base64 keystrokes.
const (
	inputPrefix = `{"jsonrpc":"` + protocol.JSONRPC + `","method":"` + MethodInput + `","params":{"encoding":"` + protocol.EncodingBase64 + `","data":"`
	inputSuffix = "\"}}\n"
)

func inputLineLen(n int) int {
	return len(inputPrefix) + base64.StdEncoding.EncodedLen(n) + len(inputSuffix)
}

// appendInputLine appends the console.input line carrying b to dst,
// which has room for it: no copy of the keys outside dst.
func appendInputLine(dst, b []byte) []byte {
	dst = append(dst, inputPrefix...)
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, inputSuffix...)
}

// parseOutput reads a console.output line.
func parseOutput(line []byte) (string, []byte, bool) {
	var m struct {
		Method string     `json:"method"`
		Params DataParams `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method != MethodOutput {
		return "", nil, false
	}
	b, err := m.Params.Bytes()
	if err != nil {
		return "", nil, false
	}
	return m.Method, b, true
}
