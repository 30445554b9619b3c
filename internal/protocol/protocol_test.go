package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestReadLine(t *testing.T) {
	in := "{\"a\":1}\n\n  \r\n{\"b\":2}\r\n" + strings.Repeat("x", 100) + "\n{\"c\":3}"
	d := NewDecoder(strings.NewReader(in), 50)
	want := []string{`{"a":1}`, `{"b":2}`, "", `{"c":3}`}
	for i, w := range want {
		line, err := d.ReadLine()
		if w == "" {
			if !errors.Is(err, ErrLineTooLong) {
				t.Fatalf("line %d: want ErrLineTooLong, got %q %v", i, line, err)
			}
			continue
		}
		if err != nil || string(line) != w {
			t.Fatalf("line %d: got %q %v, want %q", i, line, err, w)
		}
	}
	if _, err := d.ReadLine(); err != io.EOF {
		t.Fatalf("want EOF at the end, got %v", err)
	}
}

func TestReadLineLongerThanBuffer(t *testing.T) {
	long := `{"data":"` + strings.Repeat("y", 200<<10) + `"}`
	d := NewDecoder(strings.NewReader(long+"\n"+long+"\n"), 1<<20)
	for i := 0; i < 2; i++ {
		line, err := d.ReadLine()
		if err != nil || string(line) != long {
			t.Fatalf("line %d: %d bytes, err %v", i, len(line), err)
		}
	}
}

func TestParseMessage(t *testing.T) {
	tests := []struct {
		line string
		code int
		kind string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"x"}`, 0, "request"},
		{`{"jsonrpc":"2.0","id":"a","method":"x"}`, 0, "request"},
		{`{"jsonrpc":"2.0","method":"exec.stdout","params":{}}`, 0, "notification"},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, 0, "response"},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"m"}}`, 0, "response"},
		{`{"jsonrpc":"2.0","id":1,"method":`, CodeParseError, ""},
		{`"just a string"`, CodeParseError, ""},
		{`{"id":1,"method":"x"}`, CodeInvalidRequest, ""},
		{`{"jsonrpc":"2.0","id":[1],"method":"x"}`, CodeInvalidRequest, ""},
		{`{"jsonrpc":"2.0","id":true,"method":"x"}`, CodeInvalidRequest, ""},
		{`{"jsonrpc":"2.0","id":1}`, CodeInvalidRequest, ""},
	}
	for _, tt := range tests {
		m, e := ParseMessage([]byte(tt.line))
		if tt.code != 0 {
			if e == nil || e.Code != tt.code {
				t.Errorf("%s: want code %d, got %v", tt.line, tt.code, e)
			}
			continue
		}
		if e != nil {
			t.Errorf("%s: %v", tt.line, e)
			continue
		}
		kind := map[bool]string{true: "request"}[m.IsRequest()]
		if m.IsNotification() {
			kind = "notification"
		}
		if m.IsResponse() {
			kind = "response"
		}
		if kind != tt.kind {
			t.Errorf("%s: kind %q, want %q", tt.line, kind, tt.kind)
		}
	}
}

func TestEncoderOneLinePerMessage(t *testing.T) {
	var buf bytes.Buffer
	e := NewEncoder(&buf)
	m, _ := NewNotification(EventExecStdout, OutputEvent{Data: "a\nb<>&", Encoding: EncodingUTF8, Seq: 1})
	if err := e.Encode(m); err != nil {
		t.Fatal(err)
	}
	r, _ := NewResponse(json.RawMessage("7"), OKResult{OK: true})
	e.Encode(r)
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", buf.String())
	}
	if !strings.Contains(lines[0], `"data":"a\nb<>&"`) {
		t.Errorf("payload escaped oddly: %s", lines[0])
	}
	if lines[1] != `{"jsonrpc":"2.0","id":7,"result":{"ok":true}}` {
		t.Errorf("response line %s", lines[1])
	}
}

func TestErrorFormatting(t *testing.T) {
	e := Errorf(CodeForbiddenPath, ForbiddenPathData{Path: "/etc/passwd", AllowedRoots: []string{"/srv"}}, "Path is outside allowed roots")
	if e.Error() != "forbidden_path (-32002): Path is outside allowed roots" {
		t.Errorf("Error() = %q", e.Error())
	}
	if string(e.Data) != `{"path":"/etc/passwd","allowed_roots":["/srv"]}` {
		t.Errorf("data = %s", e.Data)
	}
	if ErrorCode(e) != CodeForbiddenPath || ErrorCode(errors.New("x")) != 0 {
		t.Error("ErrorCode")
	}
	for code := -32010; code <= -32001; code++ {
		if CodeName(code) == "error" {
			t.Errorf("code %d has no name", code)
		}
	}
}

