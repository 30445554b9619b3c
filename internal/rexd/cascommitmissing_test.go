package rexd_test

import (
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestCASCommitMissingSaysAborted: cas.commit of an update whose blobs
// were not all sent aborts it (rex does not abort after a failed commit),
// so its answer must not tell the client to send them first: the txn is
// gone, and a cas.put into it is refused. It says to start again.
func TestCASCommitMissingSaysAborted(t *testing.T) {
	h := start(t)
	sid := h.open()
	txn := needOne(h, sid, "out", []byte("never sent\n"))
	e := h.fails(protocol.MethodCASCommit, protocol.CASTxnParams{SessionID: sid, Txn: txn}, protocol.CodeInvalidParams)
	if strings.Contains(e.Message, "send them first") || !strings.Contains(e.Message, "cas.materialize again") {
		t.Errorf("cas.commit with a blob missing answered %q: the update is aborted, so it must say to run cas.materialize again", e.Message)
	}
	e = h.fails(protocol.MethodCASNeeded, protocol.CASTxnParams{SessionID: sid, Txn: txn}, protocol.CodeInvalidParams)
	if !strings.Contains(e.Message, "no update") {
		t.Errorf("cas.needed after the failed commit: %q", e.Message)
	}
}
