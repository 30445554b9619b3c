package agentview

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/rexconsole/rex/internal/agent"
)

// md renders src at width and returns its lines without styles.
func md(t testing.TB, st Styles, src string, width int) []string {
	t.Helper()
	lines := renderMarkdown(newMarkdownParser(), st, src, width)
	checkLines(t, src, lines, width)
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = ansi.Strip(l)
	}
	return out
}

// checkLines fails on a line wider than width, with trailing spaces, or
// with a control character that is not the renderer's own SGR.
func checkLines(t testing.TB, src string, lines []string, width int) {
	t.Helper()
	for _, l := range lines {
		if w := ansi.StringWidth(l); w > width {
			t.Fatalf("a line of width %d at %d: %q (from %q)", w, width, l, src)
		}
		p := ansi.Strip(l)
		if strings.TrimRight(p, " ") != p {
			t.Fatalf("a line ends in spaces: %q (from %q)", p, src)
		}
		for _, c := range p {
			if c < 0x20 || c >= 0x7f && c < 0xa0 {
				t.Fatalf("control character %U drawn: %q (from %q)", c, p, src)
			}
		}
	}
}

func TestMarkdown(t *testing.T) {
	for _, tc := range []struct {
		name  string
		src   string
		width int
		want  string
	}{
		{"paragraph soft breaks joined", "one\ntwo\nthree", 40, "one two three"},
		{"hard breaks kept", "one  \ntwo\\\nthree", 40, "one\ntwo\nthree"},
		{"paragraphs", "one\n\ntwo", 40, "one\n\ntwo"},
		{"wrap by words", "the quick brown fox jumps over the lazy dog", 15, "the quick brown\nfox jumps over\nthe lazy dog"},
		{"long word cut", "abcdefghijklmnopqrstuvwxyz", 10, "abcdefghij\nklmnopqrst\nuvwxyz"},
		{"wide characters", "日本語のテキスト", 7, "日本語\nのテキ\nスト"},
		{"headings", "# One\n\n## Two\n\n###### Six", 40, "# One\n\n## Two\n\n###### Six"},
		{"setext heading", "Title\n=====", 40, "# Title"},
		{"emphasis and strong", "a *b* **c** _d_ __e__ ***f***", 40, "a b c d e f"},
		{"strikethrough", "~~gone~~ kept", 40, "gone kept"},
		{"inline code", "run `uname -r` now", 40, "run uname -r now"},
		{"inline code keeps markup", "`**x**`", 40, "**x**"},
		{"escapes and entities", `\*not\* &amp; &lt;b&gt; &#169;`, 40, "*not* & <b> ©"},
		{"fenced code verbatim", "```go\nfunc main() {\n\tx  :=  1\n}\n```", 40, "  func main() {\n      x  :=  1\n  }"},
		{"fenced code cut not wrapped", "```\n0123456789abcdefghij\n```", 12, "  012345678…"},
		{"indented code", "    a\n      b", 40, "  a\n    b"},
		{"open fence while streaming", "text\n\n```sh\nls -l", 40, "text\n\n  ls -l"},
		{"lone strong while streaming", "this is **bold", 40, "this is **bold"},
		{"bullets", "- a\n- b\n* c", 40, "• a\n• b\n\n• c"},
		{"nested bullets", "- a\n  - b\n    - c\n- d", 40, "• a\n  ◦ b\n    ▪ c\n• d"},
		{"hanging indent", "- one two three four five six", 12, "• one two\n  three four\n  five six"},
		{"ordered", "1. a\n2. b\n3. c", 40, "1. a\n2. b\n3. c"},
		{"ordered start and width", "9. a\n10. b", 40, "9.  a\n10. b"},
		{"ordered paren", "3) a\n4) b", 40, "3) a\n4) b"},
		{"loose list", "- a\n\n- b", 40, "• a\n\n• b"},
		{"list item paragraphs", "1. a\n\n   more\n2. b", 40, "1. a\n\n   more\n\n2. b"},
		{"list item code", "- a\n  ```\n  x\n  ```", 40, "• a\n    x"},
		{"empty item", "- \n- b", 40, "•\n• b"},
		{"quote", "> one\n> two\n>\n> three", 40, "│ one two\n│\n│ three"},
		{"quote wraps", "> aaa bbb ccc", 6, "│ aaa\n│ bbb\n│ ccc"},
		{"nested quote", "> a\n>> b", 40, "│ a\n│\n│ │ b"},
		{"quotes deeper than 16 drawn flat", strings.Repeat(">", 20) + " x", 80, strings.Repeat("│ ", 16) + "x"},
		{"lists deeper than 16 drawn flat", strings.Repeat("- ", 18) + "x", 80, "• ◦ ▪ • ◦ ▪ • ◦ ▪ • ◦ ▪ • ◦ ▪ • x"},
		{"link", "see [the docs](https://x.example/d)", 80, "see the docs (https://x.example/d)"},
		{"link text is url", "[https://x.example](https://x.example)", 80, "https://x.example"},
		{"autolink", "<https://x.example/a>", 80, "https://x.example/a"},
		{"email autolink", "<ops@example.com>", 80, "ops@example.com"},
		{"bare url stays text", "https://x.example/a", 80, "https://x.example/a"},
		{"image", "![a graph](g.png)", 80, "a graph (g.png)"},
		{"thematic break", "a\n\n---\n\nb", 5, "a\n\n─────\n\nb"},
		{"table", "| a | b |\n|---|--:|\n| 1 | 22 |\n| 333 | 4 |", 40, "a   │  b\n────┼───\n1   │ 22\n333 │  4"},
		{"table center", "| x |\n|:-:|\n| abc |", 40, " x\n───\nabc"},
		{"table cut", "| aaaaaaaaaa | bbbbbbbbbb |\n|---|---|\n| 1 | 2 |", 12, "aaaaaaaaaa …\n───────────…\n1          …"},
		{"table after paragraph lines", "rows:\n| a | b |\n|---|---|\n| 1 | 2 |", 40, "rows:\n\na │ b\n──┼──\n1 │ 2"},
		{"table without outer pipes", "a | b\n--|:-\n1 | 2", 40, "a │ b\n──┼──\n1 │ 2"},
		{"table short and long rows", "| a | b |\n|---|---|\n| 1 |\n| 1 | 2 | 3 |", 40, "a │ b\n──┼──\n1 │\n1 │ 2"},
		{"table escaped pipes", "| a |\n|---|\n| x \\| y |\n| `p\\|q` |", 40, "a\n─────\nx | y\np|q"},
		{"table inline markup", "| **a** | [l](u) |\n|---|---|\n| ~~s~~ | `c` |", 40, "a │ l (u)\n──┼──────\ns │ c"},
		{"not a table: header and delimiter differ", "| a | b |\n|---|\n| 1 | 2 |", 40, "| a | b | |---| | 1 | 2 |"},
		{"single tilde strike", "~a~ and ~~~b~~~", 40, "a and ~~~b~~~"},
		{"html block as text", "<div>\n<b>x</b>\n</div>", 40, "<div>\n<b>x</b>\n</div>"},
		{"inline html as text", "a <b>b</b> c", 40, "a <b>b</b> c"},
		{"escape from the model", "a \x1b[31mred\x1b[0m b", 40, "a \uFFFD[31mred\uFFFD[0m b"},
		{"escape from an entity", "a &#27;[2J b &#155;", 40, "a \uFFFD[2J b \uFFFD"},
		{"escape in code", "```\n\x1b]0;x\x07\n```", 40, "  \uFFFD]0;x\uFFFD"},
		{"invalid utf-8", "a \xff b", 40, "a \uFFFD b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(md(t, Styles{}, tc.src, tc.width), "\n")
			if got != tc.want {
				t.Errorf("%q at %d:\n%s\nwant:\n%s", tc.src, tc.width, got, tc.want)
			}
		})
	}
}

