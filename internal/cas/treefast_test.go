package cas

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// fastTrees are trees of every kind of entry, for the fast path's tests.
func fastTrees() []Tree {
	d := DigestOf([]byte("x"))
	return []Tree{
		{},
		{Entries: []Entry{
			{Name: "a", Type: EntryFile, Digest: d},
			Entry{Name: "b", Type: EntryFile, Digest: d}.WithPerm(0o755),
			Entry{Name: "c", Type: EntryFile, Digest: d}.WithPerm(0o4711),
			Entry{Name: "d", Type: EntryFile, Digest: d}.WithPerm(0o600),
			{Name: "dir", Type: EntryDir, Digest: d},
			Entry{Name: "dir2", Type: EntryDir, Digest: d}.WithPerm(0o700),
			{Name: "link", Type: EntrySymlink, Target: "a"},
			{Name: "naïve \"quoted\" name", Type: EntryFile, Digest: d},
			{Name: "tab\there", Type: EntrySymlink, Target: "sub/x"},
		}},
	}
}

// The fast path reads exactly what Encode writes, to the same tree the
// generic decoder gives; appendTree writes what Encode does.
func TestDecodeTreeFast(t *testing.T) {
	for i, tr := range fastTrees() {
		data, err := tr.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if enc, ok := appendTree(nil, tr); !ok || string(enc) != string(data) {
			t.Errorf("tree %d: appendTree wrote %s, Encode %s", i, enc, data)
		}
		slow, err := decodeTreeSlow(data)
		if err != nil {
			t.Fatal(err)
		}
		fast, ok := decodeTreeFast(data)
		hasEscape := strings.Contains(string(data), `\`)
		if ok == hasEscape || (ok && !reflect.DeepEqual(fast, slow)) {
			t.Errorf("tree %d: fast %+v %v, generic %+v", i, fast, ok, slow)
		}
	}
	// What Encode would not write is left to the generic decoder.
	d := DigestOf([]byte("x"))
	good := fmt.Sprintf(`{"entries":[{"digest":{"hash":"%s","size":1},"exec":false,"name":"a","type":"file"}],"kind":"tree"}`, d.Hash)
	if _, ok := decodeTreeFast([]byte(good)); !ok {
		t.Fatalf("fast path refused %s", good)
	}
	for _, bad := range []string{
		strings.Replace(good, `"size":1`, `"size":01`, 1),
		strings.Replace(good, `"exec":false,`, `"exec":false,"mode":420,`, 1), // the default mode spelled out
		strings.Replace(good, `"exec":false,`, `"exec":false,"mode":493,`, 1), // mode and exec disagree
		strings.Replace(good, `"exec":false,`, ``, 1),
		strings.Replace(good, `"type":"file"`, `"type":"dir"`, 1),
		strings.Replace(good, `"name":"a"`, `"name":"a/b"`, 1),
		strings.Replace(good, `"name":"a"`, `"name":".."`, 1),
		strings.Replace(good, `"size":1`, `"size":-1`, 1),
		strings.Replace(good, d.Hash, strings.ToUpper(d.Hash), 1),
		strings.Replace(good, `"name":"a","type":"file"`, `"name":"a","target":"b","type":"file"`, 1),
		good + " ",
		good[:len(good)-1],
	} {
		if _, ok := decodeTreeFast([]byte(bad)); ok {
			t.Errorf("fast path took %s", bad)
		}
	}
}

// FuzzDecodeTreeFast: whatever the fast path takes, the generic decoder
// takes too, to the same tree.
func FuzzDecodeTreeFast(f *testing.F) {
	for _, tr := range fastTrees() {
		data, _ := tr.Encode()
		f.Add(data)
	}
	f.Add([]byte(`{"entries":[],"kind":"tree"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ok := decodeTreeFast(data)
		if !ok {
			return
		}
		slow, err := decodeTreeSlow(data)
		if err != nil || !reflect.DeepEqual(fast, slow) {
			t.Fatalf("fast path took %q as %+v; generic: %+v %v", data, fast, slow, err)
		}
	})
}

// BenchmarkDecodeTree: a tree of 100 files (one directory of the push
// benchmark's tree) through DecodeTree's fast path and the generic
// canonical decoder.
func BenchmarkDecodeTree(b *testing.B) {
	var tr Tree
	for i := range 100 {
		tr.Entries = append(tr.Entries, Entry{Name: fmt.Sprintf("f%05d.bin", i), Type: EntryFile, Digest: DigestOf([]byte(fmt.Sprint(i)))})
	}
	data, err := tr.Encode()
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		decode func([]byte) (Tree, error)
	}{{"fast", DecodeTree}, {"generic", decodeTreeSlow}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := c.decode(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
