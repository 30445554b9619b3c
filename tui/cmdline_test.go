package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
)

func TestCompleteLine(t *testing.T) {
	src := compSource{
		commands: []string{"/device", "/target", "/run", "/theme", "/layout", "/close", "/clear", "/help", "/quit"},
		devices:  []string{"db1", "web1", "web2"},
		groups:   []string{"web", "dbs"},
		themes:   []string{"dark", "light", "high-contrast"},
		tools:    func() []string { return []string{"ops/check", "ops/greet", "deploy"} },
	}
	tests := []struct {
		line  string
		start int
		cands []string
	}{
		{"/", 0, src.commands},
		{"/t", 0, []string{"/target", "/theme"}},
		{"/cl", 0, []string{"/clear", "/close"}},
		{"/nothing", 0, nil},
		{"/target ", 8, []string{"all", "db1", "dbs", "local", "web", "web1", "web2"}},
		{"/target we", 8, []string{"web", "web1", "web2"}},
		{"/target web1,d", 13, []string{"db1", "dbs"}},
		{"/target web ", 12, nil},
		{"/run w", 5, []string{"web", "web1", "web2"}},
		{"/run --timeout 5s w", 18, []string{"web", "web1", "web2"}},
		{"/run --timeout ", 15, nil},
		{"/run web -", 9, []string{"--", "--concurrency", "--gather", "--timeout"}},
		{"/run web -- w", 12, nil},
		{"/run web uptime w", 16, nil},
		{"/device ", 8, []string{"add", "check", "clean", "group", "help", "list", "prepare", "remove", "show"}},
		{"/device s", 8, []string{"show"}},
		{"/device show w", 13, []string{"web1", "web2"}},
		{"/device check web,l", 18, []string{"local"}},
		{"/device group ", 14, []string{"add", "create", "delete", "list", "remove"}},
		{"/device group add ", 18, []string{"dbs", "web"}},
		{"/device group add web ", 22, []string{"db1", "web1", "web2"}},
		{"/device group delete d", 21, []string{"dbs"}},
		{"/device add ", 12, nil},
		{"/layout r", 8, []string{"rows"}},
		{"/theme l", 7, []string{"light"}},
		{"/close ", 7, []string{"all"}},
		{"/push ", 6, nil},
		{"/push site ", 11, nil},
		{"/push site srv/site w", 20, []string{"web", "web1", "web2"}},
		{"/push site srv/site web1,d", 25, []string{"db1", "dbs"}},
		{"/push site srv/site web ", 24, nil},
		{"/pull srv/site site d", 20, []string{"db1", "dbs"}},
		{"/push -w d", 9, []string{"db1", "dbs"}},
		{"/pull srv/site site web -x web1,w", 32, []string{"web", "web1", "web2"}},
		{"/tool ", 6, []string{"check", "list", "new", "run", "show"}},
		{"/tool r", 6, []string{"run"}},
		{"/tool list ", 11, nil},
		{"/tool show o", 11, []string{"ops/check", "ops/greet"}},
		{"/tool show ops/greet -", 21, []string{"--trace"}},
		{"/tool run ", 10, []string{"deploy", "ops/check", "ops/greet"}},
		{"/tool run --trace ops/g", 18, []string{"ops/greet"}},
		{"/tool run ops/greet ", 20, nil},
		{"/tool run ops/greet --", 20, []string{"--param", "--target", "--trace"}},
		{"/tool run ops/greet --param ", 28, nil},
		{"/tool run ops/greet --target w", 29, []string{"web", "web1", "web2"}},
		{"/tool run ops/greet -w web1,l", 28, []string{"local"}},
		{"/tool run --target web o", 23, []string{"ops/check", "ops/greet"}},
		{"ls /t", 3, nil},
		{"echo", 0, nil},
	}
	for _, tt := range tests {
		c := completeLine(tt.line, src)
		want := slices.Clone(tt.cands)
		slices.Sort(want)
		if c.start != tt.start || !slices.Equal(c.cands, want) {
			t.Errorf("completeLine(%q) = %d %q, want %d %q", tt.line, c.start, c.cands, tt.start, want)
		}
	}
}

