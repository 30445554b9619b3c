package protocol

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestOutputEventFastPath(t *testing.T) {
	payloads := [][]byte{nil, []byte("plain\n"), []byte("quote\" back\\ tab\t nul\x00 del\x7f é 日本 \u2028"), {0xff, 0xfe, 0}}
	for _, d := range payloads {
		for _, ev := range []OutputEvent{
			{SessionID: "s_1", ProcessID: "p_2", Seq: 7},
			{SessionID: "s_1", ProcessID: "p_3", PTYID: "t_1", Seq: 1 << 40},
			{SessionID: "s_1-0a1b", ProcessID: "p_4", Seq: 3, SessionSeq: 12},
		} {
			line := AppendOutputEvent(nil, EventExecStdout, &ev, d)
			if line[len(line)-1] != '\n' || bytes.Count(line, []byte("\n")) != 1 {
				t.Fatalf("not one line: %q", line)
			}
			// encoding/json reads the same thing.
			m, perr := ParseMessage(bytes.TrimSuffix(line, []byte("\n")))
			if perr != nil {
				t.Fatalf("%q: %v", line, perr)
			}
			var got OutputEvent
			if err := json.Unmarshal(m.Params, &got); err != nil {
				t.Fatal(err)
			}
			b, err := got.Bytes()
			if err != nil || !bytes.Equal(b, d) || got.Seq != ev.Seq || got.PTYID != ev.PTYID || got.SessionSeq != ev.SessionSeq {
				t.Fatalf("generic decode of %q: %+v %q %v", line, got, b, err)
			}
			// And the fast parser agrees.
			method, fev, fdata, ok := ParseOutputEvent(line)
			if !ok || method != EventExecStdout || !bytes.Equal(fdata, d) || fev.Seq != ev.Seq || fev.Encoding != got.Encoding || fev.SessionSeq != ev.SessionSeq {
				t.Fatalf("fast parse of %q: ok=%v %+v %q", line, ok, fev, fdata)
			}
		}
	}
}

func TestParseOutputEventRefusesOtherShapes(t *testing.T) {
	for _, line := range []string{
		`{"jsonrpc":"2.0","method":"exec.exit","params":{"session_id":"s","process_id":"p","seq":1,"data":"x","encoding":"utf8"}}`,
		`{"jsonrpc":"2.0","method":"exec.stdout","params":{"session_id":"s","process_id":"p","seq":1,"data":"x","encoding":"rot13"}}`,
		`{"jsonrpc":"2.0","method":"exec.stdout","params":{"session_id":"s","process_id":"p","seq":1,"data":"x","encoding":"utf8"}} trailing`,
		`{"jsonrpc":"2.0","method":"exec.stdout","params":{"session_id":"s","process_id":"p","seq":1,"data":"bad\q","encoding":"utf8"}}`,
		`{"jsonrpc":"2.0","method":"exec.stdout","params":{"process_id":"p","session_id":"s","seq":1,"data":"x","encoding":"utf8"}}`,
		`{"jsonrpc":"2.0","method":"exec.stdout","params":{"session_id":"s","process_id":"p","seq":1,"data":"!!","encoding":"base64"}}`,
	} {
		if _, _, _, ok := ParseOutputEvent([]byte(line)); ok {
			t.Errorf("fast path accepted %s", line)
		}
	}
}

