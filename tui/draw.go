package tui

import (
	"strings"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/rexconsole/rex/tui/engine"
)

// Views are built as slices of lines, each exactly as wide as its box,
// and joined only at the end: cheaper and more predictable than measuring
// styled strings again at every level.

// spaces returns n spaces.
func spaces(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat(" ", n)
}

// fit cuts plain text to w cells (ending in "…" when cut) and pads it to
// exactly w cells.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	sw := ansi.StringWidth(s)
	if sw > w {
		s = ansi.Truncate(s, w, "…")
		sw = ansi.StringWidth(s)
	}
	return s + spaces(w-sw)
}

// cut cuts plain text to at most w cells, ending in "…" when cut.
func cut(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, "…")
}

// styled renders plain text s, cut and padded to w cells, in style st.
func styled(st lipgloss.Style, s string, w int) string {
	return st.Render(fit(s, w))
}

// blankLines returns h lines of w spaces.
func blankLines(w, h int) []string {
	line := spaces(w)
	out := make([]string, h)
	for i := range out {
		out[i] = line
	}
	return out
}

// wrapText breaks plain text into lines of at most w cells, at spaces
// (never inside a word like --gather unless the word is longer than a
// line).
func wrapText(s string, w int) []string {
	if w <= 0 {
		return nil
	}
	var out []string
	for _, para := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		for i, r := range wrapCells(para, ansi.StringWidth(para), w) {
			l := strings.TrimRight(r.text, " ")
			if i > 0 {
				l = strings.TrimLeft(l, " ") // the space a break fell on
			}
			out = append(out, l)
		}
	}
	return out
}

// fmtDuration writes a duration short enough for a pane header.
func fmtDuration(d time.Duration) string { return engine.FmtDuration(d) }

// box draws a border around body lines (each exactly w-2 cells wide):
// left and right header segments in the top border, a footer segment in
// the bottom one. Segments are already styled; their widths are given.
type boxSeg struct {
	text  string
	width int
}

func drawBox(border lipgloss.Style, w, h int, left, right, foot boxSeg, body []string) []string {
	out := make([]string, 0, h)
	inner := w - 2
	// Top: ╭─ left ─────── right ─╮
	fill := inner - left.width - right.width - 1
	if right.width > 0 {
		fill--
	}
	if fill < 0 {
		// No room for the right segment.
		right = boxSeg{}
		fill = inner - left.width - 1
	}
	if fill < 0 {
		left = boxSeg{}
		fill = inner - 1
	}
	top := border.Render("╭─") + left.text + border.Render(strings.Repeat("─", fill))
	if right.width > 0 {
		top += right.text + border.Render("─")
	}
	top += border.Render("╮")
	out = append(out, top)
	side := border.Render("│")
	for i := 0; i < h-2; i++ {
		line := spaces(inner)
		if i < len(body) {
			line = body[i]
		}
		out = append(out, side+line+side)
	}
	bfill := inner - foot.width - 1
	if bfill < 0 {
		foot = boxSeg{}
		bfill = inner - 1
	}
	out = append(out, border.Render("╰─")+foot.text+border.Render(strings.Repeat("─", bfill)+"╯"))
	return out
}

// seg styles plain text as a header segment with a space either side.
func seg(st lipgloss.Style, s string) boxSeg {
	if s == "" {
		return boxSeg{}
	}
	return boxSeg{text: st.Render(" " + s + " "), width: ansi.StringWidth(s) + 2}
}

// joinSegs puts segments side by side.
func joinSegs(segs ...boxSeg) boxSeg {
	var b boxSeg
	for _, s := range segs {
		b.text += s.text
		b.width += s.width
	}
	return b
}