func TestCompletionKeys(t *testing.T) {
	e := newEnv(t, 80, 24, true)
	// One candidate: inserted with a space.
	e.typeText("/tar")
	e.press("tab")
	if got := e.m.input.Value(); got != "/target " {
		t.Fatalf("after tab: %q", got)
	}
	// Several: their common prefix, and the list in the message area.
	e.typeText("w")
	e.press("tab")
	if got := e.m.input.Value(); got != "/target web" {
		t.Fatalf("after tab: %q", got)
	}
	e.wantMessage("web  web1  web2  web3")
	// Tab again cycles through them.
	e.press("tab")
	if got := e.m.input.Value(); got != "/target web" {
		t.Errorf("first cycle: %q", got)
	}
	e.press("tab")
	if got := e.m.input.Value(); got != "/target web1" {
		t.Errorf("second cycle: %q", got)
	}
	e.press("tab", "tab", "tab")
	if got := e.m.input.Value(); got != "/target web" {
		t.Errorf("cycling wraps: %q", got)
	}
	// Any other key ends the cycle; a comma starts a new item.
	e.typeText("1,")
	e.press("tab")
	if got := e.m.input.Value(); got != "/target web1,all" {
		t.Errorf("after comma: %q", got)
	}
	e.wantMessage("all  db1  local  web  web1  web2  web3")
	// With the line empty, tab moves focus between panes instead.
	e.press("ctrl+u")
	e.submit("/run web -- echo a")
	if e.m.focus != 0 {
		t.Fatalf("focus = %d after a run, want its first pane", e.m.focus)
	}
	e.press("tab")
	if e.m.focus != 1 {
		t.Errorf("tab on an empty line: focus %d, want 1", e.m.focus)
	}
	e.press("shift+tab", "shift+tab")
	if e.m.focus != 2 {
		t.Errorf("shift+tab twice from 1: focus %d, want 2 (wrapping)", e.m.focus)
	}
}

func TestHistoryWalk(t *testing.T) {
	h, err := loadHistory("")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"uptime", "ls /etc", "uname -a", "ls /var", "ls /var", " secret", ""} {
		if err := h.Add(l); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"uptime", "ls /etc", "uname -a", "ls /var"}; !slices.Equal(h.entries, want) {
		t.Fatalf("entries = %q, want %q (no repeat, no leading-space line, no blank)", h.entries, want)
	}
	steps := []struct {
		op   string // prev or next
		want string
		ok   bool
	}{
		{"prev", "ls /var", true},
		{"prev", "uname -a", true},
		{"prev", "ls /etc", true},
		{"prev", "uptime", true},
		{"prev", "", false},
		{"next", "ls /etc", true},
		{"next", "uname -a", true},
		{"next", "ls /var", true},
		{"next", "", true}, // back to the (empty) line being typed
		{"next", "", false},
	}
	cur := ""
	for i, s := range steps {
		var got string
		var ok bool
		if s.op == "prev" {
			got, ok = h.Prev(cur)
		} else {
			got, ok = h.Next()
		}
		if got != s.want || ok != s.ok {
			t.Fatalf("step %d %s = %q %v, want %q %v", i, s.op, got, ok, s.want, s.ok)
		}
		if ok {
			cur = got
		}
	}

	// With text typed, only entries starting with it.
	h.reset()
	var got []string
	cur = "ls"
	for {
		s, ok := h.Prev(cur)
		if !ok {
			break
		}
		got, cur = append(got, s), s
	}
	if want := []string{"ls /var", "ls /etc"}; !slices.Equal(got, want) {
		t.Errorf("prefix walk = %q, want %q", got, want)
	}
}

func TestHistoryFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state", "rex", HistoryFile)
	h, err := loadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	h.Add("uptime")
	h.Add("df -h\x1b[31m") // control characters never reach the file
	h.Add(" export TOKEN=x")
	h2, err := loadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"uptime", "df -h[31m"}; !slices.Equal(h2.entries, want) {
		t.Errorf("reloaded %q, want %q", h2.entries, want)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("history file mode = %v, %v; want 0600 (it may hold secrets)", fi.Mode().Perm(), err)
	}

	// A file grown past twice the limit is compacted on load.
	var b strings.Builder
	for i := range 2*historyMax + 10 {
		fmt.Fprintf(&b, "cmd %d\n", i)
	}
	b.WriteString("\n\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	h3, err := loadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(h3.entries) != historyMax || h3.entries[historyMax-1] != fmt.Sprintf("cmd %d", 2*historyMax+9) {
		t.Errorf("%d entries, last %q", len(h3.entries), h3.entries[len(h3.entries)-1])
	}
	data, _ := os.ReadFile(path)
	if n := strings.Count(string(data), "\n"); n != historyMax {
		t.Errorf("compacted file has %d lines, want %d", n, historyMax)
	}
}

// TestHistoryOfLongLinesIsCompacted: a file of long entries, whose last
// MiB holds fewer than twice the limit of lines, is compacted too once it
// is larger than what a load reads; it grew without end.
func TestHistoryOfLongLinesIsCompacted(t *testing.T) {
	path := filepath.Join(t.TempDir(), HistoryFile)
	long := strings.Repeat("x", 1000)
	var b strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&b, "echo %d %s\n", i, long)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := loadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > historyReadMax {
		t.Errorf("the history file stays at %d bytes, more than a load reads (%d)", fi.Size(), historyReadMax)
	}
	if last := h.entries[len(h.entries)-1]; !strings.HasPrefix(last, "echo 2999 ") {
		t.Errorf("the last entry is %.20q…", last)
	}
}

