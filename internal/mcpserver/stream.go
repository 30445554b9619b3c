package mcpserver

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rexconsole/rex/internal/toolset"
)

// Bounds of what streams to the client. The result keeps the head and
// tail of every host's output whatever happens here; the stream is a view.
const (
	// maxPending bounds output waiting to be sent: a client that reads
	// slower than the hosts write loses the excess from the stream (and
	// is told how much), never from the result.
	maxPending = 64 << 10
	// maxPartial cuts a line that has no end yet.
	maxPartial = 4 << 10
	// minGap spaces notifications so a fast command sends a few batches
	// a second, not one message per chunk.
	minGap = 100 * time.Millisecond
)

// stream carries one call's output to the client while it runs: lines as
// the hosts write them ("h2: line" on a group), each host's end ("h3:
// exit 1"), and a move to the background. They go as progress
// notifications while a request with a progress token waits on the call
// (the call itself, or a job_output on its job), and as log messages
// (logger "rex", or "rex/<job id>" once in the background) for as long
// as the command runs.
type stream struct {
	se     *session
	output bool // stream the hosts' output, not only their ends
	kick   chan struct{}
	ended  chan struct{}

	mu      sync.Mutex
	pending []byte
	dropped int64
	partial map[string][]byte
	multi   bool
	done    bool
	job     string
	// token is the progress token of the request waiting on the output,
	// nil when none does; tokCtx is that request's context.
	token  any
	tokCtx context.Context
	// logCtx carries the log level of the request (newer protocol
	// versions send it per request) until the call returns.
	logCtx context.Context
	n      float64

	// sendMu makes sends one at a time, so a request's last progress
	// notification is out before its result.
	sendMu sync.Mutex
}

func (se *session) newStream(ctx context.Context, req *mcp.CallToolRequest, t toolset.Tool) *stream {
	st := &stream{se: se, output: jobMaker(t), kick: make(chan struct{}, 1), ended: make(chan struct{}),
		partial: map[string][]byte{}, token: req.Params.GetProgressToken(), tokCtx: ctx, logCtx: ctx}
	go st.run()
	return st
}

// event takes a toolset event; it is called from several goroutines.
func (st *stream) event(ev toolset.Event) {
	st.mu.Lock()
	switch ev.Kind {
	case toolset.EventStart:
		st.multi = len(ev.Hosts) > 1
	case toolset.EventOutput:
		if st.output {
			st.lines(ev.Host, ev.Data)
		}
	case toolset.EventHostDone:
		st.flushPartial(ev.Host)
		if st.multi || !ev.OK {
			st.add(fmt.Sprintf("%s: %s\n", ev.Host, ev.Status))
		}
	case toolset.EventBackground:
		st.job = ev.JobID
		st.add(fmt.Sprintf("still running: it goes on in the background as job %s\n", ev.JobID))
		st.se.mu.Lock()
		st.se.streams[ev.JobID] = st
		st.se.mu.Unlock()
	case toolset.EventDone:
		for h := range st.partial {
			st.flushPartial(h)
		}
		st.done = true
		if st.job != "" {
			st.se.mu.Lock()
			delete(st.se.streams, st.job)
			st.se.mu.Unlock()
		}
	}
	st.mu.Unlock()
	select {
	case st.kick <- struct{}{}:
	default:
	}
}

// lines adds a host's output, whole lines only; the rest waits for its
// end of line. Callers hold mu.
func (st *stream) lines(host string, data []byte) {
	buf := append(st.partial[host], data...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		st.line(host, buf[:i])
		buf = buf[i+1:]
	}
	if len(buf) > maxPartial {
		st.line(host, buf)
		buf = nil
	}
	st.partial[host] = append([]byte(nil), buf...)
}

func (st *stream) flushPartial(host string) {
	if p := st.partial[host]; len(p) > 0 {
		st.line(host, p)
	}
	delete(st.partial, host)
}

func (st *stream) line(host string, l []byte) {
	l = bytes.TrimSuffix(l, []byte{'\r'})
	if st.multi {
		st.add(host + ": " + string(l) + "\n")
		return
	}
	st.add(string(l) + "\n")
}

// add queues text, or counts it dropped beyond maxPending.
func (st *stream) add(s string) {
	if len(st.pending)+len(s) > maxPending {
		st.dropped += int64(len(s))
		return
	}
	st.pending = append(st.pending, s...)
}

// run sends what queued, at most one batch per minGap, until the call's
// events end or the client goes.
func (st *stream) run() {
	defer close(st.ended)
	for {
		select {
		case <-st.kick:
		case <-st.se.ctx.Done():
			return
		}
		last := st.send()
		if last {
			return
		}
		select {
		case <-time.After(minGap):
		case <-st.se.ctx.Done():
			return
		}
	}
}

// send sends what queued; it reports whether the stream is over.
func (st *stream) send() bool {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	st.mu.Lock()
	text := string(st.pending)
	if st.dropped > 0 {
		text += fmt.Sprintf("… %d bytes of output not streamed (the client reads slower than the hosts write); the result keeps the head and tail\n", st.dropped)
	}
	st.pending, st.dropped = nil, 0
	token, tokCtx, logCtx := st.token, st.tokCtx, st.logCtx
	logger := "rex"
	if st.job != "" {
		logger = "rex/" + st.job
	}
	if text != "" && token != nil {
		st.n++
	}
	n, over := st.n, st.done
	st.mu.Unlock()
	if text == "" {
		return over
	}
	text = text[:len(text)-1] // the last newline
	if token != nil {
		// A client that went away gets nothing more; errors change nothing.
		_ = st.se.ss.NotifyProgress(tokCtx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: n, Message: text})
	}
	_ = st.se.ss.Log(logCtx, &mcp.LoggingMessageParams{Level: "info", Logger: logger, Data: text})
	return over
}

// detach sends what queued to the request that is about to be answered,
// then stops sending it progress: notifications for a token end with its
// request. Log messages go on while a command of the call runs in the
// background; a call that left none ends its stream.
func (st *stream) detach() {
	st.send()
	st.sendMu.Lock()
	st.mu.Lock()
	st.token, st.tokCtx, st.logCtx = nil, nil, st.se.ctx
	st.done = st.done || st.job == ""
	st.mu.Unlock()
	st.sendMu.Unlock()
	select {
	case st.kick <- struct{}{}:
	default:
	}
}

// attach sends the stream's progress to another request's token: a
// job_output waiting on a background job.
func (st *stream) attach(ctx context.Context, token any) {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done {
		return
	}
	st.token, st.tokCtx, st.logCtx = token, ctx, ctx
	// Say at once that the wait began: the client sees the call is alive.
	st.add(fmt.Sprintf("waiting for job %s\n", st.job))
	select {
	case st.kick <- struct{}{}:
	default:
	}
}
