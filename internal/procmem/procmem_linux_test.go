package procmem

import (
	"encoding/binary"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestDroppable(t *testing.T) {
	const (
		absent = 0
		file   = pmPresent | pmFile
		own    = pmPresent // a present private page that is not the file's: a copy
		swap   = pmSwapped
	)
	for _, tc := range []struct {
		name    string
		entries []uint64
		want    []run
	}{
		{"nothing", nil, nil},
		{"all the file's", []uint64{file, file, absent, file}, []run{{0, 4}}},
		{"copies kept", []uint64{file, own, own, file, absent}, []run{{0, 1}, {3, 2}}},
		{"swapped copies kept", []uint64{swap, file, swap}, []run{{1, 1}}},
		{"all copies", []uint64{own, swap}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := droppable(tc.entries)
			if len(got) != len(tc.want) {
				t.Fatalf("droppable = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("droppable = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestParseMapping(t *testing.T) {
	for _, tc := range []struct {
		line string
		want mapping
		ok   bool
	}{
		{"00400000-01eb9000 r-xp 00000000 fd:01 1234567 /usr/bin/rex", mapping{0x400000, 0x1eb9000, false, 0xfd, 1, 1234567}, true},
		{"045435c0-045a2000 rw-p 041435c0 103:02 99 /usr/bin/rex (deleted)", mapping{0x45435c0, 0x45a2000, true, 0x103, 2, 99}, true},
		{"7ffd1000-7ffd3000 r-xp 00000000 00:00 0 [vdso]", mapping{0x7ffd1000, 0x7ffd3000, false, 0, 0, 0}, true},
		{"7ffd1000 r-xp 00000000 00:00 0", mapping{}, false},
		{"2000-1000 r-xp 00000000 00:00 0", mapping{}, false},
		{"1000-2000 r-xp 00000000 0000 0", mapping{}, false},
		{"", mapping{}, false},
	} {
		got, ok := parseMapping(tc.line)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("parseMapping(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

// TestReleaseExecutable builds a small program both ways Go links one on
// Linux (a fixed-address executable and a position-independent one, whose
// relocated read-only data is the process's own copy) and runs each: the
// release must drop most of what the program's start mapped of its file,
// keep every copy, and leave the program running correctly afterwards
// (interfaces, reflect, JSON and a stack trace all read the released
// mappings).
func TestReleaseExecutable(t *testing.T) {
	for _, mode := range []string{"exe", "pie"} {
		t.Run(mode, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "release")
			build := exec.Command("go", "build", "-buildmode="+mode, "-o", bin, "./testdata/release")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build -buildmode=%s: %v\n%s", mode, err, out)
			}
			out, err := exec.Command(bin).CombinedOutput()
			if err != nil {
				t.Fatalf("the program failed after the release: %v\n%s", err, out)
			}
			m := regexp.MustCompile(`dropped=(\d+) kept=(\d+) before=(\d+) after=(\d+)\n(.*)\n`).FindSubmatch(out)
			if m == nil {
				t.Fatalf("unexpected output:\n%s", out)
			}
			n := func(i int) int64 { v, _ := strconv.ParseInt(string(m[i]), 10, 64); return v }
			dropped, kept, before, after := n(1), n(2), n(3), n(4)
			if want := `(3,4) {"p":{"X":1,"Y":2},"t":"main.point"} true`; string(m[5]) != want {
				t.Errorf("after the release the program printed %q, want %q", m[5], want)
			}
			if dropped == 0 || after >= before {
				t.Errorf("the release dropped %d bytes; the file's pages in memory went from %d to %d kB", dropped, before, after)
			}
			if mode == "pie" && kept == 0 {
				t.Errorf("a position-independent build kept no page: its relocated data would have been dropped")
			}
			t.Logf("%s: dropped %d kB, kept %d kB; RssFile %d → %d kB", mode, dropped>>10, kept>>10, before, after)
		})
	}
}

// pagemapOf is a page map: entries by page index, def for the others; a
// read past the page limit (when set) comes back short.
type pagemapOf struct {
	entries map[uint64]uint64
	def     uint64
	limit   uint64
}

func (p pagemapOf) ReadAt(b []byte, off int64) (int, error) {
	for i := 0; i+8 <= len(b); i += 8 {
		pg := uint64(off)/8 + uint64(i/8)
		if p.limit != 0 && pg >= p.limit {
			return i, io.EOF
		}
		e, ok := p.entries[pg]
		if !ok {
			e = p.def
		}
		binary.LittleEndian.PutUint64(b[i:], e)
	}
	return len(b), nil
}

// TestRelease: only the read-only mappings of the running code's file are
// dropped, the process's copies in them kept, another file with the same
// inode on another device left alone; and a page map that cannot tell the
// file's pages from copies (all zeros, or read short) drops nothing.
func TestRelease(t *testing.T) {
	const page = 4096
	maps := strings.Join([]string{
		"00400000-00404000 r-xp 00000000 00:2e 77 /usr/bin/rex", // here is in it (btrfs: st_dev would differ)
		"00404000-00408000 r--p 00004000 00:2e 77 /usr/bin/rex",
		"00408000-00409000 rw-p 00008000 00:2e 77 /usr/bin/rex",
		"00500000-00502000 r-xp 00000000 08:01 77 /lib/other",
		"00600000-00601000 rw-p 00000000 00:00 0",
	}, "\n")
	here := uint64(0x401234)
	file := uint64(pmPresent | pmFile)
	good := pagemapOf{entries: map[uint64]uint64{
		0x401: file,
		0x405: pmPresent, // a relocated copy
		0x406: pmSwapped,
	}, def: 0}
	type span struct{ lo, n uint64 }
	for _, tc := range []struct {
		name    string
		pagemap pagemapOf
		want    []span
		kept    int64
		err     string
	}{
		{"file pages dropped, copies kept", good, []span{{0x400000, 4 * page}, {0x404000, page}, {0x407000, page}}, 2 * page, ""},
		{"zeros", pagemapOf{}, nil, 0, "does not tell"},
		{"short", pagemapOf{entries: good.entries, limit: 0x404}, []span{{0x400000, 4 * page}}, 0, "unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []span
			r, err := release(maps, tc.pagemap, here, page, func(lo, n uint64) error {
				got = append(got, span{lo, n})
				return nil
			})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("release: %v, want an error saying %q", err, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("dropped %x, want %x", got, tc.want)
			}
			if tc.err == "" && r.Kept != tc.kept {
				t.Errorf("kept %d bytes, want %d", r.Kept, tc.kept)
			}
		})
	}
}
