package cas

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Update is safe for concurrent use, and Abort removes the temporary files:
// a Receive that passed its check before an Abort but creates its file after
// it must not leave that file behind, nor a directory handle open. (rexd
// serialises the two under casTxn.mu; this is the package's own promise.)
func TestUpdateAbortRacingReceive(t *testing.T) {
	st, root, base := updateFixture(t)
	sender := newStore(t)
	content := "new a\n"
	tree := ingestSpec(t, sender, fileSpec{"a": content})
	if _, err := Push(t.Context(), sender, LocalRemote{st}, tree); err != nil {
		t.Fatal(err)
	}
	d := DigestOf([]byte(content))
	os.Remove(st.objectPath(d))
	writeSpec(t, filepath.Join(base, "dst"), fileSpec{"a": "old a\n"})
	for i := 0; i < 3000; i++ {
		u, err := st.PrepareUpdate(t.Context(), root, "dst", tree, UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var w *BlobWriter
		start := make(chan struct{})
		wg.Go(func() { <-start; w, _ = u.Receive(d) })
		wg.Go(func() { <-start; u.Abort() })
		close(start)
		wg.Wait()
		if w != nil {
			w.f.Close() // the caller's writer: not the update's temp bookkeeping
		}
		ents, _ := os.ReadDir(filepath.Join(base, "dst"))
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".rex-") {
				t.Fatalf("iteration %d: Abort returned, and %s was left behind in the destination", i, e.Name())
			}
		}
	}
}

// The targets of one push share the bytes a VerifiedSet keeps: several
// SendBlobs at once over one sharing set, to stores that verify every
// object (run under -race in CI), each get every blob intact.
func TestVerifiedSetConcurrentTargets(t *testing.T) {
	src := newStore(t)
	var ds []Digest
	for i := range 300 {
		data := bytes.Repeat([]byte{byte(i)}, 4096+i)
		data = fmt.Appendf(data, "%d", i)
		d := DigestOf(data)
		if err := src.Put(Object{Digest: d, Data: data}); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	v := &VerifiedSet{Share: true}
	var wg sync.WaitGroup
	dsts := make([]*Store, 4)
	errs := make([]error, 4)
	for i := range dsts {
		dsts[i] = newStore(t)
		wg.Go(func() {
			_, errs[i] = SendBlobs(context.Background(), src, LocalRemote{dsts[i]}, ds, SyncOptions{Verified: v})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("target %d: %v", i, err)
		}
		for _, d := range ds {
			if ok, _ := dsts[i].present(d); !ok {
				t.Fatalf("target %d lacks %s", i, d)
			}
		}
	}
	if v.bytes > verifiedKeep {
		t.Fatalf("kept %d bytes", v.bytes)
	}
}