// FuzzOutputEventRoundTrip: whatever the payload, the fast encoder writes
// valid JSON that both decoders read back to the same bytes.
func FuzzOutputEventRoundTrip(f *testing.F) {
	f.Add([]byte("hello\n"), uint64(1), "p_1")
	f.Add([]byte{0xe6, 0x97, '"', '\\', 0x01}, uint64(99), "p_\"x")
	f.Fuzz(func(t *testing.T, data []byte, seq uint64, pid string) {
		if !utf8.ValidString(pid) {
			pid = strings.ToValidUTF8(pid, "\uFFFD")
		}
		ev := OutputEvent{SessionID: "s_1", ProcessID: pid, Seq: seq, SessionSeq: seq / 2}
		line := AppendOutputEvent(nil, EventExecStderr, &ev, data)
		var m Message
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("invalid JSON %q: %v", line, err)
		}
		var got OutputEvent
		if err := json.Unmarshal(m.Params, &got); err != nil {
			t.Fatal(err)
		}
		b, err := got.Bytes()
		if err != nil || !bytes.Equal(b, data) || got.ProcessID != pid || got.SessionSeq != ev.SessionSeq {
			t.Fatalf("round trip: %q -> %q (%v)", data, b, err)
		}
		if _, fev, fdata, ok := ParseOutputEvent(line); ok && (!bytes.Equal(fdata, data) || fev.ProcessID != pid) {
			t.Fatalf("fast parser disagrees: %q vs %q", fdata, data)
		}
	})
}

// FuzzParseOutputEvent: when the fast parser accepts a line, encoding/json
// must read the same event from it.
func FuzzParseOutputEvent(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","method":"exec.stdout","params":{"session_id":"s","process_id":"p","seq":1,"data":"a\u00e9\ud83d\ude00\n","encoding":"utf8"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"pty.output","params":{"session_id":"s","process_id":"p","pty_id":"t","seq":2,"data":"AAE=","encoding":"base64"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"exec.stdout","params":{"session_id":"s","process_id":"p","seq":2,"session_seq":9,"data":"x","encoding":"utf8"}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		method, ev, data, ok := ParseOutputEvent(line)
		if !ok {
			return
		}
		var m Message
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("fast path accepted invalid JSON %q: %v", line, err)
		}
		var got OutputEvent
		if err := json.Unmarshal(m.Params, &got); err != nil {
			t.Fatalf("params: %v", err)
		}
		b, err := got.Bytes()
		if err != nil || m.Method != method || !bytes.Equal(b, data) || got.Seq != ev.Seq || got.ProcessID != ev.ProcessID || got.SessionSeq != ev.SessionSeq {
			t.Fatalf("disagreement on %q: fast %q generic %q (%v)", line, data, b, err)
		}
	})
}

// TestOutputEventsPickTheShorterEncoding (item 5): a payload goes as utf8
// only when escaping it costs no more than base64's 4/3.
func TestOutputEventsPickTheShorterEncoding(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"text", []byte("hello, world\n"), EncodingUTF8},
		{"text with tabs and quotes", []byte("a\tb \"c\" d\\e\nf g h i j k l\n"), EncodingUTF8},
		{"nul bytes", make([]byte, 4096), EncodingBase64},
		{"one nul", []byte{0}, EncodingBase64},
		{"a nul in a long line", []byte("0123456789012345678901234567890123456789\x00\n"), EncodingUTF8},
		{"newlines only", bytes.Repeat([]byte("\n"), 300), EncodingBase64},
		{"invalid utf8", []byte{0xff, 'a'}, EncodingBase64},
		{"empty", nil, EncodingUTF8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := OutputEvent{SessionID: "s_1", ProcessID: "p_1", Seq: 1}
			line := AppendOutputEvent(nil, EventExecStdout, &ev, tt.data)
			_, got, data, ok := ParseOutputEvent(line)
			if !ok || !bytes.Equal(data, tt.data) {
				t.Fatalf("round trip of %q: ok=%v %q", tt.data, ok, data)
			}
			if got.Encoding != tt.want {
				t.Errorf("%q went as %s, want %s", tt.data, got.Encoding, tt.want)
			}
			if d, enc := EncodeData(tt.data); enc != tt.want {
				t.Errorf("EncodeData(%q) chose %s, want %s", tt.data, enc, tt.want)
			} else if back, err := DecodeData(d, enc); err != nil || !bytes.Equal(back, tt.data) {
				t.Errorf("EncodeData round trip: %q %v", back, err)
			}
			// Whatever was chosen is never longer than the other choice.
			b64 := (len(tt.data) + 2) / 3 * 4
			esc := len(appendEscaped(nil, tt.data))
			n := len(line) - len(AppendOutputEvent(nil, EventExecStdout, &ev, nil)) - (len(got.Encoding) - len(EncodingUTF8))
			if utf8.Valid(tt.data) && n > min(b64, esc) {
				t.Errorf("%d bytes on the wire, the shorter choice is %d", n, min(b64, esc))
			}
		})
	}
}