func TestMarkdownStyles(t *testing.T) {
	const (
		bold      = "1"
		faint     = "2"
		italic    = "3"
		underline = "4"
		reverse   = "7"
		strike    = "9"
	)
	b := lipgloss.NewStyle().Bold(true)
	for _, tc := range []struct {
		name string
		st   Styles
		src  string
		text string // the styled text
		sgr  string // an SGR parameter
	}{
		{"heading", Styles{Heading: b}, "## Title", "## Title", bold},
		{"emphasis", Styles{Emph: lipgloss.NewStyle().Italic(true)}, "a *b* c", "b", italic},
		{"strong", Styles{Strong: b}, "a **b** c", "b", bold},
		{"strike", Styles{Strike: lipgloss.NewStyle().Strikethrough(true)}, "a ~~b~~ c", "b", strike},
		{"inline code", Styles{Code: lipgloss.NewStyle().Reverse(true)}, "a `b` c", "b", reverse},
		{"code block", Styles{CodeBlock: lipgloss.NewStyle().Faint(true)}, "```\nb\n```", "b", faint},
		{"link", Styles{Link: lipgloss.NewStyle().Underline(true)}, "[b](u)", "b", underline},
		{"url", Styles{Muted: lipgloss.NewStyle().Faint(true)}, "[b](u)", " (u)", faint},
		{"quote", Styles{Quote: lipgloss.NewStyle().Faint(true)}, "> a", "│", faint},
		{"rule", Styles{Rule: lipgloss.NewStyle().Faint(true)}, "---", "──────────", faint},
		{"strong in a link", Styles{Link: lipgloss.NewStyle().Underline(true), Strong: b}, "[**b**](u)", "b", bold},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(renderMarkdown(newMarkdownParser(), tc.st, tc.src, 10), "\n")
			if !styledWith(got, tc.text, tc.sgr) {
				t.Errorf("%q: %q does not carry SGR %s: %q", tc.src, tc.text, tc.sgr, got)
			}
			if tc.name == "strong in a link" && !styledWith(got, tc.text, underline) {
				t.Errorf("strong in a link lost the link's underline: %q", got)
			}
			tc.st.Plain = true
			if got := strings.Join(renderMarkdown(newMarkdownParser(), tc.st, tc.src, 10), "\n"); strings.Contains(got, "\x1b") {
				t.Errorf("Plain %q: %q", tc.src, got)
			}
		})
	}
}

