// Package rexclient is the Go client of REXD v1: concurrent calls matched by
// id over any byte stream, events routed to the process they belong to in
// order and without loss, Process and PTY handles, and a local transport
// that runs `rexd --stdio` as a subprocess.
package rexclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/rexconsole/rex/internal/protocol"
)

// ErrClosed is returned by calls on a client whose connection has ended.
var ErrClosed = errors.New("connection to rexd closed")

// Client is a connection to one rexd.
type Client struct {
	enc    *protocol.Encoder
	closer io.Closer

	mu      sync.Mutex
	nextID  int64
	pending map[string]*call
	routes  map[string]*route // by process_id
	err     error             // why the connection ended
	done    chan struct{}

	// Resumable sessions (resume.go): the connection outlives its
	// transport while it has some.
	resumable map[string]*Session // by session id
	transport chan struct{}       // closed when the current transport ends
	dropped   error               // why it ended, while waiting for Resume
	closing   bool                // Close or Abandon was called
	kills     []pendingKill       // asked for while dropped; sent on Resume
	back      chan struct{}       // while dropped: closed once resumed
	// Set by tests: dropHook runs at the end of drop, resumeHook in
	// Resume once rexd has answered, before the connection is settled.
	dropHook, resumeHook func()
	// Set by tests: writeHook runs on writeWithin's goroutine before
	// the write begins.
	writeHook func()

	// Counters of bytes on the wire, for tests and benchmarks.
	bytesIn counter
	// bufs holds output buffers (*[]byte) for routes that reuse them
	// (ExecOptions.Reuse), by size class (bufClass).
	bufs     bufPools
	bytesOut counter
}

type call struct {
	resp chan *protocol.Message
	// onResult runs on the reader before the next message is read, so a
	// process is routed before its first event can arrive.
	onResult func(json.RawMessage)
	// onAbandon undoes a call whose caller gave up before the reply came
	// (Exec, OpenPTY: stop what was started); it runs on its own goroutine
	// with the late successful result. abandoned is guarded by Client.mu.
	onAbandon func(json.RawMessage)
	abandoned bool
}

// New starts a client on rwc. Closing the client closes rwc.
func New(rwc io.ReadWriteCloser) *Client {
	return NewConn(rwc, rwc, rwc)
}

// NewConn starts a client reading r and writing w; closer is closed by
// Close. It may be nil when the caller owns r and w: the connection then
// ends at Close or at a failed write without waiting for rexd, and rexd
// sees the end of its input (stopping what was not detached) only when
// the caller closes w.
func NewConn(r io.Reader, w io.Writer, closer io.Closer) *Client {
	c := &Client{
		closer:    closer,
		pending:   map[string]*call{},
		routes:    map[string]*route{},
		done:      make(chan struct{}),
		resumable: map[string]*Session{},
	}
	c.start(r, w)
	return c
}

// start reads r and writes w from now on: the first transport, or the
// one Resume brings.
func (c *Client) start(r io.Reader, w io.Writer) {
	enc := protocol.NewEncoder(&countingWriter{w: w, n: &c.bytesOut})
	transport := make(chan struct{})
	c.mu.Lock()
	c.enc, c.transport = enc, transport
	c.mu.Unlock()
	go c.readLoop(protocol.NewDecoder(&countingReader{r: r, n: &c.bytesIn}, 0), enc, transport)
}

// encoder is the current transport's writer.
func (c *Client) encoder() *protocol.Encoder {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.enc
}

// BytesIn is the number of bytes read from rexd so far.
func (c *Client) BytesIn() int64 { return c.bytesIn.load() }

// BytesOut is the number of bytes sent to rexd so far.
func (c *Client) BytesOut() int64 { return c.bytesOut.load() }

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err says why the connection ended; nil while it is up.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Idle reports whether nothing is under way on the connection: no
// process or PTY whose end has not been seen, no request unanswered. An
// idle rexd has nothing to clean up when its input ends, so its transport
// may be cut without waiting for it to confirm.
func (c *Client) Idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.routes) == 0 && len(c.pending) == 0 && len(c.resumable) == 0
}

