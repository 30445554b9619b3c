package dialog

import (
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// fit cuts plain text to w cells (ending in "…" when cut) and pads it to
// exactly w cells.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if sw := ansi.StringWidth(s); sw > w {
		s = ansi.Truncate(s, w, "…")
	}
	return s + strings.Repeat(" ", max(0, w-ansi.StringWidth(s)))
}

// wrap breaks plain text into lines of at most w cells at spaces (a word
// longer than a line is cut).
func wrap(s string, w int) []string {
	var out []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			for ansi.StringWidth(word) > w {
				if line != "" {
					out = append(out, line)
					line = ""
				}
				out = append(out, ansi.Truncate(word, w, ""))
				word = ansi.TruncateLeft(word, w, "")
			}
			switch {
			case line == "":
				line = word
			case ansi.StringWidth(line)+1+ansi.StringWidth(word) <= w:
				line += " " + word
			default:
				out = append(out, line)
				line = word
			}
		}
		out = append(out, line)
	}
	return out
}

// frame draws a rounded box of width w around body rows (each exactly
// w-4 cells, drawn with a cell of padding either side), a title in the top
// border and a footer in the bottom one.
func frame(st *Styles, w int, title, foot string, body []string) []string {
	inner := w - 2
	b := st.Border
	top := b.Render("╭─")
	used := 1
	if title != "" {
		t := " " + fit(title, min(ansi.StringWidth(title), inner-4)) + " "
		top += st.Title.Render(t)
		used += ansi.StringWidth(t)
	}
	top += b.Render(strings.Repeat("─", max(0, inner-used)) + "╮")
	out := []string{top}
	side := b.Render("│")
	for _, row := range body {
		out = append(out, side+" "+row+" "+side)
	}
	bottom := b.Render("╰─")
	used = 1
	if foot != "" {
		f := " " + fit(foot, min(ansi.StringWidth(foot), inner-4)) + " "
		bottom += st.Muted.Render(f)
		used += ansi.StringWidth(f)
	}
	bottom += b.Render(strings.Repeat("─", max(0, inner-used)) + "╯")
	return append(out, bottom)
}

// center pads styled s (sw cells) to w cells, centred.
func center(s string, sw, w int) string {
	left := max(0, (w-sw)/2)
	return strings.Repeat(" ", left) + s + strings.Repeat(" ", max(0, w-sw-left))
}

// styled renders plain text cut and padded to w cells in style st.
func styled(st lipgloss.Style, s string, w int) string { return st.Render(fit(s, w)) }
