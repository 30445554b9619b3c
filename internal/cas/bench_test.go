package cas

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// smallFilesDir writes n files of about 1 KiB over n/100 directories.
func smallFilesDir(b *testing.B, n int) (string, int64) {
	b.Helper()
	dir := b.TempDir()
	var total int64
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("d%03d", i/100), fmt.Sprintf("f%05d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		data := fmt.Appendf(nil, "%d %01000d\n", i, i)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
		total += int64(len(data))
	}
	return dir, total
}

// BenchmarkIngestSmallFiles: first ingest of 2,000 small files into an
// empty store (hash, write, fsync, rename).
func BenchmarkIngestSmallFiles(b *testing.B) {
	dir, total := smallFilesDir(b, 2000)
	b.SetBytes(total)
	for b.Loop() {
		b.StopTimer()
		s, err := Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, problems, err := s.Ingest(b.Context(), dir); err != nil || len(problems) > 0 {
			b.Fatal(err, problems)
		}
	}
}

// BenchmarkIngestUnchanged: re-ingest of the same 2,000 files, which only
// reads and hashes.
func BenchmarkIngestUnchanged(b *testing.B) {
	dir, total := smallFilesDir(b, 2000)
	s := newStore(b)
	if _, _, err := s.Ingest(b.Context(), dir); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(total)
	for b.Loop() {
		if _, _, err := s.Ingest(b.Context(), dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIngestStatCached: re-ingest of the same 2,000 files when the
// stat cache vouches for every one: what a push of an unchanged tree costs
// on rex's side before it asks anything.
func BenchmarkIngestStatCached(b *testing.B) {
	dir, total := smallFilesDir(b, 2000)
	s := newStore(b)
	later(s, time.Second)
	opts := IngestOptions{Blobs: BlobsText} // as rex push ingests
	if _, _, err := s.IngestWith(b.Context(), dir, opts); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(total)
	for b.Loop() {
		if _, _, err := s.IngestWith(b.Context(), dir, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPushUnchanged: the cost of finding out that a remote already has
// a 2,000-file tree (one query).
func BenchmarkPushUnchanged(b *testing.B) {
	dir, _ := smallFilesDir(b, 2000)
	local, far := newStore(b), newStore(b)
	root, _, err := local.Ingest(b.Context(), dir)
	if err != nil {
		b.Fatal(err)
	}
	remote := LocalRemote{Store: far}
	if _, err := Push(b.Context(), local, remote, root); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if st, err := Push(b.Context(), local, remote, root); err != nil || st.Queries != 1 {
			b.Fatal(st, err)
		}
	}
}

// BenchmarkUpdateReceive: the target side of a first push of 2,000 small
// files: plan, receive every blob straight into the destination, commit.
func BenchmarkUpdateReceive(b *testing.B) { benchReceive(b, 2000, false) }

// BenchmarkUpdateReceiveInPlace: the target side of a push that changes
// every one of 10,000 files of a destination that exists: each blob is
// received into a temporary file beside its file and renamed over it.
func BenchmarkUpdateReceiveInPlace(b *testing.B) { benchReceive(b, 10000, true) }

func benchReceive(b *testing.B, n int, inPlace bool) {
	dir, total := smallFilesDir(b, n)
	sender, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	tree, _, err := sender.Ingest(b.Context(), dir)
	if err != nil {
		b.Fatal(err)
	}
	var objs []Object
	files, _ := sender.Flatten(b.Context(), tree)
	for _, e := range files {
		if e.Type == EntryFile {
			data, _ := sender.Read(e.Digest)
			objs = append(objs, Object{Digest: e.Digest, Data: data})
		}
	}
	b.SetBytes(total)
	for b.Loop() {
		b.StopTimer()
		recv, _ := Open(b.TempDir())
		if _, err := PushTrees(b.Context(), sender, LocalRemote{recv}, tree, SyncOptions{}); err != nil {
			b.Fatal(err)
		}
		root, _ := os.OpenRoot(b.TempDir())
		for rel, e := range files {
			if !inPlace || e.Type != EntryFile {
				continue
			}
			// The destination holds every path, with other content.
			p := filepath.Join("dest", filepath.FromSlash(rel))
			if err := root.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := root.WriteFile(p, []byte("old"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		u, err := recv.PrepareUpdate(b.Context(), root, "dest", tree, UpdateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if err := u.Put(objs); err != nil {
			b.Fatal(err)
		}
		if res, err := u.Commit(b.Context()); err != nil || res.Added+res.Updated < len(objs) {
			b.Fatal(res, err)
		}
		b.StopTimer()
		root.Close()
		b.StartTimer()
	}
}

// BenchmarkUpdateUnchanged: the target side of an unchanged re-push of
// 2,000 files: a stat per file through the stat cache, nothing written.
func BenchmarkUpdateUnchanged(b *testing.B) {
	dir, total := smallFilesDir(b, 2000)
	st, _ := Open(b.TempDir())
	later(st, time.Second)
	tree, _, err := st.Ingest(b.Context(), dir)
	if err != nil {
		b.Fatal(err)
	}
	root, _ := os.OpenRoot(b.TempDir())
	defer root.Close()
	if _, err := st.Update(b.Context(), root, "dest", tree, UpdateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(total)
	for b.Loop() {
		res, err := st.Update(b.Context(), root, "dest", tree, UpdateOptions{})
		if err != nil || !res.Unchanged() {
			b.Fatal(res, err)
		}
	}
}
