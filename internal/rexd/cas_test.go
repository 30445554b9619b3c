package rexd_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/protocol"
)

// TestCASAuditHoldsNoContents: the audit log records every cas.* call
// with counts and byte totals, never the objects' bytes: not in a put's
// params, a get's result, a chunk either way, nor an update's blobs.
func TestCASAuditHoldsNoContents(t *testing.T) {
	h := start(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	sid := h.open()
	secret := []byte("TOP-SECRET-CONTENT-" + strings.Repeat("x", 100))
	blob := cas.DigestOf(secret)
	b64 := base64.StdEncoding.EncodeToString(secret)

	h.ok(protocol.MethodCASPut, protocol.CASPutParams{SessionID: sid, Objects: []protocol.CASObject{{Digest: blob.String(), Data: b64}}}, nil)
	var got protocol.CASGetResult
	h.ok(protocol.MethodCASGet, protocol.CASDigests{SessionID: sid, Digests: []string{blob.String()}}, &got)
	if len(got.Objects) != 1 || got.Objects[0].Data != b64 {
		t.Fatalf("get: %+v", got)
	}
	var chunk protocol.CASGetChunkResult
	h.ok(protocol.MethodCASGetChunk, protocol.CASGetChunkParams{SessionID: sid, Digest: blob.String(), Length: 1 << 20}, &chunk)
	h.ok(protocol.MethodCASPutChunk, protocol.CASPutChunkParams{SessionID: sid, Digest: blob.String(), Data: b64, Final: true}, nil)

	// An update that needs the blob: it travels with the txn.
	other := []byte("ANOTHER-SECRET-" + strings.Repeat("y", 64))
	od := cas.DigestOf(other)
	tree, _ := cas.Tree{Entries: []cas.Entry{{Name: "f", Type: cas.EntryFile, Digest: od}}}.Encode()
	td := cas.DigestOf(tree)
	h.ok(protocol.MethodCASPut, protocol.CASPutParams{SessionID: sid, Objects: []protocol.CASObject{{Digest: td.String(), Data: base64.StdEncoding.EncodeToString(tree)}}}, nil)
	var m protocol.CASMaterializeResult
	h.ok(protocol.MethodCASMaterialize, protocol.CASMaterializeParams{SessionID: sid, Tree: td.String(), Path: "out"}, &m)
	if m.Txn == "" || m.NeededTotal != 1 {
		t.Fatalf("materialize: %+v", m)
	}
	h.ok(protocol.MethodCASPut, protocol.CASPutParams{SessionID: sid, Txn: m.Txn, Objects: []protocol.CASObject{{Digest: od.String(), Data: base64.StdEncoding.EncodeToString(other)}}}, nil)
	h.ok(protocol.MethodCASCommit, protocol.CASTxnParams{SessionID: sid, Txn: m.Txn}, &m)
	if b, _ := os.ReadFile(filepath.Join(h.root, "out", "f")); string(b) != string(other) {
		t.Fatalf("out/f = %q", b)
	}

	// rexd answers before it writes the audit entry: let it end first.
	h.stdin.Close()
	<-h.exited
	log, err := os.ReadFile(h.audit)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{string(secret), b64, string(other), base64.StdEncoding.EncodeToString(other), "TOP-SECRET", "ANOTHER-SECRET"} {
		if strings.Contains(string(log), leak) {
			t.Fatalf("the audit log holds object contents (%.20q…):\n%s", leak, log)
		}
	}
	// What is kept: counts and byte totals.
	seen := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(string(log)))
	for sc.Scan() {
		var e struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(e.Method, "cas.") {
			seen[e.Method] = map[string]any{"params": e.Params, "result": e.Result}
		}
	}
	put := seen["cas.put"]["params"].(map[string]any)
	if put["objects"] != float64(1) || put["bytes"] == nil {
		t.Errorf("cas.put params audited as %v", put)
	}
	if r := seen["cas.get"]["result"].(map[string]any); r["objects"] != float64(1) || r["bytes"] != float64(len(secret)) {
		t.Errorf("cas.get result audited as %v", r)
	}
	if r, _ := seen["cas.commit"]["result"].(map[string]any); r["added"] != float64(1) {
		t.Errorf("cas.commit result audited as %v", r)
	}
	for _, m := range []string{"cas.get_chunk", "cas.put_chunk", "cas.materialize"} {
		if seen[m] == nil {
			t.Errorf("%s is not in the audit log", m)
		}
	}
}

// TestCASMaterializeDryRunTrees: a dry run plans with the trees it is
// given and stores none of them; trees without dry_run are refused; the
// audit log counts them and never holds their bytes.
func TestCASMaterializeDryRunTrees(t *testing.T) {
	h := start(t)
	sid := h.open()
	blob := cas.DigestOf([]byte("content\n"))
	sub, _ := cas.Tree{Entries: []cas.Entry{{Name: "f", Type: cas.EntryFile, Digest: blob}}}.Encode()
	sd := cas.DigestOf(sub)
	top, _ := cas.Tree{Entries: []cas.Entry{{Name: "DRY-RUN-SECRET-NAME", Type: cas.EntryDir, Digest: sd}}}.Encode()
	td := cas.DigestOf(top)
	trees := []protocol.CASObject{
		{Digest: sd.String(), Data: base64.StdEncoding.EncodeToString(sub)},
		{Digest: td.String(), Data: base64.StdEncoding.EncodeToString(top)},
	}
	var m protocol.CASMaterializeResult
	h.ok(protocol.MethodCASMaterialize, protocol.CASMaterializeParams{SessionID: sid, Tree: td.String(), Path: "out", DryRun: true, Trees: trees}, &m)
	if m.Added != 2 || m.Txn != "" || !m.Created {
		t.Fatalf("dry run: %+v", m)
	}
	var has protocol.CASHasResult
	h.ok(protocol.MethodCASHas, protocol.CASDigests{SessionID: sid, Digests: []string{sd.String(), td.String()}}, &has)
	if len(has.Missing) != 2 {
		t.Errorf("the dry run stored trees: missing only %v", has.Missing)
	}
	if _, err := os.Lstat(filepath.Join(h.root, "out")); err == nil {
		t.Error("the dry run wrote out")
	}
	h.fails(protocol.MethodCASMaterialize, protocol.CASMaterializeParams{SessionID: sid, Tree: td.String(), Path: "out", Trees: trees}, protocol.CodeInvalidParams)

	h.stdin.Close()
	<-h.exited
	log, err := os.ReadFile(h.audit)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), "DRY-RUN-SECRET") || strings.Contains(string(log), trees[1].Data) {
		t.Errorf("the audit log holds the trees' bytes:\n%s", log)
	}
	if !strings.Contains(string(log), `"trees":2`) {
		t.Errorf("the audit log does not count the trees:\n%s", log)
	}
}
