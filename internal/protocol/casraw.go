package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// Raw cas.put (capability "cas.raw"): blobs are most of the bytes a push
// puts on the wire, and base64 inside a JSON line costs a third more bytes
// and a decoding pass on the target. A rexd that announces CapCASRaw also
// reads a cas.put whose object bytes follow its line raw:
//
//	{"jsonrpc":"2.0","id":7,"method":"cas.put","params":{"raw_bytes":16,"session_id":"s_1","digests":["…/6","…/10"]}}\n
//	<16 bytes: the 6 of the first object, then the 10 of the second>
//
// The line must start exactly so, up to and including "raw_bytes" and its
// number (CASRawFrameLen): that prefix alone says how many bytes follow,
// so the stream stays in step whatever the rest of the params hold. An
// optional "txn" follows "session_id". Each object's size is the one its
// digest names (HASH/SIZE); their sum must be raw_bytes. A line of any
// other shape is an ordinary JSON-RPC line, never followed by bytes.

// CapCASRaw is the capability of raw cas.put frames.
const CapCASRaw = "cas.raw"

// casRawPrefix is the start of a raw frame's line up to its id, and
// casRawMid what follows the id up to raw_bytes' number.
const (
	casRawPrefix = `{"jsonrpc":"2.0","id":`
	casRawMid    = `,"method":"cas.put","params":{"raw_bytes":`
)

// ErrRawFrameTooLarge is returned by CASRawFrameLen for a frame over the
// reader's limit: the reader cannot skip it and stay in step.
var ErrRawFrameTooLarge = errors.New("raw cas.put frame too large")

// CASRawFrameLen reports whether line (without its newline) is a raw
// cas.put line, and how many raw bytes follow it. A declared length over
// max is ErrRawFrameTooLarge, so nothing is allocated for it.
func CASRawFrameLen(line []byte, max int64) (n int64, ok bool, err error) {
	p := fastParser{b: line}
	if !p.lit(casRawPrefix) {
		return 0, false, nil
	}
	start := p.i
	if _, ok1 := p.uint(); !ok1 || (line[start] == '0' && p.i-start > 1) {
		return 0, false, nil
	}
	if !p.lit(casRawMid) {
		return 0, false, nil
	}
	start = p.i
	v, ok1 := p.uint()
	if !ok1 || (line[start] == '0' && p.i-start > 1) || !p.lit(`,`) {
		return 0, false, nil
	}
	if v > uint64(max) {
		return int64(min(v, 1<<62)), true, fmt.Errorf("%w: %d bytes declared, at most %d", ErrRawFrameTooLarge, v, max)
	}
	return int64(v), true, nil
}

// AppendRawRequest appends the line of r as a raw frame with id, newline
// included, and then the objects' bytes. The digests name the sizes of
// r.Data (HASH/SIZE); Data[i] must hold exactly that many bytes.
func (r *CASPutRequest) AppendRawRequest(dst []byte, id int64) []byte {
	dst = r.AppendRawLine(dst, id)
	for _, b := range r.Data {
		dst = append(dst, b...)
	}
	return dst
}

// AppendRawLine appends only the line of the raw frame (newline included):
// Encoder.WriteFrame sends r.Data after it without copying it into one
// buffer.
func (r *CASPutRequest) AppendRawLine(dst []byte, id int64) []byte {
	var total int64
	for _, b := range r.Data {
		total += int64(len(b))
	}
	dst = append(dst, casRawPrefix...)
	dst = strconv.AppendInt(dst, id, 10)
	dst = append(dst, casRawMid...)
	dst = strconv.AppendInt(dst, total, 10)
	dst = append(dst, `,"session_id":`...)
	dst = appendString(dst, r.SessionID)
	if r.Txn != "" {
		dst = append(dst, `,"txn":`...)
		dst = appendString(dst, r.Txn)
	}
	dst = append(dst, `,"digests":[`...)
	for i, d := range r.Digests {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, d)
	}
	return append(dst, "]}}\n"...)
}

// ParseCASPutRaw reads the params of a raw cas.put (the line's params, as
// in Message.Params) and splits raw, the bytes that followed the line,
// into its objects. At most maxObjects digests are read; each must end in
// /SIZE, and the sizes must add up to raw_bytes and to len(raw). The data
// slices alias raw. Whether each digest is well formed and matches its
// bytes is for the caller to check.
func ParseCASPutRaw(params, raw []byte, maxObjects int) (sessionID, txn string, digests []string, data [][]byte, err error) {
	bad := func(format string, a ...any) (string, string, []string, [][]byte, error) {
		return "", "", nil, nil, fmt.Errorf("raw cas.put: "+format, a...)
	}
	p := fastParser{b: params}
	if !p.lit(`{"raw_bytes":`) {
		return bad("params must start with raw_bytes")
	}
	n, ok := p.uint()
	if !ok || n != uint64(len(raw)) {
		return bad("raw_bytes does not match the %d bytes read", len(raw))
	}
	if !p.lit(`,"session_id":`) {
		return bad("session_id must follow raw_bytes")
	}
	if sessionID, ok = p.str(); !ok {
		return bad("session_id is not a plain string")
	}
	if p.lit(`,"txn":`) {
		// An empty txn is written by leaving it out: one frame, one form.
		if txn, ok = p.str(); !ok || txn == "" {
			return bad("txn is not a plain, non-empty string")
		}
	}
	if !p.lit(`,"digests":[`) {
		return bad("digests must follow session_id (and txn)")
	}
	var off uint64
	for first := true; !p.lit(`]}`); first = false {
		if !first && !p.lit(`,`) {
			return bad("digests must be a list of strings")
		}
		if len(digests) == maxObjects {
			return bad("more than %d objects in one call", maxObjects)
		}
		d, ok := p.str()
		if !ok {
			return bad("digests must be a list of strings")
		}
		slash := bytes.LastIndexByte([]byte(d), '/')
		size, err := strconv.ParseUint(d[slash+1:], 10, 63)
		if slash < 0 || err != nil {
			return bad("digest %q does not end in /SIZE", d)
		}
		if size > uint64(len(raw))-off {
			return bad("the objects' sizes add up to more than raw_bytes (%d)", len(raw))
		}
		digests = append(digests, d)
		data = append(data, raw[off:off+size:off+size])
		off += size
	}
	if p.i != len(p.b) {
		return bad("unexpected bytes after digests")
	}
	if off != uint64(len(raw)) {
		return bad("the objects' sizes add up to %d, not raw_bytes (%d)", off, len(raw))
	}
	return sessionID, txn, digests, data, nil
}
