package engine

import (
	"fmt"
	"hash/maphash"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
)

func TestBufferLines(t *testing.T) {
	tests := []struct {
		name   string
		writes []string // "!" prefix: stderr
		want   string
	}{
		{"lines", []string{"a\nb\n"}, "a\nb\n"},
		{"split across writes", []string{"hel", "lo\nwor", "ld\n"}, "hello\nworld\n"},
		{"unfinished line shows", []string{"a\nprompt> "}, "a\nprompt> \n"},
		{"crlf", []string{"a\r\nb\r\n"}, "a\nb\n"},
		{"carriage return redraws", []string{"10%\r50%\r100%\n"}, "100%\n"},
		{"escapes stripped", []string{"\x1b[31mred\x1b[0m \x1b]0;title\x07x\n"}, "red x\n"},
		{"cursor moves stripped", []string{"a\x1b[2J\x1b[H\x1b[?25lb\x1b[1;1Hc\n"}, "abc\n"},
		{"c1 csi stripped", []string{"a\u009b31mb\n"}, "ab\n"},
		{"tabs expand", []string{"a\tb\tc\n"}, "a       b       c\n"},
		{"controls replaced", []string{"a\x00b\x7fc\n"}, "a\ufffdb\ufffdc\n"},
		{"invalid utf-8", []string{"a\xffb\n"}, "a\ufffdb\n"},
		{"lines in order of completion", []string{"out1 ", "!err1\n", "out2\n"}, "err1\nout1 out2\n"},
		{"wide runes", []string{"日本語\n"}, "日本語\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBuffer(100, maphash.MakeSeed(), nil)
			for _, w := range tt.writes {
				if rest, ok := strings.CutPrefix(w, "!"); ok {
					b.Write(true, []byte(rest))
				} else {
					b.Write(false, []byte(w))
				}
			}
			if got := b.Text(); got != tt.want {
				t.Errorf("text = %q, want %q", got, tt.want)
			}
		})
	}
}

// spansOf describes a line's colour: "red[3:6] bold[0:2]".
func spansOf(l *Line) string {
	var out []string
	for _, s := range l.Spans {
		out = append(out, fmt.Sprintf("%q%s", l.Text[s.Start:s.End], strings.ReplaceAll(s.Style.String(), "\x1b", "")))
	}
	return strings.Join(out, " ")
}

// TestBufferColour: SGR sequences become spans over the text (blinking
// and concealed text excepted); the pen carries over to the next line
// as in a terminal; a carriage return keeps the colour of what follows.
func TestBufferColour(t *testing.T) {
	tests := []struct {
		name  string
		write string
		want  []string // spans per line
	}{
		{"plain", "no colour\n", []string{""}},
		{"red word", "a \x1b[31mred\x1b[0m word\n", []string{`"red"[31m`}},
		{"ls --color", "\x1b[0m\x1b[01;34mdir\x1b[0m  file  \x1b[01;32mexe\x1b[0m\n", []string{`"dir"[1;34m "exe"[1;32m`}},
		{"grep match", "x \x1b[01;31m\x1b[Kneedle\x1b[m\x1b[K y\n", []string{`"needle"[1;31m`}},
		{"256 and true colour", "\x1b[38;5;208ma\x1b[38;2;1;2;3mb\x1b[m\n", []string{`"a"[38;5;208m "b"[38;2;1;2;3m`}},
		{"pen carries over", "\x1b[32mone\ntwo\x1b[0m\nthree\n", []string{`"one"[32m`, `"two"[32m`, ""}},
		{"carriage return", "\x1b[33m10%\r100%\x1b[m\n", []string{`"100%"[33m`}},
		{"blink and conceal dropped", "\x1b[5ma\x1b[8mb\x1b[0;1;5mc\x1b[m\n", []string{`"c"[1m`}},
		{"adjacent same colour merged", "\x1b[31ma\x1b[31mb\x1b[m\n", []string{`"ab"[31m`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBuffer(100, maphash.MakeSeed(), nil)
			b.Write(false, []byte(tt.write))
			rd := b.Read()
			defer rd.Done()
			if rd.Len() != len(tt.want) {
				t.Fatalf("%d lines, want %d: %q", rd.Len(), len(tt.want), b.Text())
			}
			for i, want := range tt.want {
				if got := spansOf(rd.Line(i)); got != want {
					t.Errorf("line %d %q: spans %s, want %s", i, rd.Line(i).Text, got, want)
				}
			}
		})
	}
	// A line that changes colour at every character keeps maxSpans.
	b := NewBuffer(10, maphash.MakeSeed(), nil)
	var s strings.Builder
	for i := range 300 {
		fmt.Fprintf(&s, "\x1b[%dmx", 31+i%2)
	}
	b.Write(false, []byte(s.String()+"\n"))
	rd := b.Read()
	if l := rd.Line(0); len(l.Spans) != maxSpans || l.Text != strings.Repeat("x", 300) {
		t.Errorf("%d spans over %d cells", len(l.Spans), l.Width)
	}
	rd.Done()
}

