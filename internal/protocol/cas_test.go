package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// The cas.put fast path writes what encoding/json reads, and reads back
// exactly what it wrote.
func TestCASPutFastPath(t *testing.T) {
	r := &CASPutRequest{SessionID: "s_1", Txn: "u_7", Digests: []string{"ab/3", "cd/0"}, Data: [][]byte{{1, 2, 3}, {}}}
	line := r.AppendRequest(nil, 42, MethodCASPut)
	if line[len(line)-1] != '\n' {
		t.Fatal("no newline")
	}
	m, perr := ParseMessage(bytes.TrimSuffix(line, []byte("\n")))
	if perr != nil || m.Method != MethodCASPut || string(m.ID) != "42" {
		t.Fatalf("%v %+v", perr, m)
	}
	var p CASPutParams
	if err := json.Unmarshal(m.Params, &p); err != nil || p.SessionID != "s_1" || p.Txn != "u_7" || len(p.Objects) != 2 ||
		p.Objects[0].Data != base64.StdEncoding.EncodeToString([]byte{1, 2, 3}) {
		t.Fatalf("encoding/json reads %+v %v", p, err)
	}
	sid, txn, ds, data, ok := ParseCASPutParams(m.Params)
	if !ok || sid != "s_1" || txn != "u_7" || len(ds) != 2 || ds[1] != "cd/0" || !bytes.Equal(data[0], []byte{1, 2, 3}) || len(data[1]) != 0 {
		t.Fatalf("fast path reads %q %q %q %v %v", sid, txn, ds, data, ok)
	}
	// Without a txn, and with none of the layout: the fast path declines.
	r.Txn = ""
	m, _ = ParseMessage(bytes.TrimSuffix(r.AppendRequest(nil, 1, MethodCASPut), []byte("\n")))
	if _, txn, _, _, ok := ParseCASPutParams(m.Params); !ok || txn != "" {
		t.Fatal("no txn")
	}
	for _, bad := range []string{
		`{"objects":[],"session_id":"s"}`,
		`{"session_id":"s","objects":[{"digest":"a","data":"AQID"}] }`,
		`{"session_id":"s\u0031","objects":[]}`,
		`{"session_id":"s","objects":[{"digest":"a","data":"AQI"}]}`,
		`{"session_id":"s","objects":[{"digest":"a","data":"AQ\nID"}]}`,
		`{"session_id":"s","objects":[{"digest":"a","data":"AQ\"ID"}]}`,
	} {
		if _, _, _, _, ok := ParseCASPutParams([]byte(bad)); ok {
			t.Errorf("fast path took %s", bad)
		}
	}
}

// The envelope of rex's cas.put line is read without encoding/json, to
// the same Message; any other line goes to encoding/json.
func TestCASPutMessageFastPath(t *testing.T) {
	r := &CASPutRequest{SessionID: "s_1", Txn: "u_7", Digests: []string{"ab/3", "cd/0"}, Data: [][]byte{{1, 2, 3}, {}}}
	line := bytes.TrimSuffix(r.AppendRequest(nil, 42, MethodCASPut), []byte("\n"))
	m, ok := parseCASPutMessage(line)
	var want Message
	if err := json.Unmarshal(line, &want); err != nil || !ok || !sameMessage(m, &want) {
		t.Fatalf("fast %+v %v, json %+v %v", m, ok, want, err)
	}
	if &m.Params[0] == &line[len(`{"jsonrpc":"2.0","id":42,"method":"cas.put","params":`)] {
		t.Error("the params alias the line, which the reader reuses")
	}
	for _, bad := range []string{
		strings.Replace(string(line), `"id":42`, `"id":042`, 1),
		strings.Replace(string(line), `"id":42`, `"id":"42"`, 1),
		strings.Replace(string(line), `"id":42`, `"id":-1`, 1),
		strings.Replace(string(line), `"cas.put"`, `"cas.get"`, 1),
		strings.Replace(string(line), `"AQID"`, `"AQ\u0049D"`, 1),
		strings.Replace(string(line), `"AQID"`, `"AQ ID"`, 1),
		string(line) + " ",
		" " + string(line),
		string(line[:len(line)-1]),
		string(line) + "}",
	} {
		if _, ok := parseCASPutMessage([]byte(bad)); ok {
			t.Errorf("fast path took %s", bad)
		}
	}
}

// sameMessage compares two messages field by field.
func sameMessage(a, b *Message) bool {
	return a.JSONRPC == b.JSONRPC && bytes.Equal(a.ID, b.ID) && a.Method == b.Method &&
		bytes.Equal(a.Params, b.Params) && bytes.Equal(a.Result, b.Result) && (a.Error == nil) == (b.Error == nil)
}

// BenchmarkParseCASPutLine: a receiving rexd reads a 128 KiB batch of
// blobs (envelope, then params) through the fast path and through
// encoding/json's envelope.
func BenchmarkParseCASPutLine(b *testing.B) {
	data := make([]byte, 128<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	r := &CASPutRequest{SessionID: "s_1", Txn: "u_7", Digests: []string{"ab/3"}, Data: [][]byte{data}}
	line := bytes.TrimSuffix(r.AppendRequest(nil, 42, MethodCASPut), []byte("\n"))
	for _, c := range []struct {
		name  string
		parse func([]byte) (*Message, error)
	}{
		{"fast", func(l []byte) (*Message, error) {
			m, perr := ParseMessage(l)
			if perr != nil {
				return nil, perr
			}
			return m, nil
		}},
		{"encoding-json", func(l []byte) (*Message, error) {
			var m Message
			return &m, json.Unmarshal(l, &m)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				m, err := c.parse(line)
				if err != nil {
					b.Fatal(err)
				}
				if _, _, _, _, ok := ParseCASPutParams(m.Params); !ok {
					b.Fatal("params")
				}
			}
		})
	}
}

// FuzzParseCASPutParams: whatever the fast path accepts, encoding/json
// reads the same way.
func FuzzParseCASPutParams(f *testing.F) {
	r := &CASPutRequest{SessionID: "s_1", Txn: "u_1", Digests: []string{"ab/3"}, Data: [][]byte{{1, 2, 3}}}
	line := r.AppendRequest(nil, 1, MethodCASPut)
	m, _ := ParseMessage(bytes.TrimSuffix(line, []byte("\n")))
	f.Add([]byte(m.Params))
	f.Add([]byte(`{"session_id":"s","objects":[]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		sid, txn, ds, data, ok := ParseCASPutParams(raw)
		if !ok {
			return
		}
		var p CASPutParams
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatalf("fast path took what encoding/json refuses: %q: %v", raw, err)
		}
		if p.SessionID != sid || p.Txn != txn || len(p.Objects) != len(ds) {
			t.Fatalf("fast %q %q %d, json %+v", sid, txn, len(ds), p)
		}
		for i, o := range p.Objects {
			b, err := base64.StdEncoding.Strict().DecodeString(o.Data)
			if o.Digest != ds[i] || err != nil || !bytes.Equal(b, data[i]) {
				t.Fatalf("object %d: fast %q %x, json %q %x %v", i, ds[i], data[i], o.Digest, b, err)
			}
		}
	})
}
