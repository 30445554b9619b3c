package cas

import (
	"bytes"
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/merge/*/{expected,conflicts} from git merge-file")

// gitMergeFile runs the real `git merge-file -p` with rex's labels and
// returns its output and exit status (the number of conflicts, capped at
// 127 by git).
func gitMergeFile(t testing.TB, base, ours, theirs []byte) ([]byte, int) {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git is needed to check the merge against git merge-file: %v", err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"base": base, "ours": ours, "theirs": theirs} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(git, "merge-file", "-p", "-L", "ours", "-L", "base", "-L", "theirs", "ours", "base", "theirs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir)
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() > 0 && ee.ExitCode() < 128:
		return out, ee.ExitCode()
	case err != nil:
		t.Fatalf("git merge-file: %v", err)
	}
	return out, 0
}

type mergeFixture struct {
	name                   string
	base, ours, theirs     []byte
	expected               []byte
	conflicts              int
	expectedPath, flagPath string
}

func loadMergeFixtures(t *testing.T) []mergeFixture {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("testdata", "merge", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no merge fixtures: %v", err)
	}
	var out []mergeFixture
	for _, dir := range dirs {
		read := func(name string) []byte {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil && !(*update && errors.Is(err, os.ErrNotExist)) {
				t.Fatal(err)
			}
			return data
		}
		f := mergeFixture{
			name: filepath.Base(dir), base: read("base"), ours: read("ours"), theirs: read("theirs"),
			expected: read("expected"), expectedPath: filepath.Join(dir, "expected"), flagPath: filepath.Join(dir, "conflicts"),
		}
		if n, err := strconv.Atoi(strings.TrimSpace(string(read("conflicts")))); err == nil {
			f.conflicts = n
		} else if !*update {
			t.Fatalf("%s/conflicts: %v", dir, err)
		}
		out = append(out, f)
	}
	return out
}

// TestMergeTextFixtures checks MergeText against the committed output of
// git merge-file for each fixture, and that the fixture's name tells the
// truth about whether it conflicts.
func TestMergeTextFixtures(t *testing.T) {
	for _, f := range loadMergeFixtures(t) {
		t.Run(f.name, func(t *testing.T) {
			got, n := MergeText(f.base, f.ours, f.theirs, "ours", "theirs")
			if !bytes.Equal(got, f.expected) {
				t.Errorf("merged:\n%s\nwant (git merge-file):\n%s", got, f.expected)
			}
			if n != f.conflicts {
				t.Errorf("%d conflicts, git reports %d", n, f.conflicts)
			}
			wantConflict := !strings.HasPrefix(f.name, "clean-")
			if (n > 0) != wantConflict {
				t.Errorf("fixture %s: conflicts=%d contradicts its name", f.name, n)
			}
			if hasMarkers := bytes.Contains(got, []byte("<<<<<<< ours")) && bytes.Contains(got, []byte(">>>>>>> theirs")); hasMarkers != (n > 0) {
				t.Errorf("markers present=%v with %d conflicts", hasMarkers, n)
			}
		})
	}
}

// TestMergeTextFixturesMatchGit re-runs git merge-file on every fixture, so
// the committed expectations cannot drift from git; -update rewrites them.
func TestMergeTextFixturesMatchGit(t *testing.T) {
	for _, f := range loadMergeFixtures(t) {
		t.Run(f.name, func(t *testing.T) {
			out, code := gitMergeFile(t, f.base, f.ours, f.theirs)
			if *update {
				if err := os.WriteFile(f.expectedPath, out, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f.flagPath, []byte(strconv.Itoa(code)+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !bytes.Equal(out, f.expected) || code != f.conflicts {
				t.Errorf("git merge-file now gives (%d conflicts):\n%s\ncommitted (%d):\n%s\nrun go test -run TestMergeTextFixturesMatchGit -update", code, out, f.conflicts, f.expected)
			}
		})
	}
}

// TestMergeTextNaiveCases pins the four cases a difflib-style merge
// wrongly reports as clean.
func TestMergeTextNaiveCases(t *testing.T) {
	tests := []struct {
		name             string
		base, ours, thr  string
		naiveCleanResult string // what the naive merge produced
	}{
		{"adjacent lines", "a\nb\nc\nd\ne\n", "a\nB\nc\nd\ne\n", "a\nb\nC\nd\ne\n", "a\nB\nC\nd\ne\n"},
		{"replace vs split", "a\nb\nc\nd\ne\n", "a\nX\ne\n", "a\nX\nc\nD\ne\n", "a\nX\nD\ne\n"},
		{"same text from different ranges", "a\nb\nc\nd\ne\n", "a\nX\nd\ne\n", "a\nX\nc\nd\ne\n", "a\nX\nd\ne\n"},
		{"insert before modified", "a\nb\nc\nd\n", "a\nNEW\nb\nc\nd\n", "a\nB\nc\nd\n", "a\nNEW\nB\nc\nd\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, n := MergeText([]byte(tt.base), []byte(tt.ours), []byte(tt.thr), "ours", "theirs")
			_, gitN := gitMergeFile(t, []byte(tt.base), []byte(tt.ours), []byte(tt.thr))
			if n == 0 || gitN == 0 {
				t.Fatalf("conflicts: rex %d, git %d; both must report a conflict", n, gitN)
			}
			if string(got) == tt.naiveCleanResult {
				t.Fatalf("produced the naive merge %q", got)
			}
		})
	}
}

// TestMergeTextMatchesGitOnRandomInputs compares MergeText with git on
// random three-way inputs built from small alphabets, where repeated lines
// make many equally short diffs and git's choices matter.
func TestMergeTextMatchesGitOnRandomInputs(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	alphabets := []string{"ab", "abc", "abcdef", "a.b-c", "{}x", "abcdefghij"}
	for i := range 300 {
		alpha := alphabets[r.IntN(len(alphabets))]
		n := r.IntN(30)
		if i%50 == 0 {
			n = 400 + r.IntN(800) // large enough for the cost heuristics
		}
		base := randomLines(r, alpha, n)
		ours, theirs := mutateLines(r, base, alpha), mutateLines(r, base, alpha)
		if r.IntN(5) == 0 && len(ours) > 0 {
			ours = ours[:len(ours)-1] // no newline at the end
		}
		if i%7 == 0 {
			crlf := func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")) }
			base, ours, theirs = crlf(base), crlf(ours), crlf(theirs)
		}
		want, code := gitMergeFile(t, base, ours, theirs)
		got, n2 := MergeText(base, ours, theirs, "ours", "theirs")
		if !bytes.Equal(got, want) || min(n2, 127) != code {
			t.Fatalf("case %d differs from git (rex %d conflicts, git %d)\nbase=%q\nours=%q\ntheirs=%q\ngit=%q\nrex=%q", i, n2, code, base, ours, theirs, want, got)
		}
	}
}

func randomLines(r *rand.Rand, alpha string, n int) []byte {
	var b bytes.Buffer
	for range n {
		b.WriteByte(alpha[r.IntN(len(alpha))])
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// mutateLines deletes, replaces and inserts lines at random.
func mutateLines(r *rand.Rand, base []byte, alpha string) []byte {
	var out bytes.Buffer
	for _, l := range splitLines(base) {
		switch r.IntN(8) {
		case 0:
		case 1:
			out.WriteByte(alpha[r.IntN(len(alpha))])
			out.WriteByte('\n')
		case 2:
			out.Write(l)
			out.WriteByte(alpha[r.IntN(len(alpha))])
			out.WriteByte('\n')
		default:
			out.Write(l)
		}
	}
	return out.Bytes()
}

// FuzzMergeText: no panics; a side that did not change never conflicts;
// merging X with itself is clean and gives X.
func FuzzMergeText(f *testing.F) {
	f.Add([]byte("a\nb\nc\n"), []byte("a\nB\nc\n"), []byte("a\nb\nC\n"))
	f.Add([]byte(""), []byte("x"), []byte("y\n"))
	f.Add([]byte("a\r\nb\r\n"), []byte("a\r\n"), []byte("b\r\n"))
	f.Add([]byte("{\n}\n{\n}\n"), []byte("}\n{\n"), []byte("{\n{\n}\n"))
	f.Fuzz(func(t *testing.T, base, x, y []byte) {
		MergeText(base, x, y, "ours", "theirs")
		for _, tc := range []struct {
			name    string
			b, o, t []byte
		}{{"x with itself", base, x, x}, {"only theirs changed", base, base, x}, {"only ours changed", base, x, base}, {"all equal", x, x, x}} {
			got, n := MergeText(tc.b, tc.o, tc.t, "ours", "theirs")
			if n != 0 || !bytes.Equal(got, x) {
				t.Fatalf("%s: %d conflicts, %q; want %q", tc.name, n, got, x)
			}
		}
	})
}

func BenchmarkMergeTextLarge(b *testing.B) {
	// About 1 MB: 25,000 lines, each side editing every 50th line at
	// different offsets, so there are many clean hunks and a few conflicts.
	var base bytes.Buffer
	for i := range 25000 {
		base.WriteString("line " + strconv.Itoa(i) + " of a fairly ordinary source file\n")
	}
	lines := splitLines(base.Bytes())
	edit := func(every, offset int, tag string) []byte {
		var out bytes.Buffer
		for i, l := range lines {
			if i%every == offset {
				out.WriteString(tag + strconv.Itoa(i) + "\n")
				continue
			}
			out.Write(l)
		}
		return out.Bytes()
	}
	ours, theirs := edit(50, 0, "ours "), edit(50, 25, "theirs ")
	b.SetBytes(int64(base.Len()))
	for b.Loop() {
		MergeText(base.Bytes(), ours, theirs, "ours", "theirs")
	}
}

func BenchmarkDiffLinesLarge(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	base := randomLines(r, "abcdefghijklmnopqrstuvwxyz", 20000)
	other := mutateLines(r, base, "abcdefghijklmnopqrstuvwxyz")
	x, y := splitLines(base), splitLines(other)
	b.SetBytes(int64(len(base)))
	for b.Loop() {
		diffLines(x, y)
	}
}