// Close ends the connection. Processes that were not detached are stopped by
// rexd when it sees the end of its input.
func (c *Client) Close() error {
	c.closeResumable()
	c.mu.Lock()
	c.closing = true
	closer, dropped := c.closer, c.dropped != nil
	c.mu.Unlock()
	var err error
	if closer != nil {
		err = closer.Close()
	}
	// With no closer nothing here can end the transport, and rexd would
	// end its output only when it sees the end of its input: the
	// connection ends now instead of waiting for that.
	if dropped || closer == nil {
		c.end(ErrClosed)
	}
	<-c.done
	return err
}

func (c *Client) readLoop(dec *protocol.Decoder, enc *protocol.Encoder, transport chan struct{}) {
	var err error
	for {
		var line []byte
		line, err = dec.ReadLine()
		if err != nil {
			break
		}
		if method, ev, n, ok, ferr := protocol.ParseRawOutputLine(line, protocol.MaxRawOutput); ok {
			if errors.Is(ferr, protocol.ErrRawOutputTooLarge) {
				err = fmt.Errorf("rexd broke the protocol: %w", ferr)
				break
			}
			r := c.routeOf(ev.ProcessID)
			data, buf, rerr := c.readPayload(dec, r, n)
			if rerr != nil {
				err = rerr
				break
			}
			if ferr != nil {
				continue // skipped whole, as an unreadable line is; rexd never sends one
			}
			if ev.SessionSeq != 0 && !c.seen(ev.SessionID, ev.SessionSeq, len(line)+n) {
				continue
			}
			r.deliverOutput(method, ev, data, buf)
			continue
		}
		if method, ev, data, ok := protocol.ParseOutputEvent(line); ok {
			if ev.SessionSeq != 0 && !c.seen(ev.SessionID, ev.SessionSeq, len(line)) {
				continue
			}
			c.routeOf(ev.ProcessID).deliverOutput(method, ev, data, nil)
			continue
		}
		msg, perr := protocol.ParseMessage(line)
		if perr != nil {
			continue // a line we cannot read is dropped; rexd never sends one
		}
		switch {
		case msg.IsResponse():
			c.mu.Lock()
			cl := c.pending[string(msg.ID)]
			delete(c.pending, string(msg.ID))
			abandoned := cl != nil && cl.abandoned
			c.mu.Unlock()
			if cl == nil {
				continue
			}
			if abandoned {
				if msg.Error == nil {
					go cl.onAbandon(msg.Result)
				}
				continue
			}
			if cl.onResult != nil && msg.Error == nil {
				cl.onResult(msg.Result)
			}
			cl.resp <- msg
		case msg.IsNotification():
			if sid, seq := eventSeq(msg); seq != 0 && !c.seen(sid, seq, len(line)) {
				continue
			}
			c.route(msg)
		}
	}
	if err == io.EOF || err == nil {
		err = ErrClosed
	} else {
		err = fmt.Errorf("%w: %v", ErrClosed, err)
	}
	// The transport's end is told after the connection's state is
	// settled: dropped (waiting for Resume or Abandon; drop tells it) or
	// ended.
	if c.drop(err, transport) {
		return
	}
	c.end(err)
	close(transport)
}

// end fails every call and process: the connection is over.
func (c *Client) end(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	// Closed with err set, under the lock: whoever sees the error sees
	// Done closed too.
	close(c.done)
	pending := c.pending
	c.pending = map[string]*call{}
	routes := c.routes
	c.routes = map[string]*route{}
	c.mu.Unlock()
	for _, cl := range pending {
		cl.resp <- nil
	}
	for _, r := range routes {
		r.lost(err)
	}
}

// Call sends a request and decodes its result into result (which may be
// nil). A REXD error comes back as *protocol.Error.
//
// When ctx ends first, Call returns ctx.Err() and tells rexd, with
// $/cancelRequest, to stop working on the request (rexd still answers it;
// the answer is dropped). A reply that was already on its way wins. ctx
// bounds the write too: a transport that takes no more bytes (a peer that
// stopped reading, a dead link whose SSH window is full) does not hold
// the caller past it, and a request whose write had not begun is not sent.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	return c.call(ctx, method, params, result, nil, nil)
}

