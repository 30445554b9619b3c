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
