package rexd_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/protocol"
)

// needOne puts a tree of one file with content and materializes it into
// dir; it returns the txn waiting for the file's blob.
func needOne(h *harness, sid, dir string, content []byte) string {
	h.t.Helper()
	tree, _ := cas.Tree{Entries: []cas.Entry{{Name: "f", Type: cas.EntryFile, Digest: cas.DigestOf(content)}}}.Encode()
	td := cas.DigestOf(tree)
	h.ok(protocol.MethodCASPut, protocol.CASPutParams{SessionID: sid, Objects: []protocol.CASObject{{Digest: td.String(), Data: base64.StdEncoding.EncodeToString(tree)}}}, nil)
	var m protocol.CASMaterializeResult
	h.ok(protocol.MethodCASMaterialize, protocol.CASMaterializeParams{SessionID: sid, Tree: td.String(), Path: dir}, &m)
	if m.Txn == "" || m.NeededTotal != 1 {
		h.t.Fatalf("materialize: %+v", m)
	}
	return m.Txn
}

// TestCASPutChunkWrongOffsetKeepsUpload: a chunk at an offset other than
// the one expected is a client's mistake (-32602, not an internal error),
// and the upload stays, so that "resend from N" in the answer is true:
// the chunk resent from there completes it. Into the store and into an
// update alike.
func TestCASPutChunkWrongOffsetKeepsUpload(t *testing.T) {
	content := []byte(strings.Repeat("0123456789", 10))
	d := cas.DigestOf(content)
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	for _, tc := range []struct {
		name string
		txn  bool
	}{{"store", false}, {"txn", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t).with(t)
			sid := h.open()
			txn := ""
			if tc.txn {
				txn = needOne(h, sid, "out", content)
			}
			chunk := func(off int64, data []byte, final bool) protocol.CASPutChunkParams {
				return protocol.CASPutChunkParams{SessionID: sid, Txn: txn, Digest: d.String(), Offset: off, Data: b64(data), Final: final}
			}
			var res protocol.CASPutChunkResult
			h.ok(protocol.MethodCASPutChunk, chunk(0, content[:40], false), &res)
			// Sent again (a retry), and a gap.
			for _, off := range []int64{20, 60} {
				e := h.fails(protocol.MethodCASPutChunk, chunk(off, content[off:off+10], false), protocol.CodeInvalidParams)
				if !strings.Contains(e.Message, "resend from 40") {
					t.Errorf("offset %d: %q does not say where to resend from", off, e.Message)
				}
			}
			h.ok(protocol.MethodCASPutChunk, chunk(40, content[40:], true), &res)
			if !res.Committed || res.Offset != int64(len(content)) {
				t.Fatalf("the chunk resent from 40: %+v", res)
			}
			if tc.txn {
				h.ok(protocol.MethodCASCommit, protocol.CASTxnParams{SessionID: sid, Txn: txn}, nil)
				if b, _ := os.ReadFile(filepath.Join(h.root, "out", "f")); string(b) != string(content) {
					t.Fatalf("out/f = %q", b)
				}
			} else {
				var has protocol.CASHasResult
				h.ok(protocol.MethodCASHas, protocol.CASDigests{SessionID: sid, Digests: []string{d.String()}}, &has)
				if len(has.Missing) != 0 {
					t.Fatalf("not stored: %v", has.Missing)
				}
			}
		})
	}
}