// Notify sends a notification (a request that gets no answer).
func (c *Client) Notify(method string, params any) error {
	m, err := protocol.NewNotification(method, params)
	if err == nil {
		err = c.encoder().Encode(m)
	}
	if err != nil {
		return fmt.Errorf("send %s: %w", method, err)
	}
	return nil
}

func (c *Client) call(ctx context.Context, method string, params, result any, onResult, onAbandon func(json.RawMessage)) error {
	return c.callOn(ctx, nil, method, params, result, onResult, onAbandon)
}

// callOn is call on the transport of enc (Resume's requests, before the
// connection is back), or on the current one when enc is nil.
func (c *Client) callOn(ctx context.Context, enc *protocol.Encoder, method string, params, result any, onResult, onAbandon func(json.RawMessage)) error {
	sent, err := c.send(ctx, enc, method, params, onResult, onAbandon)
	if err != nil {
		return err
	}
	return c.await(ctx, sent, result)
}

// sent is a request on the wire whose answer has not been read yet.
type sent struct {
	cl     *call
	key    string
	id     json.RawMessage // as sent
	method string
}

// send writes a request without waiting for its answer (await does), so
// several can go out in one flight. ctx bounds the write (see Call); a
// frame's bytes (frameRequest) must not change until the write is over,
// which may be after send has given up on it.
func (c *Client) send(ctx context.Context, enc *protocol.Encoder, method string, params any, onResult, onAbandon func(json.RawMessage)) (*sent, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("send %s: %w", method, err)
	}
	cl := &call{resp: make(chan *protocol.Message, 1), onResult: onResult, onAbandon: onAbandon}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	if enc == nil && c.dropped != nil {
		err := c.dropped
		c.mu.Unlock()
		return nil, err
	}
	if enc == nil {
		enc = c.enc
	}
	c.nextID++
	id := c.nextID
	key := strconv.FormatInt(id, 10)
	c.pending[key] = cl
	c.mu.Unlock()

	reqID := json.RawMessage(key)
	var write func() error
	if fr, ok := params.(frameRequest); ok {
		// A raw frame (rawCASPut): its line, then the bytes, not copied.
		line, data := fr.AppendFrame(nil, id)
		write = func() error { return enc.WriteFrame(line, data) }
	} else if lr, ok := params.(lineRequest); ok {
		// Bulk data (cas.put) writes its own line: no reflection, no copy.
		line := lr.AppendRequest(nil, id, method)
		write = func() error { return enc.WriteLine(line) }
	} else {
		msg, err := protocol.NewRequest(id, method, params)
		if err != nil {
			c.forget(key)
			return nil, fmt.Errorf("send %s: %w", method, err)
		}
		reqID = msg.ID
		write = func() error { return enc.Encode(msg) }
	}
	err := c.writeWithin(ctx, write, func(err error) {
		// The caller gave up while the request was being written. Its
		// pending entry, if any is left, goes with the transport's end.
		if err != nil {
			c.writeFailed(enc, err)
			return
		}
		c.Notify(protocol.MethodCancelRequest, protocol.CancelParams{ID: reqID})
	})
	switch {
	case err == nil:
	case errors.Is(err, errNotWritten):
		c.forget(key)
		return nil, fmt.Errorf("send %s: %w", method, ctx.Err())
	case errors.Is(err, errWriteLate):
		if c.giveUp(key, cl) {
			return nil, fmt.Errorf("send %s: %w", method, ctx.Err())
		}
		// The answer came while the write was being finished: it wins,
		// as in await.
	default:
		c.forget(key)
		return nil, fmt.Errorf("send %s: %w", method, c.writeFailed(enc, err))
	}
	return &sent{cl: cl, key: key, id: reqID, method: method}, nil
}

// forget drops the pending entry of a request that will get no answer,
// for send's caller alone: nobody awaits it.
func (c *Client) forget(key string) {
	c.mu.Lock()
	delete(c.pending, key)
	c.mu.Unlock()
}

// giveUp is the caller leaving a request it sent: it reports false when
// the answer has been read already (it wins, so nothing started on the
// caller's behalf is left without an owner). Otherwise the answer is
// dropped when it comes, after its onAbandon undoes what it started.
func (c *Client) giveUp(key string, cl *call) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, waiting := c.pending[key]; !waiting {
		return false
	}
	if cl.onAbandon != nil {
		cl.abandoned = true // the reader undoes it when the reply comes
	} else {
		delete(c.pending, key)
	}
	return true
}

