package rexd_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/protocol"
)

// TestCASPutTxnAllOrNothing: cas.put into an update is all or nothing, as
// the answer says: an object the update does not need refuses the call
// before any other object of it is written, and an object sent again (a
// retry whose answer was lost, or twice in one call) is the same bytes,
// taken as received, not an internal error.
func TestCASPutTxnAllOrNothing(t *testing.T) {
	h := start(t)
	sid := h.open()
	a, b, stray := []byte("alpha\n"), []byte("beta\n"), []byte("stray\n")
	ad, bd := cas.DigestOf(a), cas.DigestOf(b)
	tree, _ := cas.Tree{Entries: []cas.Entry{
		{Name: "a", Type: cas.EntryFile, Digest: ad},
		{Name: "b", Type: cas.EntryFile, Digest: bd},
	}}.Encode()
	td := cas.DigestOf(tree)
	obj := func(data []byte) protocol.CASObject {
		return protocol.CASObject{Digest: cas.DigestOf(data).String(), Data: base64.StdEncoding.EncodeToString(data)}
	}
	h.ok(protocol.MethodCASPut, protocol.CASPutParams{SessionID: sid, Objects: []protocol.CASObject{obj(tree)}}, nil)
	var m protocol.CASMaterializeResult
	h.ok(protocol.MethodCASMaterialize, protocol.CASMaterializeParams{SessionID: sid, Tree: td.String(), Path: "out"}, &m)
	if m.NeededTotal != 2 {
		t.Fatalf("materialize: %+v", m)
	}
	put := func(objs ...protocol.CASObject) protocol.CASPutParams {
		return protocol.CASPutParams{SessionID: sid, Txn: m.Txn, Objects: objs}
	}
	needed := func() int {
		var n protocol.CASNeededResult
		h.ok(protocol.MethodCASNeeded, protocol.CASTxnParams{SessionID: sid, Txn: m.Txn}, &n)
		return n.Total
	}

	e := h.fails(protocol.MethodCASPut, put(obj(a), obj(stray)), protocol.CodeInvalidParams)
	if n := needed(); n != 2 {
		t.Fatalf("a refused cas.put (%s) received %d object(s) all the same", e.Message, 2-n)
	}
	h.ok(protocol.MethodCASPut, put(obj(a)), nil)
	h.ok(protocol.MethodCASPut, put(obj(a), obj(b), obj(b)), nil) // a again, b twice
	if n := needed(); n != 0 {
		t.Fatalf("%d still needed", n)
	}
	h.ok(protocol.MethodCASCommit, protocol.CASTxnParams{SessionID: sid, Txn: m.Txn}, nil)
	for name, want := range map[string][]byte{"a": a, "b": b} {
		if got, _ := os.ReadFile(filepath.Join(h.root, "out", name)); string(got) != string(want) {
			t.Errorf("out/%s = %q, want %q", name, got, want)
		}
	}
	// The temporary files of the objects sent again are gone too.
	ents, _ := os.ReadDir(filepath.Join(h.root, "out"))
	if len(ents) != 2 {
		t.Errorf("out holds %d entries, want a and b: %v", len(ents), ents)
	}
}
