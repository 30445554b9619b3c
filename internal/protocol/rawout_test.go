package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

// A raw output frame goes through a Decoder as its line, then its bytes
// (newlines, NULs and invalid UTF-8 included, as they are), and the next
// line is read in step. The line itself is JSON that encoding/json reads
// the same way.
func TestRawOutputRoundTrip(t *testing.T) {
	cases := []struct {
		method string
		ev     OutputEvent
		data   []byte
	}{
		{EventExecStdout, OutputEvent{SessionID: "s_1", ProcessID: "p_1", Seq: 1}, []byte("hello\n")},
		{EventExecStderr, OutputEvent{SessionID: "s_1", ProcessID: "p_22", Seq: 9}, []byte{0, 0, 0xff, '\n', '"', '\\'}},
		{EventPTYOutput, OutputEvent{SessionID: "s_1", ProcessID: "p_3", PTYID: "t_1", Seq: 4}, []byte("\x1b[31mred\r\n")},
		{EventExecStdout, OutputEvent{SessionID: "s_2", ProcessID: "p_1", Seq: 7, SessionSeq: 12}, []byte("\n{\"jsonrpc\":\"2.0\"}\n")},
		{EventExecStdout, OutputEvent{SessionID: "s_1", ProcessID: "p_1", Seq: 2}, []byte{}},
	}
	for _, c := range cases {
		line := AppendRawOutputLine(nil, c.method, &c.ev, len(c.data))
		var sent bytes.Buffer
		if err := NewEncoder(&sent).WriteFrame(line, [][]byte{c.data}); err != nil {
			t.Fatal(err)
		}
		next := `{"jsonrpc":"2.0","method":"exec.exit","params":{"session_id":"s_1","process_id":"p_1","exit_code":0}}` + "\n"
		sent.WriteString(next)

		dec := NewDecoder(&sent, 0)
		got, err := dec.ReadLine()
		if err != nil {
			t.Fatal(err)
		}
		var generic struct {
			Method string `json:"method"`
			Params struct {
				RawBytes int `json:"raw_bytes"`
				OutputEvent
			} `json:"params"`
		}
		if err := json.Unmarshal(got, &generic); err != nil || generic.Method != c.method || generic.Params.RawBytes != len(c.data) || generic.Params.OutputEvent != c.ev {
			t.Errorf("encoding/json reads %s as %+v (%v)", got, generic, err)
		}
		n, ok, err := RawOutputLen(got, MaxRawOutput)
		if !ok || err != nil || n != len(c.data) {
			t.Fatalf("RawOutputLen(%s) = %d %v %v", got, n, ok, err)
		}
		method, ev, n, ok, err := ParseRawOutputLine(got, MaxRawOutput)
		if !ok || err != nil || method != c.method || ev != c.ev || n != len(c.data) {
			t.Fatalf("ParseRawOutputLine(%s) = %q %+v %d %v %v", got, method, ev, n, ok, err)
		}
		data, err := dec.ReadRaw(n)
		if err != nil || !bytes.Equal(data, c.data) {
			t.Fatalf("payload %q (%v), want %q", data, err, c.data)
		}
		if after, err := dec.ReadLine(); err != nil || string(after)+"\n" != next {
			t.Fatalf("the next line is %q (%v): out of step", after, err)
		}
	}
}

