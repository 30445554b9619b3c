package toolset

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRender(t *testing.T) {
	outs := []outcome{
		{host: "web1", ok: true, status: "exit 0", out: text("Linux 6.1\n")},
		{host: "web2", ok: true, status: "exit 0", out: text("Linux 6.1\n")},
		{host: "db2", status: "exit 1", out: text("\x1b[31mboom\x1b[0m\n")},
		{host: "web3", ok: true, status: "exit 0", out: text("Linux 6.1\n")},
		{host: "db3", status: "exit 1", out: text("boom\n")},
		{host: "cache1", status: "unreachable", out: text("connect cache1: connection refused")},
	}
	r := render("all", []string{"web1", "web2", "db2", "web3", "db3", "cache1"}, outs, "")
	want := "target all: cache1,db[2-3],web[1-3]\n" +
		"web[1-3] (3 hosts) · exit 0\n  Linux 6.1\n" +
		"db[2-3] (2 hosts) · exit 1\n  boom\n" +
		"cache1 · unreachable\n  connect cache1: connection refused\n" +
		"3/6 ok; db[2-3] exit 1, cache1 unreachable"
	if r.Text != want {
		t.Errorf("text:\n%s\nwant:\n%s", r.Text, want)
	}
	if r.IsError || len(r.PerHost) != 6 || r.PerHost[2].Output != "boom\n" {
		t.Errorf("result %+v", r)
	}
	r = render("db2", []string{"db2"}, outs[2:3], "")
	if !r.IsError || r.Text != "target db2\ndb2 · exit 1\n  boom\n0/1 ok; db2 exit 1" {
		t.Errorf("one failing host: %+v", r)
	}
}

func TestSummaryPutsRunningLast(t *testing.T) {
	s := summary([]outcome{{host: "a1", status: statusRunning}, {host: "a2", status: "exit 2"}, {host: "a3", ok: true}})
	if s != "1/3 ok; a2 exit 2, a1 running" {
		t.Errorf("summary %q", s)
	}
}

func TestCompact(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 30; i++ {
		b.WriteString(strings.Repeat("x", i%3) + "\n")
	}
	got := compact(text(b.String()), 12)
	if lines := strings.Count(got, "\n"); lines != 13 || !strings.Contains(got, "… 18 lines omitted …") {
		t.Errorf("compact to 12 lines:\n%s", got)
	}
	if got := compact(text(""), 12); got != "(no output)\n" {
		t.Errorf("empty: %q", got)
	}
	long := strings.Repeat("é", 400)
	if got := compact(text(long), 12); !strings.HasSuffix(got, "… (288 more bytes)\n") || !strings.HasPrefix(got, strings.Repeat("é", 256)) {
		t.Errorf("long line: %q", got)
	}
	if got := compact(text("a\xffb\r\n"), 12); !utf8.ValidString(got) || strings.Contains(got, "\r") || !strings.HasPrefix(got, "a") {
		t.Errorf("invalid UTF-8 and CRLF: %q", got)
	}
	c := newCapture()
	for i := 0; i < 100000; i++ {
		c.write([]byte("line\n"))
	}
	got = compact(c.output(), 30)
	if !strings.Contains(got, "… 99970 lines omitted …") || strings.Count(got, "\n") != 31 {
		t.Errorf("capture:\n%s", got)
	}
}
