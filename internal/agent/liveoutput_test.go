package agent

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rexconsole/rex/internal/secrets"
)

// Chunks cut anywhere, also inside a character, come out as whole
// characters per key, in order; what is held when a stream ends comes out
// on flush; invalid bytes pass through.
func TestTextJoiner(t *testing.T) {
	in := "héllo wörld 日本語 🎉\xff end"
	for size := 1; size <= 5; size++ {
		var j textJoiner
		var a, b strings.Builder
		for i := 0; i < len(in); i += size {
			chunk := []byte(in[i:min(i+size, len(in))])
			for _, out := range []*strings.Builder{&a, &b} {
				key := "h1/stdout"
				if out == &b {
					key = "h2/stdout"
				}
				s := j.text(key, chunk)
				rest := in[out.Len():]
				if !strings.HasPrefix(rest, s) || len(s) < len(rest) && !utf8.RuneStart(rest[len(s)]) {
					t.Fatalf("size %d: chunk %q gave %q: not the next whole characters", size, chunk, s)
				}
				out.WriteString(s)
			}
		}
		a.WriteString(j.flush("h1/stdout"))
		b.WriteString(j.flush("h2/stdout"))
		if a.String() != in || b.String() != in {
			t.Fatalf("size %d: %q and %q, want %q", size, a.String(), b.String(), in)
		}
	}
	var j textJoiner
	if got := j.text("k", []byte("ab\xe6\x97")); got != "ab" {
		t.Fatalf("%q, want the whole characters only", got)
	}
	if got := j.flush("k"); got != "\xe6\x97" {
		t.Fatalf("flush gave %q, want the held start of a character", got)
	}
}

// A tool's live output is masked as a stream: the key split between two
// chunks (of two hosts, interleaved) never shows, in any event, and the
// events of each host put together are the masked output.
func TestLiveOutputMasksSplitSecrets(t *testing.T) {
	const key = "sk-or-v1-0123456789abcdef"
	in := "é " + key + " 日本 " + key + "\n"
	want := secrets.Mask(in, []string{key})
	got := map[string]*strings.Builder{"h1": {}, "h2": {}}
	var events []string
	l := liveOutput{mask: []string{key}, emit: func(host, stream, job, text string) {
		if stream != "stdout" || job != "j1" {
			t.Errorf("event of %s %s job %q", host, stream, job)
		}
		events = append(events, text)
		got[host].WriteString(text)
	}}
	for i := 0; i < len(in); i += 3 {
		for _, h := range []string{"h1", "h2"} {
			l.write(h, "stdout", "j1", []byte(in[i:min(i+3, len(in))]))
		}
	}
	l.end("h1")
	l.end("h2")
	for _, e := range events {
		if strings.Contains(e, "0123") || strings.Contains(e, "cdef") {
			t.Fatalf("an event shows part of the key: %q", e)
		}
	}
	for h, b := range got {
		if b.String() != want {
			t.Errorf("%s: %q, want %q", h, b.String(), want)
		}
	}
}