func TestBufferBounds(t *testing.T) {
	b := NewBuffer(100, maphash.MakeSeed(), nil)
	for i := range 1000 {
		b.Write(false, fmt.Appendf(nil, "line %d\n", i))
	}
	rd := b.Read()
	n, dropped := rd.Len(), rd.Dropped()
	marker, first := rd.Line(0), rd.Line(1).Text
	rd.Done()
	if n != 101 || first != "line 900" {
		t.Errorf("kept %d lines from %q; want the marker and the newest 100", n, first)
	}
	if marker.Kind != Marker || marker.Text != "… 900 earlier lines dropped" {
		t.Errorf("line 0 is %q (%d), want the marker", marker.Text, marker.Kind)
	}
	if dropped != 899 {
		t.Errorf("Dropped() = %d, want 899 (line 1 is line 900 of all)", dropped)
	}
	// One huge line without a newline is cut into bounded lines.
	b.Clear()
	b.Write(false, []byte(strings.Repeat("x", 5*MaxLineBytes+7)))
	b.Write(false, []byte("日本"))
	b.Flush()
	lines := strings.Split(strings.TrimSuffix(b.Text(), "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines, want 6", len(lines))
	}
	for _, l := range lines {
		if len(l) > MaxLineBytes {
			t.Errorf("a line of %d bytes is kept; the cap is %d", len(l), MaxLineBytes)
		}
	}
	if !strings.HasSuffix(lines[5], "日本") {
		t.Errorf("last line %q lost its runes", lines[5])
	}
	// A cleared buffer says nothing about dropped lines.
	rd = b.Read()
	if rd.Line(0).Kind == Marker {
		t.Error("a cleared buffer shows a marker")
	}
	rd.Done()
}

func TestBufferDropFront(t *testing.T) {
	for _, wrapped := range []bool{false, true} {
		b := NewBuffer(10, maphash.MakeSeed(), nil)
		n := 8
		if wrapped {
			n = 15 // the ring has wrapped
		}
		for i := range n {
			b.Write(false, fmt.Appendf(nil, "%d\n", i))
		}
		if got := b.DropFront(3); got != 3 {
			t.Fatalf("dropped %d", got)
		}
		want := ""
		for i := max(0, n-10) + 3; i < n; i++ {
			want += fmt.Sprintf("%d\n", i)
		}
		if got := b.Text(); got != want {
			t.Errorf("wrapped %v: %q, want %q", wrapped, got, want)
		}
		b.Write(false, []byte("next\n"))
		if got := b.Text(); got != want+"next\n" {
			t.Errorf("after DropFront a write gives %q", got)
		}
		rd := b.Read()
		if m := rd.Line(0); m.Kind != Marker || !strings.HasPrefix(m.Text, fmt.Sprintf("… %d earlier", max(0, n-10)+3)) {
			t.Errorf("marker %q", m.Text)
		}
		rd.Done()
	}
}

