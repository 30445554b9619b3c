package tui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// writeFiles writes name → content under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// syncEnv is a console whose targets are in-process rexds, with a small
// tree in site/ of the directory rex "started in".
func syncEnv(t *testing.T) (*testEnv, *rexdFleet) {
	e := newEnv(t, 160, 40, true)
	f := newRexdFleet(t, "db1")
	withRexdFleet(e, f)
	writeFiles(t, filepath.Join(e.dir, "site"), map[string]string{
		"index.html": "<h1>hello</h1>\n",
		"css/a.css":  "body{}\n",
		"notes.txt":  "one\ntwo\nthree\n",
	})
	return e, f
}

// paneHeader is the top border of the pane titled name, as drawn.
func (e *testEnv) paneHeader(i int) string {
	e.t.Helper()
	g := e.m.geometry()
	for _, p := range g.panes {
		if p.idx == i {
			c := &paneCtx{st: e.m.st, now: e.m.now(), states: e.m.states}
			return ansi.Strip(p.pane.View(c)[0])
		}
	}
	e.t.Fatalf("pane %d is not on the screen", i)
	return ""
}

// TestPushPanes pushes a tree to two targets: a pane each ends with the
// line rex push prints and "done", the files are on both; a second push
// is "up to date"; the default target is the current one.
func TestPushPanes(t *testing.T) {
	e, f := syncEnv(t)
	e.submit("/push site srv/site web1,web2")
	if len(e.m.panes) != 2 {
		t.Fatalf("%d panes, want one per target", len(e.m.panes))
	}
	for i, name := range []string{"web1", "web2"} {
		text := e.paneText(i)
		head := name + ": " + filepath.Join(f.home(name), "srv", "site") + ": created with 4 entries · sent 3 files, 2 dirs, "
		if !strings.HasPrefix(text, head) || !strings.Contains(text, " (2 queries, ") || !strings.HasSuffix(text, " in)\n") {
			t.Errorf("pane %s says %q, want the line rex push prints: %q…", name, text, head)
		}
		if h := e.paneHeader(i); !strings.Contains(h, name) || !strings.Contains(h, "push site srv/site") || !strings.Contains(h, " done ") {
			t.Errorf("pane %s header %q", name, h)
		}
		if got := readFile(t, filepath.Join(f.home(name), "srv/site/css/a.css")); got != "body{}\n" {
			t.Errorf("%s holds %q", name, got)
		}
	}
	e.wantMessage("push site srv/site — 2 ok")
	if !strings.Contains(e.screen(), "100%") {
		t.Errorf("the bars do not show the push complete:\n%s", e.screen())
	}

	// Unchanged: up to date, on the current target by default.
	e.submit("/close all")
	e.submit("/target web")
	e.submit("/push site srv/site")
	if len(e.m.panes) != 3 {
		t.Fatalf("%d panes for the group web, want 3", len(e.m.panes))
	}
	for i, name := range []string{"web1", "web2"} {
		if text := e.paneText(i); !strings.HasPrefix(text, name+": "+filepath.Join(f.home(name), "srv", "site")+": up to date · nothing sent (1 query,") {
			t.Errorf("re-push pane %s says %q", name, text)
		}
		if h := e.paneHeader(i); !strings.Contains(h, "up to date") {
			t.Errorf("re-push pane %s header %q", name, h)
		}
	}
	if text := e.paneText(2); !strings.Contains(text, ": created with 4 entries · sent 3 files") {
		t.Errorf("web3, new to the tree, says %q", text)
	}

	// One change: one file crosses, to each.
	writeFiles(t, filepath.Join(e.dir, "site"), map[string]string{"notes.txt": "changed\n"})
	e.submit("/close all")
	e.submit("/push site srv/site web1")
	if text := e.paneText(0); !strings.Contains(text, "/srv/site: updated 1 · sent 1 file, 1 dir, ") {
		t.Errorf("push of one change says %q", text)
	}
	if got := readFile(t, filepath.Join(f.home("web1"), "srv/site/notes.txt")); got != "changed\n" {
		t.Errorf("the change did not land: %q", got)
	}
}