func TestRawOutputLineRefused(t *testing.T) {
	const tail = `"session_id":"s_1","process_id":"p_1","seq":1}}`
	for _, c := range []struct {
		name, line string
		ok         bool // a frame's line: its bytes follow
		tooLarge   bool
		malformed  bool
	}{
		{"an ordinary event", `{"jsonrpc":"2.0","method":"exec.stdout","params":{"session_id":"s_1","process_id":"p_1","seq":1,"data":"x","encoding":"utf8"}}`, false, false, false},
		{"another method", `{"jsonrpc":"2.0","method":"exec.exit","params":{"raw_bytes":3,` + tail, false, false, false},
		{"a method's prefix", `{"jsonrpc":"2.0","method":"exec.stdoutx","params":{"raw_bytes":3,` + tail, false, false, false},
		{"a space", `{"jsonrpc":"2.0", "method":"exec.stdout","params":{"raw_bytes":3,` + tail, false, false, false},
		{"a leading zero", `{"jsonrpc":"2.0","method":"exec.stdout","params":{"raw_bytes":03,` + tail, false, false, false},
		{"no comma", `{"jsonrpc":"2.0","method":"exec.stdout","params":{"raw_bytes":3}}`, false, false, false},
		{"a negative length", `{"jsonrpc":"2.0","method":"exec.stdout","params":{"raw_bytes":-3,` + tail, false, false, false},
		{"over the limit", `{"jsonrpc":"2.0","method":"exec.stdout","params":{"raw_bytes":1048577,` + tail, true, true, false},
		{"a huge length", `{"jsonrpc":"2.0","method":"exec.stdout","params":{"raw_bytes":99999999999999999999,` + tail, true, true, false},
		{"a huge length, cut", `{"jsonrpc":"2.0","method":"exec.stdout","params":{"raw_bytes":1234567890123`, true, true, false},
		{"fields out of order", `{"jsonrpc":"2.0","method":"exec.stdout","params":{"raw_bytes":3,"process_id":"p_1","session_id":"s_1","seq":1}}`, true, false, true},
		{"an escaped id", `{"jsonrpc":"2.0","method":"exec.stdout","params":{"raw_bytes":3,"session_id":"s\"1","process_id":"p_1","seq":1}}`, true, false, true},
		{"data as well", `{"jsonrpc":"2.0","method":"exec.stdout","params":{"raw_bytes":3,"session_id":"s_1","process_id":"p_1","seq":1,"data":"x"}}`, true, false, true},
		{"trailing bytes", `{"jsonrpc":"2.0","method":"exec.stdout","params":{"raw_bytes":3,` + tail + `x`, true, false, true},
		{"well formed", `{"jsonrpc":"2.0","method":"exec.stdout","params":{"raw_bytes":3,` + tail, true, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, n, ok, err := ParseRawOutputLine([]byte(c.line), MaxRawOutput)
			if ok != c.ok || errors.Is(err, ErrRawOutputTooLarge) != c.tooLarge || (err != nil && !c.tooLarge) != c.malformed {
				t.Fatalf("ok=%v err=%v, want ok=%v tooLarge=%v malformed=%v", ok, err, c.ok, c.tooLarge, c.malformed)
			}
			if c.malformed && n != 3 {
				t.Fatalf("a malformed frame's length is %d, want 3 (its bytes must still be skipped)", n)
			}
		})
	}
}

// FuzzRawOutputFrame: whatever a peer sends, the parser never panics, a
// length it reports is within the limit, and what it reads from a line it
// accepts writes back as a line that reads the same.
func FuzzRawOutputFrame(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","method":"exec.stdout","params":{"raw_bytes":3,"session_id":"s_1","process_id":"p_1","seq":1}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"pty.output","params":{"raw_bytes":0,"session_id":"s_1","process_id":"p_1","pty_id":"t_1","seq":18446744073709551615,"session_seq":2}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"exec.stderr","params":{"raw_bytes":1048576,"session_id":"","process_id":"","seq":0}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"exec.stdout","params":{"raw_bytes":2000000,`))
	f.Fuzz(func(t *testing.T, line []byte) {
		method, ev, n, ok, err := ParseRawOutputLine(line, MaxRawOutput)
		if !ok {
			if err != nil || n != 0 {
				t.Fatalf("not a frame, yet n=%d err=%v", n, err)
			}
			return
		}
		if n < 0 || n > MaxRawOutput {
			t.Fatalf("length %d outside [0, %d]", n, MaxRawOutput)
		}
		if err != nil {
			return
		}
		again := AppendRawOutputLine(nil, method, &ev, n)
		m2, ev2, n2, ok2, err2 := ParseRawOutputLine(bytes.TrimSuffix(again, []byte("\n")), MaxRawOutput)
		if !ok2 || err2 != nil || m2 != method || ev2 != ev || n2 != n {
			t.Fatalf("accepted %q as %q %+v %d; written back as %q, read %q %+v %d %v", line, method, ev, n, again, m2, ev2, n2, err2)
		}
	})
}

// closingBuffer is a writer that records whether it was closed.
type closingBuffer struct {
	bytes.Buffer
	closed bool
}

func (b *closingBuffer) Close() error { b.closed = true; return nil }

// A frame whose bytes fail partway ends the Encoder: nothing written after
// it could be read in step, so every later write is refused and the writer
// is closed (the reader sees the end, not a frame filled with what follows).
func TestWriteFrameToFailureEndsTheEncoder(t *testing.T) {
	var w closingBuffer
	e := NewEncoder(&w)
	line := []byte(`{"jsonrpc":"2.0","method":"exec.stdout","params":{"raw_bytes":10,"session_id":"s","process_id":"p","seq":1}}` + "\n")
	fail := errors.New("splice: out of memory")
	if err := e.WriteFrameTo(line, func(dst io.Writer) error {
		dst.Write([]byte("abc"))
		return fail
	}); !errors.Is(err, fail) {
		t.Fatalf("WriteFrameTo: %v, want the body's error", err)
	}
	sent := w.Len()
	if err := e.Encode(map[string]int{"a": 1}); !errors.Is(err, ErrEncoderClosed) {
		t.Errorf("Encode after a failed frame: %v, want ErrEncoderClosed", err)
	}
	if err := e.WriteLine([]byte("{}\n")); !errors.Is(err, ErrEncoderClosed) {
		t.Errorf("WriteLine after a failed frame: %v, want ErrEncoderClosed", err)
	}
	if w.Len() != sent || !w.closed {
		t.Errorf("after the failed frame %d more bytes were written, writer closed %v", w.Len()-sent, w.closed)
	}
}