// styledWith says whether an SGR sequence with parameter p comes right
// before text in s.
func styledWith(s, text, p string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], "\x1b[")
		if j < 0 {
			return false
		}
		i += j + 2
		k := strings.IndexByte(s[i:], 'm')
		if k < 0 {
			return false
		}
		params := strings.FieldsFunc(s[i:i+k], func(r rune) bool { return r == ';' })
		i += k + 1
		if slices.Contains(params, p) && strings.HasPrefix(ansi.Strip(s[i:]), text) {
			return true
		}
	}
}

func TestMarkdownGolden(t *testing.T) {
	src, err := os.ReadFile("testdata/answer.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []int{40, 80} {
		t.Run(strconv.Itoa(w), func(t *testing.T) {
			golden.RequireEqual(t, strings.Join(md(t, Styles{}, string(src), w), "\n")+"\n")
		})
	}
}

// TestMarkdownStreams renders every prefix of an answer, as it arrives.
func TestMarkdownStreams(t *testing.T) {
	src, err := os.ReadFile("testdata/answer.md")
	if err != nil {
		t.Fatal(err)
	}
	v := New(Styles{Strong: lipgloss.NewStyle().Bold(true)})
	for i := 0; i < len(src); i += 7 {
		v.Apply(agent.Event{Type: agent.EventText, Text: string(src[i:min(i+7, len(src))])})
		checkLines(t, string(src[:i]), v.Lines(33), 33)
	}
	if got := strings.Join(md(t, Styles{}, string(src), 33), "\n"); !strings.Contains(plain(v.Lines(33)), got) {
		t.Errorf("streamed and whole renderings differ:\n%s\nwant:\n%s", plain(v.Lines(33)), got)
	}
}

func FuzzMarkdown(f *testing.F) {
	src, err := os.ReadFile("testdata/answer.md")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		string(src), "", "# h\n\n- a\n  - b\n\n> q\n>> r\n\n```\ncode\n", "| a | b |\n|:-:|--:|\n| 1 | 2 |",
		"a \x1b[31mb\x1b[0m &#27; &#155; \xff\t\r\n\x00", "1. a\n   1. b\n      1. c", "日本語 ![x](y) <a@b.c> <http://x>",
		"x\n| a \\| b | `c\\|` |\n|:-|-:|\n| 1 |\n| 1 | 2 | 3 |\\", "~~a~b~~~ ~~~", strings.Repeat(">", 200) + " deep", strings.Repeat("- ", 100) + "deep",
	} {
		f.Add(s, 40)
	}
	p := newMarkdownParser()
	f.Fuzz(func(t *testing.T, src string, width int) {
		width = 10 + (width%111+111)%111
		checkLines(t, src, renderMarkdown(p, Styles{Strong: lipgloss.NewStyle().Bold(true), Link: lipgloss.NewStyle().Underline(true)}, src, width), width)
	})
}

func BenchmarkMarkdown(b *testing.B) {
	src, err := os.ReadFile("testdata/answer.md")
	if err != nil {
		b.Fatal(err)
	}
	st := Styles{Heading: lipgloss.NewStyle().Bold(true), Strong: lipgloss.NewStyle().Bold(true),
		Code: lipgloss.NewStyle().Reverse(true), Link: lipgloss.NewStyle().Underline(true)}
	p := newMarkdownParser()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		renderMarkdown(p, st, string(src), 80)
	}
}