// TestPushPullTargetsAsFlag: /push and /pull take -w TARGETS and -x NAMES
// as rex push and rex pull do: with -w every word is a path (several
// sources, then DEST), and -x leaves targets out of -w's, a written
// TARGETS or the current target.
func TestPushPullTargetsAsFlag(t *testing.T) {
	e, f := syncEnv(t)
	steps := []struct {
		line  string
		panes []string // the targets that got a pane, in order
		files []string // then hold these, under their home
	}{
		{"/push -w web1,web2 site srv/a", []string{"web1", "web2"}, []string{"srv/a/index.html"}},
		{"/push site/notes.txt site/index.html srv/b/ -w web2", []string{"web2"}, []string{"srv/b/notes.txt", "srv/b/index.html"}},
		{"/push site srv/c web -x web3 -x web1", []string{"web2"}, []string{"srv/c/css/a.css"}},
		{"/pull --target web1 srv/a back", []string{"web1"}, nil},
	}
	for _, st := range steps {
		e.submit("/close all")
		e.submit(st.line)
		var got []string
		for _, p := range e.m.panes {
			got = append(got, p.Title())
		}
		if strings.Join(got, ",") != strings.Join(st.panes, ",") {
			t.Fatalf("%s: panes for %q, want %q; message %q", st.line, got, st.panes, e.message())
		}
		for _, name := range st.panes {
			for _, file := range st.files {
				if _, err := os.Stat(filepath.Join(f.home(name), file)); err != nil {
					t.Errorf("%s: %s lacks %s: %v", st.line, name, file, err)
				}
			}
		}
	}
	if got := readFile(t, filepath.Join(e.dir, "back", "index.html")); got != "<h1>hello</h1>\n" {
		t.Errorf("/pull -w web1 brought back %q", got)
	}
	// The current target, less -x: nothing is left, which is said.
	e.submit("/close all")
	e.submit("/target web1")
	e.submit("/push site srv/d -x web1")
	if len(e.m.panes) != 0 {
		t.Errorf("/push to the current target it leaves out opened %d panes", len(e.m.panes))
	}
	e.wantError("/push web1,!web1:", "leave out every one")
}

// TestPushErrors: each mistake is one sentence, in the message area when
// nothing could start, in the target's pane when that target failed.
func TestPushErrors(t *testing.T) {
	tests := []struct {
		line   string
		panes  int
		want   []string // in the message, or in the first pane
		header string   // the first pane's status
	}{
		{"/push", 0, []string{"usage: /push SRC... DEST [TARGETS]"}, ""},
		{"/push site", 0, []string{"usage: /push"}, ""},
		{"/push site srv web1 extra", 0, []string{"/push extra:", "no device or group"}, ""},
		{"/push site srv web1 --nosuch", 0, []string{"unknown flag --nosuch"}, ""},
		{"/push site srv web1 --atomic --delete", 0, []string{"drop --delete"}, ""},
		{"/push site srv wbe1", 0, []string{"/push wbe1:", "web1"}, ""},
		{"/push nosuch srv web1,web2", 2, []string{"read ", "nosuch", "no such file"}, "failed"},
		{"/push site srv db1", 1, []string{"connection refused"}, "unreachable"},
		{"/push site /etc/rex-tui-push-test web1", 1, []string{"write /etc/rex-tui-push-test", "outside"}, "failed"},
		{"/pull srv/site here web", 3, []string{"read srv/site"}, "failed"},
		{"/pull srv", 0, []string{"usage: /pull REMOTE LOCAL [TARGETS]"}, ""},
		{"/pull nosuch here web1", 1, []string{"read nosuch"}, "failed"},
		{"/pull srv here db1", 1, []string{"connection refused"}, "unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			e, _ := syncEnv(t)
			e.submit(tt.line)
			if len(e.m.panes) != tt.panes {
				t.Fatalf("%d panes, want %d; message %q", len(e.m.panes), tt.panes, e.message())
			}
			if tt.panes == 0 {
				e.wantError(tt.want...)
				if n := len(e.m.msg.lines); n != 1 {
					t.Errorf("the error is %d lines: %q", n, e.m.msg.lines)
				}
				return
			}
			text := e.paneText(0)
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("pane says %q, want %q in it", text, w)
				}
			}
			if strings.Count(strings.TrimSpace(text), "\n") != 0 {
				t.Errorf("the error is more than one line: %q", text)
			}
			if h := e.paneHeader(0); !strings.Contains(h, tt.header) {
				t.Errorf("header %q, want %q", h, tt.header)
			}
			if _, err := os.Stat("/etc/rex-tui-push-test"); err == nil {
				t.Fatal("a push wrote outside the target's roots")
			}
		})
	}
}

// TestPull brings a remote change back, then meets a conflict: the pane
// lists it, the file holds both sides.
func TestPull(t *testing.T) {
	e, f := syncEnv(t)
	e.submit("/push site srv/site web1")
	remote := filepath.Join(f.home("web1"), "srv/site")
	writeFiles(t, remote, map[string]string{"notes.txt": "one\ntwo\nthree\nfour\n", "new.txt": "from web1\n"})

	e.submit("/pull srv/site site web1")
	want := "web1:" + remote + " → site: created 1, updated 1\nweb1: + new.txt\nweb1: ~ notes.txt\n"
	if text := e.paneText(1); text != want {
		t.Errorf("pull pane says %q, want %q", text, want)
	}
	if h := e.paneHeader(1); !strings.Contains(h, "pull srv/site site") || !strings.Contains(h, " done ") {
		t.Errorf("pull header %q", h)
	}
	if got := readFile(t, filepath.Join(e.dir, "site/new.txt")); got != "from web1\n" {
		t.Errorf("new.txt = %q", got)
	}

	// Both sides change one line: a conflict, listed and left in the file.
	writeFiles(t, remote, map[string]string{"notes.txt": "one\nREMOTE\nthree\nfour\n"})
	writeFiles(t, filepath.Join(e.dir, "site"), map[string]string{"notes.txt": "one\nLOCAL\nthree\nfour\n"})
	e.submit("/pull srv/site site web1")
	text := e.paneText(2)
	for _, w := range []string{
		"web1:" + remote + " → site: 1 conflict",
		"web1: conflict (content): notes.txt (conflict markers in the file)",
		"1 conflict in site: resolve them (markers or .theirs files), then push again",
	} {
		if !strings.Contains(text, w) {
			t.Errorf("conflict pane says %q, want %q", text, w)
		}
	}
	if h := e.paneHeader(2); !strings.Contains(h, "1 conflict") {
		t.Errorf("conflict header %q", h)
	}
	if got := readFile(t, filepath.Join(e.dir, "site/notes.txt")); !strings.Contains(got, "<<<<<<< local\nLOCAL\n=======\nREMOTE\n>>>>>>> web1\n") {
		t.Errorf("notes.txt = %q, want conflict markers", got)
	}
	e.wantMessage("pull srv/site site — 0 ok, 1 failed")
}