// benchText is 64 KiB of 100-byte lines, what `fold -w 100` streams.
func benchText() []byte {
	line := append(bytes.Repeat([]byte("a"), 99), '\n')
	return bytes.Repeat(line, 64<<10/100)
}

// BenchmarkAppendOutputEvent measures rexd's cost per output byte: one
// event of 64 KiB of text lines.
func BenchmarkAppendOutputEvent(b *testing.B) {
	data := benchText()
	ev := OutputEvent{SessionID: "s_1", ProcessID: "p_1"}
	var line []byte
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		ev.Seq++
		line = AppendOutputEvent(line[:0], EventExecStdout, &ev, data)
	}
}

// BenchmarkParseOutputEvent measures the client's cost per output byte:
// the same event read back.
func BenchmarkParseOutputEvent(b *testing.B) {
	data := benchText()
	ev := OutputEvent{SessionID: "s_1", ProcessID: "p_1", Seq: 1}
	line := AppendOutputEvent(nil, EventExecStdout, &ev, data)
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		if _, _, _, ok := ParseOutputEvent(line); !ok {
			b.Fatal("not parsed")
		}
	}
}

// refEscape is the byte-at-a-time escaping the word-at-a-time scan
// replaced: the choice (text or not) and the bytes must stay the same.
func refEscape(b []byte) ([]byte, bool) {
	budget := (len(b)+2)/3*4 - len(b)
	var out []byte
	for _, c := range b {
		switch {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
			budget--
		case c == '\n':
			out = append(out, '\\', 'n')
			budget--
		case c == '\r':
			out = append(out, '\\', 'r')
			budget--
		case c == '\t':
			out = append(out, '\\', 't')
			budget--
		case c < 0x20:
			out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			budget -= 5
		default:
			out = append(out, c)
		}
	}
	return out, budget >= 0 && utf8.Valid(b)
}

// FuzzAppendText: the word-at-a-time escaper agrees with the byte-at-a-time
// one, at every alignment, and asText agrees with both.
func FuzzAppendText(f *testing.F) {
	f.Add([]byte("hello, world\n"))
	f.Add([]byte("0123456\"89abcdef\\ghijklm\x00nop é日本\U0001F600\xff"))
	f.Add(bytes.Repeat([]byte{0x1f, ' ', 0x7f, 0x80}, 5))
	f.Add([]byte("\xe6\x97\xa5\xe6\x97"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for off := 0; off < 8 && off <= len(data); off++ {
			b := data[off:]
			want, wantText := refEscape(b)
			got, gotText := appendText([]byte("x"), b, (len(b)+2)/3*4-len(b))
			if gotText != wantText || asText(b) != wantText {
				t.Fatalf("%q: text=%v asText=%v, want %v", b, gotText, asText(b), wantText)
			}
			if gotText && !bytes.Equal(got[1:], want) {
				t.Fatalf("%q escaped as %q, want %q", b, got[1:], want)
			}
			if utf8.Valid(b) && !bytes.Equal(appendEscaped(nil, b), want) {
				t.Fatalf("appendEscaped(%q) = %q, want %q", b, appendEscaped(nil, b), want)
			}
			wantPlain := utf8.Valid(b) && !bytes.ContainsFunc(b, func(r rune) bool { return r < 0x20 })
			if plainRun(b) != wantPlain {
				t.Fatalf("plainRun(%q) = %v, want %v", b, !wantPlain, wantPlain)
			}
		}
	})
}
