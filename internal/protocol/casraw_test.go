package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// rawDigest is a well-formed HASH/SIZE for data of size n.
func rawDigest(c byte, n int) string {
	return strings.Repeat(string(c), 64) + "/" + strconv.Itoa(n)
}

// A raw frame goes through a Decoder as its line, then its bytes (which
// may hold newlines), and the next line is read in step; the line is
// JSON-RPC that encoding/json reads, and ParseCASPutRaw splits the bytes
// back into the objects.
func TestCASPutRawRoundTrip(t *testing.T) {
	data := [][]byte{[]byte("hello\n"), {}, []byte("\n\n{\"jsonrpc\":\"2.0\"}\n"), {0, 1, 2, 255}}
	for _, txn := range []string{"", "u_7"} {
		r := &CASPutRequest{SessionID: "s_1", Txn: txn, Data: data}
		for i, d := range data {
			r.Digests = append(r.Digests, rawDigest(byte('a'+i), len(d)))
		}
		stream := r.AppendRawRequest(nil, 42)
		var sent bytes.Buffer
		if err := NewEncoder(&sent).WriteFrame(r.AppendRawLine(nil, 42), r.Data); err != nil || !bytes.Equal(sent.Bytes(), stream) {
			t.Fatalf("WriteFrame wrote %q (%v), want %q", sent.Bytes(), err, stream)
		}
		stream = append(stream, "{\"jsonrpc\":\"2.0\",\"id\":43,\"method\":\"cas.has\"}\n"...)

		dec := NewDecoder(bytes.NewReader(stream), 0)
		line, err := dec.ReadLine()
		if err != nil {
			t.Fatal(err)
		}
		n, ok, err := CASRawFrameLen(line, 4<<20)
		if !ok || err != nil || n != int64(len(bytes.Join(data, nil))) {
			t.Fatalf("frame length %d %v %v", n, ok, err)
		}
		raw, err := dec.ReadRaw(int(n))
		if err != nil {
			t.Fatal(err)
		}
		m, perr := ParseMessage(line)
		if perr != nil || m.Method != MethodCASPut || string(m.ID) != "42" {
			t.Fatalf("%v %+v", perr, m)
		}
		sid, gotTxn, ds, got, err := ParseCASPutRaw(m.Params, raw, 1024)
		if err != nil || sid != "s_1" || gotTxn != txn || len(ds) != len(data) {
			t.Fatalf("parse: %q %q %q %v", sid, gotTxn, ds, err)
		}
		for i := range data {
			if ds[i] != r.Digests[i] || !bytes.Equal(got[i], data[i]) {
				t.Errorf("object %d: %q %q, want %q %q", i, ds[i], got[i], r.Digests[i], data[i])
			}
		}
		next, err := dec.ReadLine()
		if err != nil || !strings.Contains(string(next), `"id":43`) {
			t.Fatalf("the line after the frame: %q %v", next, err)
		}
	}
}

