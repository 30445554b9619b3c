package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/mcptest"
	"github.com/rexconsole/rex/internal/sshtest"
)

// docBlock is one fenced block of a document.
type docBlock struct {
	line int    // where it starts
	info string // the info string: "console", "sh file=PATH", ...
	body string
}

// fencedBlocks returns the fenced blocks of a Markdown file.
func fencedBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []docBlock
	var cur *docBlock
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &docBlock{line: n, info: strings.TrimSpace(strings.TrimPrefix(line, "```"))}
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.body += line + "\n"
		}
	}
	if cur != nil {
		t.Fatalf("%s: the block at line %d is not closed", path, cur.line)
	}
	return out
}

// docLineRE turns an expected output line into a pattern: runs of spaces
// are any run of spaces, … is anything.
func docLineRE(want string) *regexp.Regexp {
	want = strings.Join(strings.Fields(want), " ")
	parts := strings.Split(want, "…")
	for i, p := range parts {
		p = regexp.QuoteMeta(p)
		parts[i] = strings.ReplaceAll(p, " ", " +")
	}
	return regexp.MustCompile(`^` + strings.Join(parts, ".*") + `$`)
}

// TestDocsTools runs every example of docs/tools.md, top to bottom: each
// block with file=PATH is written (relative to the project, or ~/ to the
// home), and each console block's $ lines run in the project through sh,
// with rex on PATH; the lines under a command must each appear in its
// output (stdout and stderr), and it must exit 0 unless the line ends in
// "# exit N". Any other block fails the test: every example is run.
func TestDocsTools(t *testing.T) {
	// Two loopback hosts as web1 and web2, in a group web.
	env := newRexEnv(t, rexBin)
	key := sshtest.NewKey(t, "ed25519")
	hosts := sshtest.Fleet(t, 2, sshtest.Options{Authorized: []*sshtest.Key{key}})
	known := filepath.Join(env.home, ".ssh", "known_hosts")
	os.MkdirAll(filepath.Dir(known), 0o700)
	sshtest.WriteKnownHosts(t, known, false, hosts...)
	devs := map[string]any{}
	for i, h := range hosts {
		host, port, _ := strings.Cut(h.Addr, ":")
		p, _ := strconv.Atoi(port)
		devs[fmt.Sprintf("web%d", i+1)] = map[string]any{"host": h.User + "@" + host, "port": p, "ssh_key": key.Path}
		// The MCP example's server, where the example says it is.
		bin := filepath.Join(h.Home, "bin")
		os.MkdirAll(bin, 0o755)
		if b, err := os.ReadFile(mcptest.Binary(t)); err != nil || os.WriteFile(filepath.Join(bin, "demo-mcp-server"), b, 0o755) != nil {
			t.Fatal("install the demo MCP server")
		}
	}
	reg, _ := json.Marshal(map[string]any{"devices": devs, "groups": map[string][]string{"web": {"web1", "web2"}}})
	os.MkdirAll(filepath.Dir(env.registry()), 0o700)
	if err := os.WriteFile(env.registry(), reg, 0o600); err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(env.home, "project")
	os.MkdirAll(project, 0o755)
	shellEnv := append(append([]string(nil), env.env...), "PATH="+filepath.Dir(rexBin)+":"+os.Getenv("PATH"),
		"REX_SECRETS_BACKEND=file", "REX_SECRETS_PASSPHRASE=the docs' passphrase")

	doc := filepath.Join("..", "..", "docs", "tools.md")
	blocks := fencedBlocks(t, doc)
	if len(blocks) < 20 {
		t.Fatalf("docs/tools.md has %d examples; the test reads it wrong", len(blocks))
	}
	fileRE := regexp.MustCompile(`^\w+ file=(\S+)$`)
	exitRE := regexp.MustCompile(`#\s*exit (\d+)\s*$`)
	for _, b := range blocks {
		where := fmt.Sprintf("docs/tools.md:%d", b.line)
		if m := fileRE.FindStringSubmatch(b.info); m != nil {
			path := filepath.Join(project, m[1])
			if rest, ok := strings.CutPrefix(m[1], "~/"); ok {
				path = filepath.Join(env.home, rest)
			}
			mode := os.FileMode(0o644)
			if strings.HasPrefix(b.body, "#!") {
				mode = 0o755
			}
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.WriteFile(path, []byte(b.body), mode); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			continue
		}
		if b.info != "console" {
			t.Errorf("%s: a %q block is neither a file (file=PATH) nor a console session; every example must run", where, b.info)
			continue
		}
		lines := strings.Split(strings.TrimRight(b.body, "\n"), "\n")
		for i := 0; i < len(lines); i++ {
			cmdLine, ok := strings.CutPrefix(lines[i], "$ ")
			if !ok {
				t.Fatalf("%s: console blocks start with a $ line, not %q", where, lines[i])
			}
			var want []string
			for i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "$ ") {
				i++
				want = append(want, lines[i])
			}
			wantCode := 0
			if m := exitRE.FindStringSubmatch(cmdLine); m != nil {
				wantCode, _ = strconv.Atoi(m[1])
			}
			var out, errOut bytes.Buffer
			cmd := exec.Command("sh", "-c", cmdLine)
			cmd.Dir, cmd.Env = project, shellEnv
			cmd.Stdin = strings.NewReader("")
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			got := out.String() + errOut.String()
			if code != wantCode {
				t.Errorf("%s: %s: exit %d, want %d\n%s", where, cmdLine, code, wantCode, got)
				continue
			}
			gotLines := strings.Split(got, "\n")
			for i, l := range gotLines {
				gotLines[i] = strings.Join(strings.Fields(l), " ")
			}
			for _, w := range want {
				re := docLineRE(w)
				found := false
				for _, l := range gotLines {
					if re.MatchString(l) {
						found = true
						break
					}
				}
				if !found {
					t.Errorf("%s: %s: no line like %q in:\n%s", where, cmdLine, w, got)
				}
			}
		}
	}
}

// TestReadmeTools: every tool the README's examples name exists.
func TestReadmeTools(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	env := newRexEnv(t, rexBin)
	ids := regexp.MustCompile(`rex tool (?:run|show) (rex/[a-z/]+)`).FindAllStringSubmatch(string(b), -1)
	if len(ids) < 3 {
		t.Fatalf("the README names %d tools; the test reads it wrong", len(ids))
	}
	for _, m := range ids {
		if out, errOut, code := env.run("tool", "show", m[1]); code != 0 || !strings.Contains(out, "valid") {
			t.Errorf("README names %s, which rex does not have: %d %s%s", m[1], code, out, errOut)
		}
	}
}
