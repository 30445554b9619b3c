package rexd

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/protocol"
)

// lineServer is a Server on pipes driven by raw JSON-RPC lines, as a
// client that is not rexclient would drive it.
type lineServer struct {
	t    *testing.T
	root string
	in   io.WriteCloser
	msgs chan *protocol.Message
	id   int
}

func serveLines(t *testing.T, hook func(ctx context.Context, method string)) *lineServer {
	t.Helper()
	root := t.TempDir()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	srv, cr, cw, done := servePipes(t, root, hook)
	ls := &lineServer{t: t, root: root, in: cw, msgs: make(chan *protocol.Message, 64)}
	go func() {
		defer close(ls.msgs)
		sc := bufio.NewScanner(cr)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var m protocol.Message
			if json.Unmarshal(sc.Bytes(), &m) == nil && m.IsResponse() {
				ls.msgs <- &m
			}
		}
	}()
	t.Cleanup(func() { cw.Close(); <-done; srv.Close() })
	return ls
}

// send writes a request and returns its id.
func (ls *lineServer) send(method string, params any) string {
	ls.t.Helper()
	ls.id++
	req, err := protocol.NewRequest(int64(ls.id), method, params)
	if err != nil {
		ls.t.Fatal(err)
	}
	b, _ := json.Marshal(req)
	if _, err := ls.in.Write(append(b, '\n')); err != nil {
		ls.t.Fatal(err)
	}
	return strconv.Itoa(ls.id)
}

func (ls *lineServer) notify(method string, params any) {
	ls.t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	if _, err := ls.in.Write(append(b, '\n')); err != nil {
		ls.t.Fatal(err)
	}
}

// answer waits for the response to id (requests here are answered in
// the order they are sent, one at a time).
func (ls *lineServer) answer(id string) *protocol.Message {
	ls.t.Helper()
	select {
	case m, ok := <-ls.msgs:
		if !ok {
			ls.t.Fatal("the connection ended")
		}
		if string(m.ID) != id {
			ls.t.Fatalf("answer to %s, want %s", m.ID, id)
		}
		return m
	case <-time.After(60 * time.Second): // a bound for an answer that never comes
		ls.t.Fatalf("no answer to %s", id)
		return nil
	}
}

func (ls *lineServer) call(method string, params any) *protocol.Message {
	ls.t.Helper()
	return ls.answer(ls.send(method, params))
}

// TestCancelledMaterializeLeavesNoTxn: a cas.materialize cancelled after
// its update was prepared (its staging directory made) answers
// request_cancelled and aborts the update: no txn stays in the session
// and no .rex-* temporary file in the destination's parent, while the
// session stays open. The client never learned the txn id, so nothing
// else could have aborted it.
func TestCancelledMaterializeLeavesNoTxn(t *testing.T) {
	prepared := make(chan struct{})
	ls := serveLines(t, func(ctx context.Context, method string) {
		if method != casMaterializePrepared {
			return
		}
		close(prepared)
		<-ctx.Done() // the client's $/cancelRequest reached the handler
	})
	var open protocol.SessionOpenResult
	m := ls.call(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "test"})
	if m.Error != nil || json.Unmarshal(m.Result, &open) != nil {
		t.Fatalf("session.open: %v", m.Error)
	}
	sid := open.SessionID

	blob := cas.DigestOf([]byte("not sent yet"))
	tree, _ := cas.Tree{Entries: []cas.Entry{{Name: "f", Type: cas.EntryFile, Digest: blob}}}.Encode()
	td := cas.DigestOf(tree)
	if m := ls.call(protocol.MethodCASPut, protocol.CASPutParams{SessionID: sid,
		Objects: []protocol.CASObject{{Digest: td.String(), Data: base64.StdEncoding.EncodeToString(tree)}}}); m.Error != nil {
		t.Fatalf("cas.put: %v", m.Error)
	}

	id := ls.send(protocol.MethodCASMaterialize, protocol.CASMaterializeParams{SessionID: sid, Tree: td.String(), Path: "out"})
	<-prepared
	if temps := rexTemps(t, ls.root); len(temps) == 0 {
		t.Fatal("the prepared update made no temporary files: the test does not test what it means to")
	}
	n, _ := strconv.Atoi(id)
	ls.notify(protocol.MethodCancelRequest, protocol.CancelParams{ID: json.RawMessage(strconv.Itoa(n))})
	m = ls.answer(id)
	if m.Error == nil || m.Error.Code != protocol.CodeRequestCancelled {
		t.Errorf("a cancelled cas.materialize answered %s %v, want request_cancelled", m.Result, m.Error)
	}

	// The first txn of this rexd would be u_1.
	m = ls.call(protocol.MethodCASNeeded, protocol.CASTxnParams{SessionID: sid, Txn: "u_1"})
	if m.Error == nil || !strings.Contains(string(m.Error.Data), "unknown_txn") {
		t.Errorf("cas.needed of the cancelled update answered %s %v; the txn stayed open", m.Result, m.Error)
	}
	if temps := rexTemps(t, ls.root); len(temps) != 0 {
		t.Errorf("temporary files left after the cancelled update: %v", temps)
	}
	if m := ls.call(protocol.MethodSessionInfo, protocol.SessionRef{SessionID: sid}); m.Error != nil {
		t.Errorf("the session did not stay open: %v", m.Error)
	}
}

func rexTemps(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".rex-") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
