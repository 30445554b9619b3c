package cas

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// countingRemote wraps a LocalRemote and records what crosses "the wire",
// independently of Push's own Stats. It also checks the ordering promise:
// a tree never arrives before its children.
type countingRemote struct {
	LocalRemote
	t          *testing.T
	hasCalls   int
	hasDigests int
	queried    map[Digest]bool
	putCalls   int
	putObjects int
	putBytes   int64
	streams    int
	getCalls   int
	gotDigests map[Digest]bool // what Get was asked for
	// tamper, when set, changes what Get returns.
	tamper func([]Object) []Object
}

func (c *countingRemote) Has(ctx context.Context, ds []Digest) ([]Digest, error) {
	c.hasCalls++
	c.hasDigests += len(ds)
	if c.queried == nil {
		c.queried = map[Digest]bool{}
	}
	for _, d := range ds {
		c.queried[d] = true
	}
	return c.LocalRemote.Has(ctx, ds)
}

func (c *countingRemote) Put(ctx context.Context, objs []Object) error {
	c.putCalls++
	c.putObjects += len(objs)
	inBatch := map[Digest]bool{}
	for _, o := range objs {
		c.putBytes += int64(len(o.Data))
		if tr, err := DecodeTree(o.Data); err == nil {
			for _, e := range tr.Entries {
				if e.Type == EntrySymlink || inBatch[e.Digest] {
					continue
				}
				if ok, _ := c.Store.Contains(e.Digest); !ok {
					c.t.Errorf("tree %s arrived before its child %s", o.Digest, e.Name)
				}
			}
		}
		inBatch[o.Digest] = true
	}
	return c.LocalRemote.Put(ctx, objs)
}

func (c *countingRemote) PutStream(ctx context.Context, d Digest, r io.Reader) error {
	c.streams++
	c.putBytes += d.Size
	return c.LocalRemote.PutStream(ctx, d, r)
}

func (c *countingRemote) Get(ctx context.Context, ds []Digest) ([]Object, error) {
	c.getCalls++
	if c.gotDigests == nil {
		c.gotDigests = map[Digest]bool{}
	}
	for _, d := range ds {
		c.gotDigests[d] = true
	}
	objs, err := c.LocalRemote.Get(ctx, ds)
	if err == nil && c.tamper != nil {
		objs = c.tamper(objs)
	}
	return objs, err
}

func (c *countingRemote) reset() {
	*c = countingRemote{LocalRemote: c.LocalRemote, t: c.t, tamper: c.tamper}
}

// projectSpec is a tree of 3 levels: 40 files at the top, 30 in a/, 20 in
// a/b/, 10 in a/b/c/, and a few more in side directories.
func projectSpec() fileSpec {
	spec := fileSpec{}
	for i := range 40 {
		spec[fmt.Sprintf("top%02d.txt", i)] = fmt.Sprintf("top file %d\n", i)
	}
	for i := range 30 {
		spec[fmt.Sprintf("a/f%02d.go", i)] = fmt.Sprintf("package a // %d\n", i)
	}
	for i := range 20 {
		spec[fmt.Sprintf("a/b/f%02d.go", i)] = fmt.Sprintf("package b // %d\n", i)
	}
	for i := range 10 {
		spec[fmt.Sprintf("a/b/c/f%02d.go", i)] = fmt.Sprintf("package c // %d\n", i)
	}
	spec["side/x/y"] = "side\n"
	spec["side/run"] = "x:#!/bin/sh\n"
	spec["side/link"] = "->run"
	return spec
}

