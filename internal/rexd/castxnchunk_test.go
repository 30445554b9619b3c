package rexd_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/protocol"
)

// TestCASPutChunkTxnClientMistakes: put_chunk into an update of a blob it
// has received already is the client's mistake, -32602 with a reason, not
// internal_error.
func TestCASPutChunkTxnClientMistakes(t *testing.T) {
	h := start(t)
	sid := h.open()
	content := []byte("once\n")
	d := cas.DigestOf(content)
	txn := needOne(h, sid, "out", content)
	data := base64.StdEncoding.EncodeToString(content)
	h.ok(protocol.MethodCASPutChunk, protocol.CASPutChunkParams{SessionID: sid, Txn: txn, Digest: d.String(), Data: data, Final: true}, nil)
	e := h.fails(protocol.MethodCASPutChunk, protocol.CASPutChunkParams{SessionID: sid, Txn: txn, Digest: d.String(), Data: data, Final: true}, protocol.CodeInvalidParams)
	if !strings.Contains(e.Message, "already received") {
		t.Errorf("the second put_chunk: %q", e.Message)
	}
}