func TestEncodeDecodeData(t *testing.T) {
	for _, in := range [][]byte{nil, []byte("plain"), []byte("é ü 日本"), {0xff, 0x00, 0x80}, []byte("ok\xc3")} {
		d, enc := EncodeData(in)
		if utf8.Valid(in) != (enc == EncodingUTF8) {
			t.Errorf("%q encoded as %s", in, enc)
		}
		out, err := DecodeData(d, enc)
		if err != nil || !bytes.Equal(out, in) && len(in) > 0 {
			t.Errorf("%q round trip: %q %v", in, out, err)
		}
	}
	if _, err := DecodeData("YQ", EncodingBase64); err == nil {
		t.Error("unpadded base64 accepted")
	}
	if _, err := DecodeData("YQ==\n", EncodingBase64); err == nil {
		t.Error("base64 with a newline accepted")
	}
	if _, err := DecodeData("x", "rot13"); err == nil {
		t.Error("unknown encoding accepted")
	}
}

func TestCompleteUTF8(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"ab\xc3", 2},        // first byte of é
		{"ab\xc3\xa9", 4},    // é whole
		{"\xe6\x97", 0},      // two bytes of 日
		{"a\xe6\x97\xa5", 4}, // 日 whole
		{"a\xf0\x9f\x98", 1}, // three bytes of an emoji
		{"\xf0\x9f\x98\x80", 4},
		{"a\xff", 2},     // never valid: not held back
		{"a\x80", 2},     // a stray continuation byte: not held
		{"a\xc3\x41", 3}, // lead byte followed by ASCII: invalid, not held
	}
	for _, tt := range tests {
		if got := CompleteUTF8([]byte(tt.in)); got != tt.want {
			t.Errorf("CompleteUTF8(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// FuzzCompleteUTF8: splitting at the returned point never cuts a valid
// character, and at most 3 bytes are held back.
func FuzzCompleteUTF8(f *testing.F) {
	f.Add([]byte("héllo"))
	f.Add([]byte{0xe6, 0x97})
	f.Fuzz(func(t *testing.T, b []byte) {
		n := CompleteUTF8(b)
		if n < 0 || n > len(b) || len(b)-n > 3 {
			t.Fatalf("CompleteUTF8 = %d for %d bytes", n, len(b))
		}
		if utf8.Valid(b) && !utf8.Valid(b[:n]) {
			t.Fatalf("valid input cut into an invalid prefix at %d: %q", n, b)
		}
	})
}

// FuzzParseMessage: any line gives a message or a parse/invalid-request
// error, never a panic; a line the cas.put fast path takes reads the same
// through encoding/json.
func FuzzParseMessage(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"x"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":null,"result":1}`))
	f.Add([]byte(`{`))
	put := &CASPutRequest{SessionID: "s_1", Txn: "u_1", Digests: []string{"ab/3"}, Data: [][]byte{{1, 2, 3}}}
	f.Add(bytes.TrimSuffix(put.AppendRequest(nil, 7, MethodCASPut), []byte("\n")))
	f.Fuzz(func(t *testing.T, line []byte) {
		if fast, ok := parseCASPutMessage(line); ok {
			var m Message
			if err := json.Unmarshal(line, &m); err != nil || !sameMessage(fast, &m) {
				t.Fatalf("fast path read %q as %+v; encoding/json: %+v %v", line, fast, m, err)
			}
		}
		m, e := ParseMessage(line)
		if e != nil {
			if e.Code != CodeParseError && e.Code != CodeInvalidRequest {
				t.Fatalf("unexpected code %d", e.Code)
			}
			return
		}
		if m == nil {
			t.Fatal("nil message without an error")
		}
	})
}

// FuzzDecoder: lines of any content and length are read or refused, with
// memory bounded by the limit.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte("a\nbb\n"), 4)
	f.Add([]byte(strings.Repeat("z", 300)+"\nok\n"), 64)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		if max <= 0 || max > 1<<16 {
			max = 64
		}
		d := NewDecoder(bytes.NewReader(in), max)
		for i := 0; i < len(in)+2; i++ {
			line, err := d.ReadLine()
			if err == io.EOF {
				return
			}
			if errors.Is(err, ErrLineTooLong) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(line) > max+1 {
				t.Fatalf("line of %d bytes passed a limit of %d", len(line), max)
			}
		}
	})
}

// TestEncoderClose: what was written before Close reaches the writer;
// nothing after it does, and every kind of write says so.
func TestEncoderClose(t *testing.T) {
	var out bytes.Buffer
	e := NewEncoder(&out)
	if err := e.WriteLine([]byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for name, write := range map[string]func() error{
		"WriteLine":  func() error { return e.WriteLine([]byte("{}\n")) },
		"WriteFrame": func() error { return e.WriteFrame([]byte("{}\n"), [][]byte{[]byte("ab")}) },
		"Encode":     func() error { return e.Encode(map[string]int{"a": 1}) },
	} {
		if err := write(); !errors.Is(err, ErrEncoderClosed) {
			t.Errorf("%s after Close: %v, want ErrEncoderClosed", name, err)
		}
	}
	if out.String() != "{}\n" {
		t.Fatalf("the writer got %q, want only what came before Close", out.String())
	}
}

func TestValidSignal(t *testing.T) {
	for s, want := range map[string]bool{"KILL": true, "RTMIN+3": true, "34": true, "": false,
		"KILL\x1b[2J": false, "kill": false, "ABCDEFGHIJKLMNOPQ": false, "TERM\n": false} {
		if got := ValidSignal(s); got != want {
			t.Errorf("ValidSignal(%q) = %v, want %v", s, got, want)
		}
	}
}