// FuzzBufferWrite feeds arbitrary output, split at an arbitrary point,
// and checks what a pane draws from it: valid UTF-8, no control
// character, no escape byte, widths that add up, spans inside the text.
func FuzzBufferWrite(f *testing.F) {
	f.Add([]byte("\x1b[31mred\x1b[0m\r\nplain\ttab\n"), 3)
	f.Add([]byte("\x1b]8;;http://x\x07link\x1b]8;;\x07\n\x9b31m"), 5)
	f.Add([]byte("\x1b[38;2;255;0;0;48;5;9mz\x1b[K\x1bP1;2q\x1b\\\xff\n"), 7)
	f.Add([]byte("\x1b["+strings.Repeat("1;", 31)+"1mx\x1bP"+strings.Repeat("2:", 33)+"q\n"), 9)
	f.Fuzz(func(t *testing.T, data []byte, split int) {
		b := NewBuffer(50, maphash.MakeSeed(), nil)
		split = min(max(split, 0), len(data))
		b.Write(false, data[:split])
		b.Write(true, data[split:])
		b.Flush()
		rd := b.Read()
		defer rd.Done()
		for i := range rd.Len() {
			l := rd.Line(i)
			if !utf8.ValidString(l.Text) {
				t.Fatalf("line %q is not UTF-8", l.Text)
			}
			for _, r := range l.Text {
				if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
					t.Fatalf("line %q holds control %U", l.Text, r)
				}
			}
			if l.Width != ansi.StringWidth(l.Text) {
				t.Fatalf("line %q: width %d, measured %d", l.Text, l.Width, ansi.StringWidth(l.Text))
			}
			prev := 0
			for _, s := range l.Spans {
				if s.Start < prev || s.End <= s.Start || s.End > len(l.Text) {
					t.Fatalf("line %q: span %d-%d out of order or range", l.Text, s.Start, s.End)
				}
				if s.Style.Attrs&(uv.AttrBlink|uv.AttrRapidBlink|uv.AttrConceal) != 0 {
					t.Fatalf("line %q keeps a blinking or concealed span", l.Text)
				}
				prev = s.End
			}
		}
	})
}

// BenchmarkBufferWrite measures how fast output is taken into a pane.
func BenchmarkBufferWrite(b *testing.B) {
	buf := NewBuffer(DefaultScrollback, maphash.MakeSeed(), func() {})
	chunk := []byte(strings.Repeat("some ordinary output line of a build log, 64 bytes or so..\n", 64))
	b.SetBytes(int64(len(chunk)))
	b.ResetTimer()
	for range b.N {
		buf.Write(false, chunk)
	}
}

// BenchmarkBufferWriteColour is BenchmarkBufferWrite for coloured output
// (ls --color, grep --color): every line sets and resets a colour.
func BenchmarkBufferWriteColour(b *testing.B) {
	buf := NewBuffer(DefaultScrollback, maphash.MakeSeed(), func() {})
	chunk := []byte(strings.Repeat("\x1b[01;34msome\x1b[0m ordinary \x1b[01;31m\x1b[Kcoloured\x1b[m\x1b[K output line, 64 bytes..\n", 64))
	b.SetBytes(int64(len(chunk)))
	b.ResetTimer()
	for range b.N {
		buf.Write(false, chunk)
	}
}

// TestBufferIsSmall: a buffer costs little before it holds anything (a
// pane's every host has one, and the rex server keeps them): not the
// 64 KiB of data buffer ansi.NewParser allocates.
func TestBufferIsSmall(t *testing.T) {
	const n = 100
	bufs := make([]*Buffer, n)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range bufs {
		bufs[i] = NewBuffer(10, maphash.MakeSeed(), nil)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 4<<10 {
		t.Errorf("a new buffer allocates %d bytes", per)
	}
	runtime.KeepAlive(bufs)
}

// TestBufferManyParameters: a sequence with more parameters than the ANSI
// parser holds (charmbracelet/x/ansi's DecodeSequence indexes past its 32)
// is dropped like any other, not a panic that would take the rex server
// down with every session in it; a colour with few parameters still
// applies after it.
func TestBufferManyParameters(t *testing.T) {
	many := strings.Repeat("1;", 40) + "1"
	for _, raw := range []string{
		"\x1b[" + many + "mX\n",
		"\x1b[" + strings.Repeat("1:", 40) + "1mX\n",
		"\x1bP" + many + "q\x1b\\X\n",
		"\xc2\x9b" + many + "mX\n",
		"\x1b[" + many + "HX\n",
	} {
		if got := Sanitize([]byte(strings.TrimSuffix(raw, "\n"))); got != "X" {
			t.Errorf("Sanitize(%.20q…) = %q", raw, got)
		}
		b := NewBuffer(10, maphash.MakeSeed(), nil)
		b.Write(false, []byte(raw+"\x1b[31mred\x1b[0m\n"))
		rd := b.Read()
		ok := rd.Len() == 2 && rd.Line(0).Text == "X" && rd.Line(1).Text == "red" && len(rd.Line(1).Spans) == 1
		rd.Done()
		if !ok {
			t.Errorf("after %.20q…: %q", raw, b.Text())
		}
	}
}