// TestHistoryAcrossRuns: what one console ran, the next one recalls with
// the up key.
func TestHistoryAcrossRuns(t *testing.T) {
	e := newEnv(t, 80, 24, true)
	e.submit("echo one")
	e.submit("/target web")
	e.submit("echo two")

	e2 := newEnv(t, 80, 24, true)
	e2.m.hist, _ = loadHistory(filepath.Join(e.m.opts.StateDir, HistoryFile))
	e2.press("up")
	if got := e2.m.input.Value(); got != "echo two" {
		t.Errorf("up = %q", got)
	}
	e2.press("up", "up")
	if got := e2.m.input.Value(); got != "echo one" {
		t.Errorf("up×3 = %q", got)
	}
	e2.press("down")
	if got := e2.m.input.Value(); got != "/target web" {
		t.Errorf("down = %q", got)
	}
	e2.press("down", "down")
	if got := e2.m.input.Value(); got != "" {
		t.Errorf("down past the newest = %q, want the empty line back", got)
	}
	// Prefix: "ech" then up skips /target.
	e2.typeText("ech")
	e2.press("up", "up")
	if got := e2.m.input.Value(); got != "echo one" {
		t.Errorf("prefix walk = %q", got)
	}
}

func TestEditor(t *testing.T) {
	tests := []struct {
		keys []string // "text:xyz" types, else a key
		want string
		pos  int
	}{
		{[]string{"text:hello world"}, "hello world", 11},
		{[]string{"text:hello world", "ctrl+w"}, "hello ", 6},
		{[]string{"text:hello world", "ctrl+a", "ctrl+k"}, "", 0},
		{[]string{"text:hello world", "alt+b", "ctrl+u"}, "world", 0},
		{[]string{"text:hello world", "left", "left", "backspace"}, "hello wold", 8},
		{[]string{"text:hello world", "home", "delete", "end", "text:!"}, "ello world!", 11},
		{[]string{"text:hello world", "ctrl+left", "ctrl+left", "alt+d"}, " world", 0},
		{[]string{"text:héllo", "left", "text:ü"}, "héllüo", 5},
	}
	for _, tt := range tests {
		var e lineEditor
		for _, k := range tt.keys {
			if s, ok := strings.CutPrefix(k, "text:"); ok {
				for _, r := range s {
					e.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
				}
				continue
			}
			e.Update(keyMsg(t, k))
		}
		if e.Value() != tt.want || e.Position() != tt.pos {
			t.Errorf("%q → %q at %d, want %q at %d", tt.keys, e.Value(), e.Position(), tt.want, tt.pos)
		}
	}
	// A paste loses its newlines and control characters.
	var e lineEditor
	e.Update(tea.PasteMsg{Content: "a\nb\x1b[2Jc\td"})
	if e.Value() != "a b[2Jc d" {
		t.Errorf("paste = %q", e.Value())
	}
	// A long line scrolls so that the cursor stays in the field.
	e.SetValue(strings.Repeat("x", 100) + "END")
	e.SetWidth(20)
	e.scrollIntoView() // as the layout does after every Update
	view, x := e.View(func(s string) string { return s })
	if !strings.HasSuffix(strings.TrimRight(view, " "), "END") || x != 19 {
		t.Errorf("scrolled view %q, cursor %d", view, x)
	}
}

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  bool
	}{
		{"", nil, false},
		{"  a  b\tc ", []string{"a", "b", "c"}, false},
		{`web -- 'df -h | grep /data'`, []string{"web", "--", "df -h | grep /data"}, false},
		{`--desc "front end" x`, []string{"--desc", "front end", "x"}, false},
		{`"a \"b\" \\ \$c"`, []string{`a "b" \ \$c`}, false},
		{`a\ b c\'d`, []string{"a b", "c'd"}, false},
		{`''`, []string{""}, false},
		{`x'y'"z"`, []string{"xyz"}, false},
		{`'open`, nil, true},
		{`"open`, nil, true},
		{`"ends with \"`, nil, true},
		{`trailing\`, []string{`trailing\`}, false},
	}
	for _, tt := range tests {
		got, err := splitWords(tt.in)
		if (err != nil) != tt.err || !slices.Equal(got, tt.want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func FuzzSplitWords(f *testing.F) {
	for _, s := range []string{`web -- 'a | b'`, `"x \" y"`, `a\ b`, `'`, "\x00\"\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := splitWords(s)
		if err != nil {
			return
		}
		// Words without quotes, blanks or backslashes come back as typed.
		if !strings.ContainsAny(s, `'"\`) {
			blank := func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }
			if want := strings.FieldsFunc(s, blank); !slices.Equal(words, want) && !(len(want) == 0 && len(words) == 0) {
				t.Fatalf("splitWords(%q) = %q, want %q", s, words, want)
			}
		}
	})
}

func FuzzParseHistory(f *testing.F) {
	f.Add([]byte("uptime\nls -l\n\n"))
	f.Add([]byte(" secret\r\nx\x1b[2J\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, e := range parseHistory(data) {
			if e == "" || strings.ContainsAny(e, "\n\r\x1b\x00") || e != strings.TrimSpace(e) {
				t.Fatalf("parseHistory kept %q", e)
			}
		}
	})
}
