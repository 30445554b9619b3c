package rexd_test

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/protocol"
)

// rawPut writes a raw cas.put frame (its line, then the objects' bytes) and
// returns the answer.
func (h *harness) rawPut(sid, txn string, digests []string, data [][]byte) *protocol.Message {
	h.t.Helper()
	h.nextID++
	id := h.nextID + 1000
	r := &protocol.CASPutRequest{SessionID: sid, Txn: txn, Digests: digests, Data: data}
	if _, err := h.stdin.Write(r.AppendRawRequest(nil, int64(id))); err != nil {
		h.t.Fatalf("write to rexd: %v", err)
	}
	return h.response(strconv.Itoa(id))
}

func reason(e *protocol.Error) string {
	var d map[string]any
	json.Unmarshal(e.Data, &d)
	s, _ := d["reason"].(string)
	return s
}

// TestCASPutRaw: rexd announces raw cas.put frames and stores what they
// carry, verified like base64 objects (all or nothing); frames that do
// not add up are refused with the stream still in step; an update takes
// its blobs so; the audit log has counts, never the bytes.
func TestCASPutRaw(t *testing.T) {
	h := start(t)
	var open protocol.SessionOpenResult
	h.ok(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "test"}, &open)
	if !slices.Contains(open.Capabilities, protocol.CapCASRaw) {
		t.Fatalf("capabilities %v lack %q", open.Capabilities, protocol.CapCASRaw)
	}
	sid := open.SessionID

	// Bytes that look like JSON-RPC lines travel as bytes, not lines.
	secret := []byte("RAW-SECRET\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.close\"}\n")
	other := []byte("RAW-OTHER-SECRET")
	sd, od := cas.DigestOf(secret), cas.DigestOf(other)
	if m := h.rawPut(sid, "", []string{sd.String(), od.String()}, [][]byte{secret, other}); m.Error != nil {
		t.Fatalf("raw put: %v", m.Error)
	}
	var has protocol.CASHasResult
	h.ok(protocol.MethodCASHas, protocol.CASDigests{SessionID: sid, Digests: []string{sd.String(), od.String()}}, &has)
	if len(has.Missing) != 0 {
		t.Fatalf("stored objects missing: %v", has.Missing)
	}

	// Refused, nothing stored, the next request read in step.
	good := []byte("good bytes")
	gd := cas.DigestOf(good)
	tampered := cas.DigestOf([]byte("goodbytes!")) // the size of what is sent, another hash
	for _, c := range []struct {
		name    string
		digests []string
		data    [][]byte
		reason  string
	}{
		{"tampered", []string{gd.String(), tampered.String()}, [][]byte{good, []byte("tamp bytes")}, "digest_mismatch"},
		{"bad digest", []string{gd.String(), strings.Repeat("X", 64) + "/3"}, [][]byte{good, []byte("abc")}, "invalid_digest"},
		{"sizes short", []string{gd.String()}, [][]byte{append(good, 'x')}, "bad_raw_frame"},
	} {
		m := h.rawPut(sid, "", c.digests, c.data)
		if m.Error == nil || m.Error.Code != protocol.CodeInvalidParams || reason(m.Error) != c.reason {
			t.Errorf("%s: want %s, got %v", c.name, c.reason, m.Error)
		}
	}
	h.ok(protocol.MethodCASHas, protocol.CASDigests{SessionID: sid, Digests: []string{gd.String()}}, &has)
	if len(has.Missing) != 1 {
		t.Fatalf("a refused batch stored something: missing %v", has.Missing)
	}

	// An update asks for a blob and takes it from a raw frame.
	tree, _ := cas.Tree{Entries: []cas.Entry{{Name: "f", Type: cas.EntryFile, Digest: gd}}}.Encode()
	td := cas.DigestOf(tree)
	if m := h.rawPut(sid, "", []string{td.String()}, [][]byte{tree}); m.Error != nil {
		t.Fatalf("raw put of the tree: %v", m.Error)
	}
	var mat protocol.CASMaterializeResult
	h.ok(protocol.MethodCASMaterialize, protocol.CASMaterializeParams{SessionID: sid, Tree: td.String(), Path: "out"}, &mat)
	if mat.Txn == "" || mat.NeededTotal != 1 {
		t.Fatalf("materialize: %+v", mat)
	}
	if m := h.rawPut(sid, mat.Txn, []string{gd.String()}, [][]byte{good}); m.Error != nil {
		t.Fatalf("raw put into the update: %v", m.Error)
	}
	h.ok(protocol.MethodCASCommit, protocol.CASTxnParams{SessionID: sid, Txn: mat.Txn}, &mat)
	if b, _ := os.ReadFile(filepath.Join(h.root, "out", "f")); string(b) != string(good) {
		t.Fatalf("out/f = %q", b)
	}

	h.stdin.Close()
	<-h.exited
	log, err := os.ReadFile(h.audit)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"RAW-SECRET", "RAW-OTHER", "good bytes"} {
		if strings.Contains(string(log), leak) {
			t.Fatalf("the audit log holds object contents (%q):\n%s", leak, log)
		}
	}
	if !strings.Contains(string(log), `"bytes":`+strconv.Itoa(len(secret)+len(other))) {
		t.Errorf("the audit log lacks the raw put's byte total:\n%s", log)
	}
}

// A frame that declares more bytes than a call may carry is refused
// before anything is read or allocated for it, and the connection ends
// (its bytes cannot be skipped in step).
func TestCASPutRawTooLarge(t *testing.T) {
	h := start(t)
	sid := h.open()
	line := `{"jsonrpc":"2.0","id":5,"method":"cas.put","params":{"raw_bytes":` + strconv.Itoa(cas.MaxBatchBytes+1) +
		`,"session_id":"` + sid + `","digests":["` + strings.Repeat("a", 64) + `/` + strconv.Itoa(cas.MaxBatchBytes+1) + `"]}}` + "\n"
	if _, err := io.WriteString(h.stdin, line); err != nil {
		t.Fatal(err)
	}
	m := h.wait(10*time.Second, func(m *protocol.Message) bool { return m.Error != nil })
	if m.Error.Code != protocol.CodeResourceLimit || !strings.Contains(m.Error.Message, "connection is closed") {
		t.Fatalf("got %v", m.Error)
	}
	select {
	case <-h.exited:
	case <-time.After(30 * time.Second): // a bound, not a speed goal
		t.Fatal("rexd kept the connection after a frame it cannot skip")
	}
}
