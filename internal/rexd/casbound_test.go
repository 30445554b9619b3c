package rexd_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/protocol"
)

// TestCASWorkInProgressIsBounded: each streamed upload and each blob being
// streamed into an update holds an open temp file, and each update waiting
// for blobs holds its whole plan; a session may have 64, 64 per update and
// 16 of them at once. One more is -32008 with data.limit naming what ran
// out, and ending one makes room again. Unbounded, a client opened
// uploads of 1-byte blobs until rexd ran out of file descriptors, and
// every session of that rexd failed.
func TestCASWorkInProgressIsBounded(t *testing.T) {
	h := start(t)
	sid := h.open()
	blob := func(i int) ([]byte, cas.Digest) {
		b := []byte(fmt.Sprintf("blob %d\n", i))
		return b, cas.DigestOf(b)
	}
	// chunk is the first half of blob i, for the update txn or the store.
	chunk := func(txn string, i int) protocol.CASPutChunkParams {
		b, d := blob(i)
		return protocol.CASPutChunkParams{SessionID: sid, Txn: txn, Digest: d.String(), Data: base64.StdEncoding.EncodeToString(b[:len(b)/2])}
	}
	refusedAs := func(e *protocol.Error, limit string) {
		t.Helper()
		var d protocol.ResourceLimitData
		json.Unmarshal(e.Data, &d)
		if d.Limit != limit {
			t.Errorf("refused with data %s, want limit %q", e.Data, limit)
		}
	}

	// Uploads to the store: 64 started, the 65th refused; one finished
	// (its last piece from where it is) lets another start.
	for i := range 64 {
		h.ok(protocol.MethodCASPutChunk, chunk("", i), nil)
	}
	refusedAs(h.fails(protocol.MethodCASPutChunk, chunk("", 64), protocol.CodeResourceLimit), "uploads")
	b0, d0 := blob(0)
	h.ok(protocol.MethodCASPutChunk, protocol.CASPutChunkParams{SessionID: sid, Digest: d0.String(), Offset: int64(len(b0) / 2), Data: base64.StdEncoding.EncodeToString(b0[len(b0)/2:]), Final: true}, nil)
	h.ok(protocol.MethodCASPutChunk, chunk("", 64), nil)

	// An update needing 65 blobs: 64 streamed at once, not 65.
	var tree cas.Tree
	for i := 100; i < 165; i++ {
		_, d := blob(i)
		tree.Entries = append(tree.Entries, cas.Entry{Name: fmt.Sprintf("f%03d", i), Type: cas.EntryFile, Digest: d})
	}
	enc, err := tree.Encode()
	if err != nil {
		t.Fatal(err)
	}
	td := cas.DigestOf(enc)
	h.ok(protocol.MethodCASPut, protocol.CASPutParams{SessionID: sid, Objects: []protocol.CASObject{{Digest: td.String(), Data: base64.StdEncoding.EncodeToString(enc)}}}, nil)
	var m protocol.CASMaterializeResult
	h.ok(protocol.MethodCASMaterialize, protocol.CASMaterializeParams{SessionID: sid, Tree: td.String(), Path: "many"}, &m)
	for i := 100; i < 164; i++ {
		h.ok(protocol.MethodCASPutChunk, chunk(m.Txn, i), nil)
	}
	refusedAs(h.fails(protocol.MethodCASPutChunk, chunk(m.Txn, 164), protocol.CodeResourceLimit), "uploads")
	h.ok(protocol.MethodCASAbort, protocol.CASTxnParams{SessionID: sid, Txn: m.Txn}, nil)

	// Updates waiting for blobs: 16, not 17; an abort makes room.
	var txns []string
	for i := 200; i < 217; i++ {
		_, d := blob(i)
		one, err := cas.Tree{Entries: []cas.Entry{{Name: "f", Type: cas.EntryFile, Digest: d}}}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		od := cas.DigestOf(one)
		h.ok(protocol.MethodCASPut, protocol.CASPutParams{SessionID: sid, Objects: []protocol.CASObject{{Digest: od.String(), Data: base64.StdEncoding.EncodeToString(one)}}}, nil)
		p := protocol.CASMaterializeParams{SessionID: sid, Tree: od.String(), Path: fmt.Sprintf("one%d", i)}
		if i == 216 {
			refusedAs(h.fails(protocol.MethodCASMaterialize, p, protocol.CodeResourceLimit), "updates")
			h.ok(protocol.MethodCASAbort, protocol.CASTxnParams{SessionID: sid, Txn: txns[0]}, nil)
		}
		h.ok(protocol.MethodCASMaterialize, p, &m)
		txns = append(txns, m.Txn)
	}
}