var (
	errNotWritten = errors.New("the request was not written")
	errWriteLate  = errors.New("the request is still being written")
)

// writeWithin runs write (one whole frame) and waits for it no longer
// than ctx. When ctx ends first it returns errNotWritten if the write had
// not begun (it never will), or errWriteLate if it had: the frame is then
// finished in the background (a frame cut short would break the stream)
// and late gets the write's result.
func (c *Client) writeWithin(ctx context.Context, write func() error, late func(error)) error {
	if ctx.Done() == nil {
		return write()
	}
	const (
		waiting = iota
		writing
		written
		left // the caller gave up during the write
	)
	var state atomic.Int32
	done := make(chan error, 1)
	go func() {
		if c.writeHook != nil {
			c.writeHook()
		}
		if !state.CompareAndSwap(waiting, writing) {
			return
		}
		err := write()
		if !state.CompareAndSwap(writing, written) {
			late(err)
			return
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	if state.CompareAndSwap(waiting, left) {
		return errNotWritten
	}
	if state.CompareAndSwap(writing, left) {
		return errWriteLate
	}
	return <-done // written just now
}

// writeFailed takes a failed write on enc's transport for its end: the
// caller's error says the connection is lost (ErrDropped while sessions
// wait to be resumed, else ErrClosed), and the current transport is
// closed so that its reader ends it (dropped or ended) instead of
// leaving a connection that looks alive but can carry no request.
func (c *Client) writeFailed(enc *protocol.Encoder, err error) error {
	c.mu.Lock()
	closer, transport := c.closer, c.transport
	current := enc == c.enc
	closing := c.closing // Close closed it (the likely cause): once is enough
	resumable := len(c.resumable) > 0
	c.mu.Unlock()
	if current && closer == nil {
		// Nothing here can end the transport for its reader to see (the
		// caller owns it): the connection ends now, resumable or not,
		// instead of looking up with no way to carry a request.
		err = fmt.Errorf("%w: %v", ErrClosed, err)
		c.end(err)
		return err
	}
	if current && !closing {
		go closer.Close() // it may wait for the transport's end
	}
	if resumable {
		if current {
			// Until the reader has dropped it, the connection looks up:
			// a caller waiting for the resume (callResumed) would retry
			// at once on this dead transport, over and over.
			<-transport
		}
		return fmt.Errorf("%w: %v", ErrDropped, err)
	}
	return fmt.Errorf("%w: %v", ErrClosed, err)
}

// await waits for the answer to a sent request and decodes its result.
// When ctx ends first, rexd is told to stop working on it (and a call
// with onAbandon undoes what its late answer started).
func (c *Client) await(ctx context.Context, s *sent, result any) error {
	cl, key, reqID, method := s.cl, s.key, s.id, s.method
	var resp *protocol.Message
	select {
	case resp = <-cl.resp:
	case <-ctx.Done():
		if c.giveUp(key, cl) {
			// On its own goroutine: a transport that takes no more bytes
			// must not hold the caller past ctx.
			go c.Notify(protocol.MethodCancelRequest, protocol.CancelParams{ID: reqID})
			return ctx.Err()
		}
		// The reader has the reply already: it wins, so nothing started
		// on the caller's behalf is left without an owner.
		resp = <-cl.resp
	}
	if resp == nil {
		return c.callErr()
	}
	if resp.Error != nil {
		return resp.Error
	}
	if result != nil {
		if err := json.Unmarshal(resp.Result, result); err != nil {
			return fmt.Errorf("decode %s result: %w", method, err)
		}
	}
	return nil
}

// lineRequest is params that write their whole request line themselves
// (protocol.CASPutRequest).
type lineRequest interface {
	AppendRequest(dst []byte, id int64, method string) []byte
}

// frameRequest is params sent as a line followed by raw bytes
// (protocol.CapCASRaw).
type frameRequest interface {
	AppendFrame(dst []byte, id int64) (line []byte, data [][]byte)
}

// route hands an event to the process it names.
func (c *Client) route(msg *protocol.Message) {
	var ev Event
	var pid string
	switch msg.Method {
	case protocol.EventExecStdout, protocol.EventExecStderr, protocol.EventPTYOutput:
		var o protocol.OutputEvent
		if json.Unmarshal(msg.Params, &o) != nil {
			return
		}
		data, err := o.Bytes()
		if err != nil {
			return
		}
		c.routeOf(o.ProcessID).deliverOutput(msg.Method, o, data, nil)
		return
	case protocol.EventExecExit, protocol.EventPTYExit:
		var x protocol.ExitEvent
		if json.Unmarshal(msg.Params, &x) != nil {
			return
		}
		if x.Signal != nil && !protocol.ValidSignal(*x.Signal) {
			unknown := "?" // every front end prints it: never a host's raw text
			x.Signal = &unknown
		}
		ev, pid = Event{Kind: Exit, Exit: &x}, x.ProcessID
	case protocol.EventExecError:
		var e protocol.ErrorEvent
		if json.Unmarshal(msg.Params, &e) != nil {
			return
		}
		ev, pid = Event{Kind: Error, Err: &e}, e.ProcessID
	default:
		return
	}
	c.mu.Lock()
	r := c.routes[pid]
	if ev.Kind == Exit {
		delete(c.routes, pid)
	}
	c.mu.Unlock()
	if r != nil {
		r.deliver(ev)
	}
}

// maxEvent is the most output rexd puts in one event.
const maxEvent = 256 << 10

// bufPools keeps reused output buffers in size classes of powers of two,
// from 4 KiB to maxEvent: an event is read into the smallest that holds
// it, so the events queued for a slow consumer hold less than twice their
// bytes (one size for all, 256 KiB, made 32 hosts' queues of 80 KB
// events 3 times their size).
type bufPools [7]sync.Pool

const minBufShift = 12 // 4 KiB, the smallest class

// bufClass is the index of the smallest class that holds n bytes.
func bufClass(n int) int {
	c := 0
	for n > 1<<(minBufShift+c) {
		c++
	}
	return c
}

func (b *bufPools) get(n int) *[]byte {
	c := bufClass(n)
	if p, _ := b[c].Get().(*[]byte); p != nil {
		return p
	}
	s := make([]byte, 1<<(minBufShift+c))
	return &s
}

func (b *bufPools) put(p *[]byte) { b[bufClass(cap(*p))].Put(p) }

// readPayload reads the n bytes of a raw output frame for route r (nil
// when no process takes it): into a buffer from c.bufs (returned as buf)
// when the route reuses them, else into a new slice.
func (c *Client) readPayload(dec *protocol.Decoder, r *route, n int) (data []byte, buf *[]byte, err error) {
	if r == nil || !r.reuse || n > maxEvent {
		data, err = dec.ReadRaw(n)
		return data, nil, err
	}
	buf = c.bufs.get(n)
	data = (*buf)[:n]
	if err := dec.ReadRawInto(data); err != nil {
		return nil, nil, err
	}
	return data, buf, nil
}

// routeOf is the route of process pid, or nil.
func (c *Client) routeOf(pid string) *route {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.routes[pid]
}

// deliverOutput hands an output event to r's process (none when r is
// nil); buf, when set, is the reused buffer data lies in, returned once
// the event is handled.
func (r *route) deliverOutput(method string, o protocol.OutputEvent, data []byte, buf *[]byte) {
	if r == nil {
		return
	}
	kind := Stdout
	switch method {
	case protocol.EventExecStderr:
		kind = Stderr
	case protocol.EventPTYOutput:
		kind = PTYOutput
	}
	r.deliver(Event{Kind: kind, Seq: o.Seq, Data: data, buf: buf})
}

func (c *Client) addRoute(pid string, r *route) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		go r.lost(c.err)
		return
	}
	c.routes[pid] = r
}

type counter struct {
	mu sync.Mutex
	n  int64
}

func (c *counter) add(n int) {
	c.mu.Lock()
	c.n += int64(n)
	c.mu.Unlock()
}

func (c *counter) load() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

type countingReader struct {
	r io.Reader
	n *counter
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n.add(n)
	return n, err
}

type countingWriter struct {
	w io.Writer
	n *counter
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.n.add(n)
	return n, err
}