func TestPushSendsOnlyWhatTheRemoteLacks(t *testing.T) {
	ctx := t.Context()
	local := newStore(t)
	remote := &countingRemote{LocalRemote: LocalRemote{Store: newStore(t)}, t: t}
	spec := projectSpec()
	files := 0
	for _, v := range spec {
		if !strings.HasPrefix(v, "->") {
			files++
		}
	}

	// First push: everything.
	root := ingestSpec(t, local, spec)
	st, err := Push(ctx, local, remote, root)
	if err != nil {
		t.Fatal(err)
	}
	if st.Blobs != files || st.Trees != 6 { // ., a, a/b, a/b/c, side, side/x
		t.Errorf("first push sent %d blobs and %d trees, want %d and 6", st.Blobs, st.Trees, files)
	}
	if remote.putObjects != st.Blobs+st.Trees || remote.putBytes != st.Bytes {
		t.Errorf("wire saw %d objects, %d bytes; stats say %d, %d", remote.putObjects, remote.putBytes, st.Blobs+st.Trees, st.Bytes)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := remote.Store.Materialize(ctx, root, out); err != nil {
		t.Fatalf("remote cannot materialize the pushed tree: %v", err)
	}
	if got := readSpec(t, out); len(got) != len(spec) {
		t.Fatalf("remote tree has %d paths, want %d", len(got), len(spec))
	}

	// Unchanged re-push: one query about one digest, nothing sent.
	remote.reset()
	st, err = Push(ctx, local, remote, root)
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{Queries: 1, QueriedDigests: 1}
	if st != want {
		t.Errorf("unchanged push: stats %+v, want %+v", st, want)
	}
	if remote.hasCalls != 1 || remote.hasDigests != 1 || remote.putCalls != 0 || remote.streams != 0 {
		t.Errorf("unchanged push on the wire: has %d×%d digests, put %d, streams %d", remote.hasCalls, remote.hasDigests, remote.putCalls, remote.streams)
	}

	// One file changed three levels down: one blob plus the four trees on
	// its path; queries only about the children of those trees.
	spec["a/b/c/f05.go"] = "package c // changed\n"
	root2 := ingestSpec(t, local, spec)
	remote.reset()
	st, err = Push(ctx, local, remote, root2)
	if err != nil {
		t.Fatal(err)
	}
	topLevel := 40 + 2 // top files + a + side
	aLevel := 30 + 1   // a's files + b
	bLevel := 20 + 1   // b's files + c
	cLevel := 10       // c's files
	wantQueried := 1 + topLevel + aLevel + bLevel + cLevel
	if st.Blobs != 1 || st.Trees != 4 || st.Queries != 5 || st.QueriedDigests != wantQueried {
		t.Errorf("one-file push: %+v; want 1 blob, 4 trees, 5 queries about %d digests", st, wantQueried)
	}
	if remote.hasDigests != wantQueried || remote.putObjects != 5 {
		t.Errorf("one-file push on the wire: %d digests queried, %d objects sent", remote.hasDigests, remote.putObjects)
	}
	// side/ was not opened: none of its children were asked about.
	for _, p := range []string{"side/run", "side/x/y"} {
		if d := DigestOf([]byte(strings.TrimPrefix(spec[p], "x:"))); remote.queried[d] {
			t.Errorf("asked about %s, inside an unchanged subtree", p)
		}
	}
}

func TestPushAndFetchStreamLargeObjects(t *testing.T) {
	ctx := t.Context()
	local := newStore(t)
	remote := &countingRemote{LocalRemote: LocalRemote{Store: newStore(t)}, t: t}
	big := strings.Repeat("large object ", MaxInlineSize/6) // > MaxInlineSize
	root := ingestSpec(t, local, fileSpec{"big": big, "small": "s\n"})
	st, err := Push(ctx, local, remote, root)
	if err != nil {
		t.Fatal(err)
	}
	if st.Streams != 1 || remote.streams != 1 || st.Blobs != 2 {
		t.Fatalf("push stats %+v, wire streams %d; want the big blob streamed", st, remote.streams)
	}
	back := newStore(t)
	st, err = Fetch(ctx, back, remote, root)
	if err != nil {
		t.Fatal(err)
	}
	if st.Streams != 1 || st.Blobs != 2 || st.Trees != 1 {
		t.Fatalf("fetch stats %+v", st)
	}
	if got, err := back.Read(DigestOf([]byte(big))); err != nil || string(got) != big {
		t.Fatalf("fetched big blob: %v", err)
	}
}

func TestFetchGetsOnlyWhatLocalLacks(t *testing.T) {
	ctx := t.Context()
	far := newStore(t)
	remote := &countingRemote{LocalRemote: LocalRemote{Store: far}, t: t}
	spec := projectSpec()
	root := ingestSpec(t, far, spec)

	local := newStore(t)
	st, err := Fetch(ctx, local, remote, root)
	if err != nil {
		t.Fatal(err)
	}
	if st.Trees != 6 || st.Queries != 0 {
		t.Errorf("first fetch: %+v", st)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := local.Materialize(ctx, root, out); err != nil {
		t.Fatal(err)
	}
	if got := readSpec(t, out); len(got) != len(spec) {
		t.Fatalf("fetched tree has %d paths, want %d", len(got), len(spec))
	}

	remote.reset()
	if st, err := Fetch(ctx, local, remote, root); err != nil || st != (Stats{}) || remote.getCalls != 0 {
		t.Fatalf("unchanged fetch: %+v, %d get calls, %v", st, remote.getCalls, err)
	}

	spec["a/b/f03.go"] = "changed remotely\n"
	root2 := ingestSpec(t, far, spec)
	remote.reset()
	st, err = Fetch(ctx, local, remote, root2)
	if err != nil {
		t.Fatal(err)
	}
	if st.Blobs != 1 || st.Trees != 3 {
		t.Fatalf("one-file fetch: %+v; want 1 blob and 3 trees", st)
	}
}

func TestFetchRefusesWhatTheRemoteGetsWrong(t *testing.T) {
	tests := map[string]struct {
		tamper func([]Object) []Object
		want   error
	}{
		"changed bytes": {func(objs []Object) []Object {
			for i := range objs {
				if string(objs[i].Data) == "payload\n" {
					objs[i].Data = []byte("PAYLOAD\n")
				}
			}
			return objs
		}, ErrMismatch},
		"omitted object": {func(objs []Object) []Object {
			for i := range objs {
				if string(objs[i].Data) == "payload\n" {
					return append(objs[:i:i], objs[i+1:]...)
				}
			}
			return objs
		}, ErrNotFound},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			far := newStore(t)
			root := ingestSpec(t, far, fileSpec{"p": "payload\n", "q": "other\n"})
			remote := &countingRemote{LocalRemote: LocalRemote{Store: far}, t: t, tamper: tt.tamper}
			local := newStore(t)
			_, err := Fetch(t.Context(), local, remote, root)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Fetch = %v, want %v", err, tt.want)
			}
			if ok, _ := local.Contains(root); ok {
				t.Fatal("the root tree was stored although its content is missing")
			}
			if ok, _ := local.Contains(DigestOf([]byte("PAYLOAD\n"))); ok {
				t.Fatal("tampered content was stored")
			}
		})
	}
}