// TestSyncCancel: ctrl+c or /kill stops a push still connecting; its
// pane says cancelled, and the console is free.
func TestSyncCancel(t *testing.T) {
	for _, how := range []string{"ctrl+c", "/kill"} {
		t.Run(how, func(t *testing.T) {
			e, f := syncEnv(t)
			f.gate = make(chan struct{})
			e.typeText("/push site srv web1")
			e.press("enter")
			select {
			case <-f.dialing:
			case <-time.After(10 * time.Second):
				t.Fatal("the push never began connecting")
			}
			// The tree is read while the target is reached: once read, the
			// pane says what it waits for.
			deadline := time.Now().Add(10 * time.Second)
			for e.m.Update(frameMsg{}); !strings.Contains(e.screen(), "connecting to web1") && time.Now().Before(deadline); e.m.Update(frameMsg{}) {
				time.Sleep(10 * time.Millisecond) // polling the pane, bounded
			}
			if s := e.screen(); !strings.Contains(s, "connecting to web1") {
				t.Errorf("the pane does not say it is connecting:\n%s", s)
			}
			if how == "ctrl+c" {
				e.press("ctrl+c")
			} else {
				e.typeText(how)
				e.press("enter")
			}
			e.settle()
			if text := e.paneText(0); !strings.HasPrefix(text, "cancelled") {
				t.Errorf("pane says %q, want cancelled", text)
			}
			if h := e.paneHeader(0); !strings.Contains(h, "cancelled") {
				t.Errorf("header %q", h)
			}
			e.wantMessage("cancelled: 0 ok, 1 failed")
		})
	}
}

// TestLocalPath: a relative LOCAL_DIR starts where rex was started, ~/
// in the operator's home.
func TestLocalPath(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	e := newEnv(t, 80, 24, false)
	e.m.workDir.set("/work/dir")
	for _, tt := range []struct{ in, want string }{
		{"site", "/work/dir/site"},
		{"./site/../other", "/work/dir/other"},
		{"../up", "/work/up"},
		{"/abs/site/", "/abs/site"},
		{"~/site", filepath.Join(home, "site")},
		{"~", home},
		{"~other/site", "/work/dir/~other/site"},
	} {
		got, err := e.m.localPath(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("localPath(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestSecretPrompt: a connection that wants the sudo password turns the
// command line into a masked prompt; what is typed shows as dots only and
// goes to the asker alone; esc declines.
func TestSecretPrompt(t *testing.T) {
	e := newEnv(t, 100, 24, false)
	asker := NewSecretAsker()
	e.m.opts.Secrets = asker
	asker.attach(e.m.signal.mark)
	type answer struct {
		b   []byte
		err error
	}
	got := make(chan answer, 1)
	go func() {
		b, err := asker.Ask("sudo password on web1 (for root; asked once for this run): ")
		got <- answer{b, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for e.m.secret == nil && time.Now().Before(deadline) {
		e.m.Update(frameMsg{})
	}
	if e.m.secret == nil {
		t.Fatal("the question never reached the command line")
	}
	e.typeText("hunter2")
	e.m.Update(frameMsg{})
	scr := e.screen()
	if !strings.Contains(scr, "sudo password on web1 (for root; asked once for this run) ❯ •••••••") || strings.Contains(scr, "hunter2") {
		t.Fatalf("the masked prompt:\n%s", scr)
	}
	e.press("backspace")
	e.typeText("3")
	e.press("enter")
	if a := <-got; a.err != nil || string(a.b) != "hunter3" {
		t.Fatalf("answer %q %v", a.b, a.err)
	}
	if e.m.secret != nil || strings.Contains(e.screen(), "•••") {
		t.Fatal("the prompt stayed after the answer")
	}
	if e.m.input.Value() != "" {
		t.Errorf("the secret leaked into the command line: %q", e.m.input.Value())
	}
	// Esc declines.
	go func() {
		b, err := asker.Ask("sudo password on web2: ")
		got <- answer{b, err}
	}()
	for e.m.secret == nil && time.Now().Before(deadline) {
		e.m.Update(frameMsg{})
	}
	e.typeText("x")
	e.press("esc")
	if a := <-got; a.err == nil {
		t.Fatal("esc did not decline")
	}
}
