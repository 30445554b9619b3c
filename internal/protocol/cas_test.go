package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
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