func TestPushRefusesWhatLocalLacks(t *testing.T) {
	local := newStore(t)
	// A tree whose child is missing locally: push must fail, not send a
	// dangling tree.
	d, err := local.PutTree(Tree{Entries: []Entry{{Name: "f", Type: EntryFile, Digest: DigestOf([]byte("absent"))}}})
	if err != nil {
		t.Fatal(err)
	}
	remote := &countingRemote{LocalRemote: LocalRemote{Store: newStore(t)}, t: t}
	if _, err := Push(t.Context(), local, remote, d); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Push = %v, want ErrNotFound", err)
	}
	if ok, _ := remote.Store.Contains(d); ok {
		t.Fatal("a tree without its child reached the remote")
	}
}

func TestRepairResendsWhatTheRemoteLostUnderAPresentTree(t *testing.T) {
	ctx := t.Context()
	local := newStore(t)
	remote := &countingRemote{LocalRemote: LocalRemote{Store: newStore(t)}, t: t}
	spec := projectSpec()
	root := ingestSpec(t, local, spec)
	if _, err := Push(ctx, local, remote, root); err != nil {
		t.Fatal(err)
	}
	// The remote finds a blob corrupt and moves it aside: its trees stay.
	lost := DigestOf([]byte(spec["a/b/c/f07.go"]))
	tamper(t, remote.Store, lost, []byte(strings.ToUpper(spec["a/b/c/f07.go"])))
	if _, err := remote.Store.Read(lost); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read = %v, want ErrCorrupt", err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := remote.Store.Materialize(ctx, root, out); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Materialize = %v, want ErrNotFound", err)
	}
	// Push trusts the root tree and sends nothing; Repair finds the hole.
	if st, err := Push(ctx, local, remote, root); err != nil || st.Blobs != 0 {
		t.Fatalf("Push = %+v, %v", st, err)
	}
	remote.reset()
	st, err := Repair(ctx, local, remote, root)
	if err != nil {
		t.Fatal(err)
	}
	if st.Blobs != 1 || st.Trees != 0 || remote.putObjects != 1 {
		t.Fatalf("Repair = %+v (%d objects on the wire); want the one lost blob", st, remote.putObjects)
	}
	if err := remote.Store.Materialize(ctx, root, out); err != nil {
		t.Fatalf("after repair: %v", err)
	}
	// On a complete remote Repair sends nothing.
	remote.reset()
	if st, err := Repair(ctx, local, remote, root); err != nil || st.Blobs+st.Trees != 0 {
		t.Fatalf("second Repair = %+v, %v", st, err)
	}
}

