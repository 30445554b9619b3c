package protocol

import (
	"errors"
	"fmt"
	"strconv"
)

// Raw output frames (capability "output.raw"): output is most of the bytes
// rexd sends, and a JSON string costs an escaping pass in rexd and an
// unescaping pass in the client for every byte (base64 a third more bytes
// besides). A client that asks for CapOutputRaw in session.open gets the
// session's output events with their bytes after the line, as they are:
//
//	{"jsonrpc":"2.0","method":"exec.stdout","params":{"raw_bytes":6,"session_id":"s_1","process_id":"p_1","seq":3}}\n
//	<6 bytes>
//
// The line must start exactly so, up to and including raw_bytes' number
// and the comma after it (RawOutputLen): that prefix alone says how many
// bytes follow, so the stream stays in step whatever the rest holds. Then
// come session_id, process_id, an optional pty_id, seq and an optional
// session_seq, in that order, and nothing else. Any other line is ordinary
// JSON-RPC and no bytes follow it.

// CapOutputRaw is the capability of raw output frames. rexd announces it;
// a session gets raw frames only when session.open requested it.
const CapOutputRaw = "output.raw"

// MaxRawOutput bounds one raw output frame's bytes on the reading side:
// rexd sends at most 256 KiB per event; a frame declaring more than this
// is a broken or hostile peer, and the connection cannot skip it in step.
const MaxRawOutput = 1 << 20

// ErrRawOutputTooLarge is the error for a raw output frame over the
// reader's limit: the reader cannot skip it and must end the connection.
var ErrRawOutputTooLarge = errors.New("raw output frame too large")

const rawOutPrefix = `{"jsonrpc":"2.0","method":"`

// rawOutMethods are the methods that may carry raw frames, each with what
// follows it up to raw_bytes' number.
var rawOutMethods = [...]string{EventExecStdout, EventExecStderr, EventPTYOutput}

// RawOutputLen reports whether line (without its newline) is the line of
// a raw output frame, and how many bytes follow it. A declared length over
// max is an error, and nothing is allocated for it.
func RawOutputLen(line []byte, max int) (n int, ok bool, err error) {
	_, _, n, ok, err = rawOutputHead(line, max)
	return n, ok, err
}

// rawOutputHead reads a raw frame's line up to raw_bytes and the comma
// after it; p is left where the rest of the params start.
func rawOutputHead(line []byte, max int) (p fastParser, method string, n int, ok bool, err error) {
	p = fastParser{b: line}
	if !p.lit(rawOutPrefix) {
		return p, "", 0, false, nil
	}
	for _, m := range rawOutMethods {
		if p.lit(m) {
			method = m
			break
		}
	}
	if method == "" || !p.lit(`","params":{"raw_bytes":`) {
		return p, "", 0, false, nil
	}
	start := p.i
	for p.i < len(line) && line[p.i] >= '0' && line[p.i] <= '9' {
		p.i++
	}
	if p.i-start > 9 {
		// Past any limit, and maybe past uint64: still a frame's line
		// (the prefix says so), refused whole.
		return p, method, 0, true, fmt.Errorf("%w: a %d-digit size declared, at most %d bytes", ErrRawOutputTooLarge, p.i-start, max)
	}
	p.i = start
	v, ok1 := p.uint()
	if !ok1 || (line[start] == '0' && p.i-start > 1) || !p.lit(`,`) {
		return p, "", 0, false, nil
	}
	if v > uint64(max) {
		return p, method, 0, true, fmt.Errorf("%w: %d bytes declared, at most %d", ErrRawOutputTooLarge, v, max)
	}
	return p, method, int(v), true, nil
}

// AppendRawOutputLine appends the line of a raw output frame for an event
// whose payload is n bytes long (newline included); the payload follows it
// on the wire (Encoder.WriteFrame).
func AppendRawOutputLine(dst []byte, method string, ev *OutputEvent, n int) []byte {
	dst = append(dst, rawOutPrefix...)
	dst = append(dst, method...)
	dst = append(dst, `","params":{"raw_bytes":`...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	dst = append(dst, ',')
	dst = appendEventIDs(dst, ev)
	return append(dst, "}}\n"...)
}

// ParseRawOutputLine reads the line of a raw output frame (without its
// newline): the method, the event (Data and Encoding left empty) and the
// number of bytes that follow. ok is false for a line of any other shape.
// err is set when the line is a frame's but declares more than max bytes
// (ErrRawOutputTooLarge: the reader must end the connection) or is
// malformed after its length (the reader skips the n bytes and stays in
// step).
func ParseRawOutputLine(line []byte, max int) (method string, ev OutputEvent, n int, ok bool, err error) {
	p, method, n, ok, err := rawOutputHead(line, max)
	if !ok || err != nil {
		return "", ev, n, ok, err
	}
	if !p.eventIDs(&ev) || !p.lit(`}}`) || !p.end() {
		return "", OutputEvent{}, n, true, errors.New("a raw output frame's line is malformed after raw_bytes: session_id, process_id, pty_id, seq and session_seq must follow, in that order, and nothing else")
	}
	return method, ev, n, true, nil
}