// Only the exact prefix makes a frame, and a length over the limit is
// refused before anything is read or allocated.
func TestCASRawFrameLen(t *testing.T) {
	for _, c := range []struct {
		line    string
		n       int64
		isFrame bool
		tooBig  bool
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"cas.put","params":{"raw_bytes":16,"session_id":"s"}}`, 16, true, false},
		{`{"jsonrpc":"2.0","id":7,"method":"cas.put","params":{"raw_bytes":0,"session_id":"s"}}`, 0, true, false},
		{`{"jsonrpc":"2.0","id":7,"method":"cas.put","params":{"raw_bytes":4194305,"session_id":"s"}}`, 4194305, true, true},
		{`{"jsonrpc":"2.0","id":7,"method":"cas.put","params":{"raw_bytes":99999999999999999999,"session_id":"s"}}`, 0, false, false},
		{`{"jsonrpc":"2.0","id":7,"method":"cas.put","params":{"raw_bytes":016,"session_id":"s"}}`, 0, false, false},
		{`{"jsonrpc":"2.0","id":07,"method":"cas.put","params":{"raw_bytes":16,"session_id":"s"}}`, 0, false, false},
		{`{"jsonrpc":"2.0","id":"7","method":"cas.put","params":{"raw_bytes":16,"session_id":"s"}}`, 0, false, false},
		{`{"jsonrpc":"2.0","id":7,"method":"cas.put","params":{"raw_bytes":16}}`, 0, false, false},
		{`{"jsonrpc":"2.0","id":7,"method":"cas.put","params":{"session_id":"s","raw_bytes":16}}`, 0, false, false},
		{`{"jsonrpc":"2.0","id":7,"method":"cas.get","params":{"raw_bytes":16,"session_id":"s"}}`, 0, false, false},
		{`{"jsonrpc":"2.0", "id":7,"method":"cas.put","params":{"raw_bytes":16,"session_id":"s"}}`, 0, false, false},
		{`{"jsonrpc":"2.0","id":7,"method":"cas.put","params":{"raw_bytes":-1,"session_id":"s"}}`, 0, false, false},
	} {
		n, ok, err := CASRawFrameLen([]byte(c.line), 4<<20)
		if ok != c.isFrame || (err != nil) != c.tooBig || (ok && n != c.n) {
			t.Errorf("%s: %d %v %v", c.line, n, ok, err)
		}
		if c.tooBig && !errors.Is(err, ErrRawFrameTooLarge) {
			t.Errorf("%s: %v", c.line, err)
		}
	}
}

// ParseCASPutRaw refuses params that do not account for every byte.
func TestParseCASPutRawRefuses(t *testing.T) {
	d3, d2 := rawDigest('a', 3), rawDigest('b', 2)
	for _, c := range []struct {
		params string
		raw    string
		max    int
	}{
		{`{"raw_bytes":5,"session_id":"s","digests":["` + d3 + `"]}`, "abcde", 8},               // sizes short of the bytes
		{`{"raw_bytes":5,"session_id":"s","digests":["` + d3 + `","` + d3 + `"]}`, "abcde", 8},  // sizes past them
		{`{"raw_bytes":4,"session_id":"s","digests":["` + d3 + `","` + d2 + `"]}`, "abcde", 8},  // raw_bytes is not the length
		{`{"raw_bytes":5,"session_id":"s","digests":["` + d3 + `","` + d2 + `"]}`, "abcde", 1},  // too many objects
		{`{"raw_bytes":5,"session_id":"s","digests":["` + d3 + `","` + d2 + `"]} `, "abcde", 8}, // trailing bytes
		{`{"raw_bytes":5,"session_id":"s","digests":["` + d3 + `","abc"]}`, "abcde", 8},         // no size
		{`{"raw_bytes":5,"session_id":"s","digests":["` + d3 + `","x/+2"]}`, "abcde", 8},        // a signed size
		{`{"raw_bytes":5,"session_id":"s","txn":7,"digests":["` + d3 + `","` + d2 + `"]}`, "abcde", 8},
		{`{"raw_bytes":5,"session_id":"s\u0031","digests":["` + d3 + `","` + d2 + `"]}`, "abcde", 8},
		{`{"session_id":"s","raw_bytes":5,"digests":["` + d3 + `","` + d2 + `"]}`, "abcde", 8},
		{`{"raw_bytes":5,"session_id":"s","digests":["` + d3 + `",]}`, "abcde", 8},
	} {
		if sid, _, ds, _, err := ParseCASPutRaw([]byte(c.params), []byte(c.raw), c.max); err == nil {
			t.Errorf("took %s: %q %q", c.params, sid, ds)
		}
	}
	sid, _, ds, data, err := ParseCASPutRaw([]byte(`{"raw_bytes":5,"session_id":"s","digests":["`+d3+`","`+d2+`"]}`), []byte("abcde"), 2)
	if err != nil || sid != "s" || len(ds) != 2 || string(data[0]) != "abc" || string(data[1]) != "de" {
		t.Fatalf("%q %q %q %v", sid, ds, data, err)
	}
	// An object's slice cannot be appended into the next one's bytes.
	if cap(data[0]) != 3 {
		t.Errorf("cap %d", cap(data[0]))
	}
}

// FuzzCASPutRaw: any line and bytes after it. A frame's declared length
// is bounded as asked; when ParseCASPutRaw takes params, encoding/json
// reads the same session, txn and digests, the objects cover the bytes
// exactly in order, and writing them again gives the same frame.
func FuzzCASPutRaw(f *testing.F) {
	r := &CASPutRequest{SessionID: "s_1", Txn: "u_1", Digests: []string{rawDigest('a', 3), rawDigest('b', 0)}, Data: [][]byte{[]byte("a\nb"), {}}}
	frame := r.AppendRawRequest(nil, 9)
	line, raw, _ := bytes.Cut(frame, []byte("\n"))
	f.Add(line, raw)
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"cas.put","params":{"raw_bytes":2,"session_id":"s","digests":["x/1","y/1"]}}`), []byte("ab"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"cas.put","params":{"raw_bytes":99,"session_id":"s","digests":[]}}`), []byte("ab"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"cas.put","params":{"raw_bytes":0,"session_id":"s","digests":["x/18446744073709551615"]}}`), []byte{})
	f.Fuzz(func(t *testing.T, line, raw []byte) {
		const max = 1 << 10
		n, ok, err := CASRawFrameLen(line, max)
		if !ok {
			return
		}
		if err != nil {
			if n <= max || !errors.Is(err, ErrRawFrameTooLarge) {
				t.Fatalf("refused %d: %v", n, err)
			}
			return
		}
		if n < 0 || n > max {
			t.Fatalf("frame of %d bytes", n)
		}
		m, perr := ParseMessage(line)
		if perr != nil {
			return
		}
		sid, txn, ds, data, err := ParseCASPutRaw(m.Params, raw, 16)
		if err != nil {
			return
		}
		var p struct {
			RawBytes  int64    `json:"raw_bytes"`
			SessionID string   `json:"session_id"`
			Txn       string   `json:"txn"`
			Digests   []string `json:"digests"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			t.Fatalf("took params encoding/json refuses: %q: %v", m.Params, err)
		}
		if p.SessionID != sid || p.Txn != txn || len(p.Digests) != len(ds) || p.RawBytes != int64(len(raw)) {
			t.Fatalf("fast %q %q %q, json %+v", sid, txn, ds, p)
		}
		if len(ds) > 16 || !bytes.Equal(bytes.Join(data, nil), raw) {
			t.Fatalf("objects %q do not cover %q", data, raw)
		}
		again := (&CASPutRequest{SessionID: sid, Txn: txn, Digests: ds, Data: data}).AppendRawRequest(nil, 9)
		l2, raw2, _ := bytes.Cut(again, []byte("\n"))
		m2, perr := ParseMessage(l2)
		if perr != nil || !bytes.Equal(m2.Params, m.Params) || !bytes.Equal(raw2, raw) {
			t.Fatalf("written again as %q, read from %q %q", again, line, raw)
		}
	})
}
