package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// DefaultMaxLine bounds one NDJSON line. It leaves room for an fs.write of a
// few MiB in base64; anything longer is refused without being buffered.
const DefaultMaxLine = 16 << 20

// ErrLineTooLong is returned for a line longer than the decoder's limit. The
// rest of that line has been discarded; the next call reads the next line.
var ErrLineTooLong = errors.New("line too long")

// Decoder reads newline-delimited JSON-RPC messages.
type Decoder struct {
	r   *bufio.Reader
	max int
	buf []byte
}

// NewDecoder returns a Decoder reading r that refuses lines longer than
// maxLine bytes (DefaultMaxLine when maxLine <= 0).
func NewDecoder(r io.Reader, maxLine int) *Decoder {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	return &Decoder{r: bufio.NewReaderSize(r, 64<<10), max: maxLine}
}

// ReadLine returns the next non-blank line without its newline. The slice is
// valid until the next call. A final line without a newline is returned too.
func (d *Decoder) ReadLine() ([]byte, error) {
	for {
		d.buf = d.buf[:0]
		tooLong := false
		for {
			chunk, err := d.r.ReadSlice('\n')
			if !tooLong {
				if len(d.buf)+len(chunk) > d.max+1 { // +1: the newline itself
					tooLong = true
					d.buf = d.buf[:0]
				} else {
					d.buf = append(d.buf, chunk...)
				}
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				if err == io.EOF && len(d.buf) > 0 && !tooLong {
					break
				}
				if err == io.EOF && tooLong {
					return nil, ErrLineTooLong
				}
				return nil, err
			}
			break
		}
		if tooLong {
			// Shrink a buffer that grew towards the limit so one huge line
			// does not pin memory for the life of the connection.
			if cap(d.buf) > 1<<20 {
				d.buf = nil
			}
			return nil, ErrLineTooLong
		}
		line := bytes.TrimRight(d.buf, "\r\n")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		return line, nil
	}
}

// ReadRaw reads the n bytes that follow a line in a raw frame (see
// CASRawFrameLen) into a new slice. The caller bounds n.
func (d *Decoder) ReadRaw(n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read %d raw bytes after a line: %w", n, err)
	}
	return b, nil
}

// ReadRawInto reads the len(b) bytes that follow a line in a raw frame
// into b.
func (d *Decoder) ReadRawInto(b []byte) error {
	if _, err := io.ReadFull(d.r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("read %d raw bytes after a line: %w", len(b), err)
	}
	return nil
}

// ParseMessage decodes one line into a Message and checks the envelope. The
// returned *Error is a parse error (-32700) or an invalid request (-32600);
// for the latter the message's id is filled in when it could be read.
func ParseMessage(line []byte) (*Message, *Error) {
	if m, ok := parseCASPutMessage(line); ok {
		return m, nil
	}
	var m Message
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, Errorf(CodeParseError, nil, "invalid JSON: %v", err)
	}
	if m.JSONRPC != JSONRPC {
		return &m, Errorf(CodeInvalidRequest, nil, "jsonrpc must be %q", JSONRPC)
	}
	if len(m.ID) > 0 {
		switch m.ID[0] {
		case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		case 'n': // null: a notification in all but name
		default:
			id := m.ID
			m.ID = nil
			return &m, Errorf(CodeInvalidRequest, nil, "id must be a string or a number, got %s", id)
		}
	}
	if m.Method == "" && m.Result == nil && m.Error == nil {
		return &m, Errorf(CodeInvalidRequest, nil, "a message needs a method, a result or an error")
	}
	return &m, nil
}

// Encoder writes newline-delimited JSON messages. It is safe for concurrent
// use; each message is written and flushed whole.
type Encoder struct {
	mu     sync.Mutex
	w      *bufio.Writer
	dst    io.Writer // what w writes to
	buf    bytes.Buffer
	enc    *json.Encoder
	closed bool
}

// ErrEncoderClosed is what a write after Close returns.
var ErrEncoderClosed = errors.New("the connection's writer is closed")

// Close flushes what is buffered and refuses every later write: a
// connection's end can promise that nothing (a late exit event of a
// process reaped meanwhile) reaches its writer afterwards.
func (e *Encoder) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	return e.w.Flush()
}

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer) *Encoder {
	e := &Encoder{w: bufio.NewWriterSize(w, 64<<10), dst: w}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}

// WriteLine writes one pre-encoded line; it must end in a newline.
func (e *Encoder) WriteLine(line []byte) error { return e.WriteFrame(line, nil) }

// WriteFrame writes a raw frame whole: line (ending in a newline), then
// each of data, with no copy of data into one buffer.
func (e *Encoder) WriteFrame(line []byte, data [][]byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrEncoderClosed
	}
	if _, err := e.w.Write(line); err != nil {
		return err
	}
	for _, b := range data {
		if _, err := e.w.Write(b); err != nil {
			return err
		}
	}
	return e.w.Flush()
}

// WriteFrameTo writes a raw frame whose bytes body writes: line (ending in
// a newline) goes out first, then body writes straight to the writer the
// Encoder was made with, unbuffered, while no other message can come
// between (rexd splices a command's output there without copying it). A
// body that fails ends the Encoder (see ErrEncoderClosed) and closes its
// writer when it is an io.Closer.
func (e *Encoder) WriteFrameTo(line []byte, body func(w io.Writer) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrEncoderClosed
	}
	if _, err := e.w.Write(line); err != nil {
		return err
	}
	if err := e.w.Flush(); err != nil {
		return err
	}
	if err := body(e.dst); err != nil {
		// Part of the frame may have gone out: nothing written after it
		// could be read in step. The Encoder refuses every later write,
		// and the writer is closed so that the reader sees the end.
		e.closed = true
		if c, ok := e.dst.(io.Closer); ok {
			c.Close()
		}
		return err
	}
	return nil
}

// Encode writes v as one line.
func (e *Encoder) Encode(v any) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrEncoderClosed
	}
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil { // Encode appends the newline
		return fmt.Errorf("encode message: %w", err)
	}
	if _, err := e.w.Write(e.buf.Bytes()); err != nil {
		return err
	}
	if e.buf.Cap() > 4<<20 {
		e.buf = bytes.Buffer{}
		e.enc = json.NewEncoder(&e.buf)
		e.enc.SetEscapeHTML(false)
	}
	return e.w.Flush()
}
