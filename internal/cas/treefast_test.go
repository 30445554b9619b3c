package cas

import (
	"fmt"
	"io/fs"
	"reflect"
	"slices"
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

// FuzzTreeEncode: Encode (appendTree) writes the same bytes as the
// generic MarshalCanonical path, for any tree that is valid: names and
// targets of any bytes, every type, any mode.
func FuzzTreeEncode(f *testing.F) {
	f.Add([]byte("a\x00b\x01c"), uint16(0o644), uint16(0o4755))
	f.Add([]byte("x\"y\\z\x7f\tq\xff"), uint16(0o600), uint16(0o700))
	f.Add([]byte("naïve\x00\u2028"), uint16(0), uint16(0o7777))
	f.Fuzz(func(t *testing.T, names []byte, m1, m2 uint16) {
		d := DigestOf(names)
		var tr Tree
		for i, n := range strings.Split(string(names), "\x00") {
			var e Entry
			switch i % 3 {
			case 0:
				e = Entry{Name: n, Type: EntryFile, Digest: d}.WithPerm(fs.FileMode(m1))
			case 1:
				e = Entry{Name: n, Type: EntryDir, Digest: d}.WithPerm(fs.FileMode(m2))
			default:
				e = Entry{Name: n, Type: EntrySymlink, Target: n + "/t"}
			}
			tr.Entries = append(tr.Entries, e)
		}
		slices.SortFunc(tr.Entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
		want, werr := encodeTreeGeneric(tr)
		got, gerr := tr.Encode()
		if (werr == nil) != (gerr == nil) || string(got) != string(want) {
			t.Fatalf("Encode %q %v, generic %q %v", got, gerr, want, werr)
		}
		if gerr == nil {
			if back, err := DecodeTree(got); err != nil || !reflect.DeepEqual(back, tr) && len(tr.Entries) > 0 {
				t.Fatalf("decoded %+v %v, encoded %+v", back, err, tr)
			}
		}
	})
}