// A hostile target's trees are refused as the fetch walks them, before
// they pile up in memory: a chain deeper than any tree rex writes, or
// more entries in distinct trees than a materialization may hold. The
// walk stops at the level (or batch) that crosses the limit, asks for no
// deeper tree and no blob, and stores nothing. A tree at the limits is
// fetched.
func TestFetchRefusesHostileTreesAsItWalks(t *testing.T) {
	// objs collects a crafted store's objects, stored a batch at a time
	// (one sync per batch, not per object).
	type objs []Object
	add := func(o *objs, data []byte) Digest {
		d := DigestOf(data)
		*o = append(*o, Object{Digest: d, Data: data})
		return d
	}
	tree := func(t *testing.T, o *objs, tr Tree) Digest {
		data, err := tr.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return add(o, data)
	}
	store := func(t *testing.T, far *Store, o objs) {
		for part := range slices.Chunk(o, MaxBatchEntries) {
			if err := far.PutBatch(t.Context(), part); err != nil {
				t.Fatal(err)
			}
		}
	}
	chain := func(t *testing.T, far *Store, levels int) Digest {
		var o objs
		d := tree(t, &o, Tree{Entries: []Entry{{Name: "f", Type: EntryFile, Digest: add(&o, []byte("leaf\n"))}}})
		for range levels {
			d = tree(t, &o, Tree{Entries: []Entry{{Name: "d", Type: EntryDir, Digest: d}}})
		}
		store(t, far, o)
		return d
	}
	// wide is 40 distinct trees of 10 distinct trees of one distinct
	// file each: 40 + 400 + 400 entries.
	var deepest []Digest
	wide := func(t *testing.T, far *Store) Digest {
		var o objs
		deepest = nil
		var top Tree
		for i := range 40 {
			var mid Tree
			for j := range 10 {
				leaf := tree(t, &o, Tree{Entries: []Entry{{Name: "f", Type: EntryFile, Digest: add(&o, fmt.Appendf(nil, "%d.%d\n", i, j))}}})
				deepest = append(deepest, leaf)
				mid.Entries = append(mid.Entries, Entry{Name: fmt.Sprintf("m%02d", j), Type: EntryDir, Digest: leaf})
			}
			top.Entries = append(top.Entries, Entry{Name: fmt.Sprintf("t%02d", i), Type: EntryDir, Digest: tree(t, &o, mid)})
		}
		d := tree(t, &o, top)
		store(t, far, o)
		return d
	}
	tests := []struct {
		name       string
		build      func(*testing.T, *Store) Digest
		maxEntries int
		refused    bool
	}{
		{"chain at the depth limit", func(t *testing.T, s *Store) Digest { return chain(t, s, MaxTreeDepth) }, 0, false},
		{"chain one level deeper", func(t *testing.T, s *Store) Digest { return chain(t, s, MaxTreeDepth+1) }, 0, true},
		{"wide at the entry limit", wide, 840, false},
		{"wide over the entry limit", wide, 100, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			far := newStore(t)
			root := tt.build(t, far)
			remote := &countingRemote{LocalRemote: LocalRemote{Store: far}, t: t}
			local := newStore(t)
			st, err := FetchWith(t.Context(), local, remote, root, SyncOptions{MaxEntries: tt.maxEntries})
			if !tt.refused {
				if err != nil {
					t.Fatalf("FetchWith = %v, want the tree", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidTree) || !strings.Contains(err.Error(), "nothing was stored") {
				t.Fatalf("FetchWith = %v, want a refusal of the tree", err)
			}
			if ok, _ := local.Contains(root); ok {
				t.Error("the refused root tree was stored")
			}
			if st.Blobs != 0 {
				t.Errorf("%d blobs were received for a refused tree", st.Blobs)
			}
			for _, d := range deepest {
				if remote.gotDigests[d] && tt.maxEntries != 0 {
					t.Fatalf("the walk asked for a tree below the level that crossed the limit (%d trees received)", st.Trees)
				}
			}
		})
	}
}

// An ingest given a VerifiedSet adds the digest of every file it read and
// hashed, so that a send from this process does not hash it again; files
// the stat cache vouched for were not read, and are not added.
func TestIngestAddsWhatItHashedToVerified(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	later(st, time.Hour) // out of the racy window: the stat cache trusts them next time
	dir := t.TempDir()
	var want []Digest
	for i, content := range []string{"\x00binary\x01", "text\n", strings.Repeat("\x00\xff", 70000)} {
		name := filepath.Join(dir, fmt.Sprintf("f%d", i))
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		want = append(want, DigestOf([]byte(content)))
	}
	verified := func(v *VerifiedSet) (n int) {
		v.m.Range(func(any, any) bool { n++; return true })
		return n
	}
	v := &VerifiedSet{}
	if _, problems, err := st.IngestWith(ctx, dir, IngestOptions{Blobs: BlobsText, Verified: v}); err != nil || len(problems) > 0 {
		t.Fatalf("ingest: %v %v", problems, err)
	}
	for _, d := range want {
		if _, ok := v.m.Load(d); !ok {
			t.Errorf("%s was hashed by the ingest but is not in the verified set", d)
		}
	}
	if n := verified(v); n != len(want) {
		t.Errorf("%d digests in the verified set, want %d", n, len(want))
	}
	again := &VerifiedSet{}
	if _, _, err := st.IngestWith(ctx, dir, IngestOptions{Blobs: BlobsText, Verified: again}); err != nil {
		t.Fatal(err)
	}
	if n := verified(again); n != 0 {
		t.Errorf("an ingest the stat cache answered added %d digests to the verified set, want none", n)
	}
}

// A sharing VerifiedSet serves the blobs it read last to the other
// targets of a push without reading them again, and keeps no more than
// verifiedKeep bytes of them; one that does not share reads every time.
func TestVerifiedSetSharesReads(t *testing.T) {
	st := newStore(t)
	blob := func(i int) Digest {
		data := bytes.Repeat([]byte{byte(i)}, 1<<20)
		data = fmt.Appendf(data, "%d", i)
		d := DigestOf(data)
		if err := st.Put(Object{Digest: d, Data: data}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := blob(0)
	shared, alone := &VerifiedSet{Share: true}, &VerifiedSet{}
	for _, v := range []*VerifiedSet{shared, alone} {
		if _, err := v.read(st, first); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(st.objectPath(first)); err != nil {
		t.Fatal(err)
	}
	if data, err := shared.read(st, first); err != nil || DigestOf(data) != first {
		t.Errorf("a second target's read of a blob just read: %v; want it from the set", err)
	}
	if _, err := alone.read(st, first); err == nil {
		t.Error("a set that does not share served a removed blob")
	}
	// verifiedKeep bytes later, the first blob is no longer kept.
	for i := 1; i <= verifiedKeep>>20; i++ {
		if _, err := shared.read(st, blob(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := shared.read(st, first); err == nil {
		t.Error("the set still serves the first blob after more than verifiedKeep bytes")
	}
	if shared.bytes > verifiedKeep {
		t.Errorf("the set keeps %d bytes, more than %d", shared.bytes, verifiedKeep)
	}
}
