package agentview

// The answer's Markdown is parsed with goldmark's parser (gfm.go) and its
// tree walked into styled lines here, rather than rendered with glamour:
// glamour's ansi package imports chroma and bluemonday, whose initialisers
// cost every rex process about 24 ms and 4 MB before main
// (GODEBUG=inittrace=1), for code highlighting and HTML sanitising the
// transcript does not need.

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// style ids: a span's style is an index into mdRenderer.styles, so runs of
// one style can be found by comparing ints.
const (
	sNone = iota
	sHeading
	sEmph
	sStrong
	sStrike
	sCode
	sCodeBlock
	sLink
	sURL
	sQuote
	sRule
	sCount
)

// mdRenderer turns one parsed document into lines.
type mdRenderer struct {
	src    []byte
	styles []lipgloss.Style
	// sgr is each style's opening and closing sequences: lipgloss's Render
	// per run was a quarter of the time a render takes.
	sgr [][2]string
	// combined caches the styles made by nesting (emphasis in a link).
	combined map[[2]int]int
	depth    int // of nested lists, for the bullet
	nesting  int // of quotes and lists, to bound the work of prefixing
	inCell   bool
}

// maxNesting is how deep quotes and lists are drawn as such; deeper ones
// are drawn flat, or input like 2000 '>' would prefix every line 2000
// times (and leave no width for the text).
const maxNesting = 16

// renderMarkdown renders Markdown text as lines no wider than width.
func renderMarkdown(p parser.Parser, st Styles, src string, width int) []string {
	width = max(width, 1)
	r := &mdRenderer{src: []byte(src), combined: map[[2]int]int{}}
	r.styles = make([]lipgloss.Style, sCount)
	if !st.Plain {
		r.styles[sHeading] = st.Heading
		r.styles[sEmph] = st.Emph
		r.styles[sStrong] = st.Strong
		r.styles[sStrike] = st.Strike
		r.styles[sCode] = st.Code
		r.styles[sCodeBlock] = st.CodeBlock
		r.styles[sLink] = st.Link
		r.styles[sURL] = st.Muted
		r.styles[sQuote] = st.Quote
		r.styles[sRule] = st.Rule
	}
	for _, s := range r.styles {
		r.sgr = append(r.sgr, sgrOf(s))
	}
	doc := p.Parse(text.NewReader(r.src))
	lines := r.blocks(doc, width, false)
	for i, l := range lines {
		// The walk keeps within width; this guards the promise against
		// graphemes that measure differently once joined.
		if len(l) > width && ansi.StringWidth(l) > width {
			lines[i] = trimRight(ansi.Truncate(l, width, ""))
		}
	}
	return lines
}

// trimRight removes the spaces a line ends with, also those before its
// closing SGR sequences.
func trimRight(l string) string {
	suffix := ""
	for {
		l = strings.TrimRight(l, " ")
		i := strings.LastIndex(l, "\x1b[")
		if i < 0 || strings.TrimRight(l[i+2:], "0123456789;:") != "m" {
			return l + suffix
		}
		l, suffix = l[:i], l[i:]+suffix
	}
}

// render styles s with style id.
func (r *mdRenderer) render(id int, s string) string {
	if id == sNone {
		return s
	}
	return r.sgr[id][0] + s + r.sgr[id][1]
}

// sgrOf returns the sequences st puts before and after a text.
func sgrOf(st lipgloss.Style) [2]string {
	out := st.Render("x")
	i := strings.IndexByte(out, 'x')
	if i < 0 {
		return [2]string{}
	}
	return [2]string{out[:i], out[i+1:]}
}

// nest returns the id of style inner inside outer.
func (r *mdRenderer) nest(outer, inner int) int {
	if outer == sNone || outer == inner {
		return inner
	}
	if inner == sNone {
		return outer
	}
	k := [2]int{outer, inner}
	if id, ok := r.combined[k]; ok {
		return id
	}
	r.styles = append(r.styles, r.styles[inner].Inherit(r.styles[outer]))
	r.sgr = append(r.sgr, sgrOf(r.styles[len(r.styles)-1]))
	id := len(r.styles) - 1
	r.combined[k] = id
	return id
}

// blocks renders a container's children, an empty line between them unless
// tight (a tight list item's text and its nested list).
func (r *mdRenderer) blocks(parent ast.Node, width int, tight bool) []string {
	var out []string
	for c := parent.FirstChild(); c != nil; c = c.NextSibling() {
		lines := r.block(c, width)
		if len(lines) == 0 {
			continue
		}
		if len(out) > 0 && !tight {
			out = append(out, "")
		}
		out = append(out, lines...)
	}
	return out
}

func (r *mdRenderer) block(n ast.Node, width int) []string {
	width = max(width, 1)
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		return r.wrap(r.inlines(n, sNone, nil), width)
	case *ast.Heading:
		spans := []span{{text: strings.Repeat("#", n.Level) + " ", id: sHeading}}
		return r.wrap(r.inlines(n, sHeading, spans), width)
	case *ast.ThematicBreak:
		return []string{r.render(sRule, strings.Repeat("─", width))}
	case *ast.FencedCodeBlock:
		return r.code(n.Lines(), width)
	case *ast.CodeBlock:
		return r.code(n.Lines(), width)
	case *ast.HTMLBlock:
		var out []string
		segs := n.Lines()
		for i := range segs.Len() {
			seg := segs.At(i)
			out = append(out, r.wrapText(string(seg.Value(r.src)), width)...)
		}
		if n.HasClosure() {
			out = append(out, r.wrapText(string(n.ClosureLine.Value(r.src)), width)...)
		}
		return out
	case *ast.Blockquote:
		if r.nesting >= maxNesting {
			return r.blocks(n, width, false)
		}
		r.nesting++
		defer func() { r.nesting-- }()
		bar := r.render(sQuote, "│")
		lines := r.blocks(n, width-2, false)
		for i, l := range lines {
			if l == "" {
				lines[i] = bar
			} else {
				lines[i] = bar + " " + l
			}
		}
		return lines
	case *ast.List:
		return r.list(n, width)
	case *east.Table:
		return r.table(n, width)
	}
	if n.Type() == ast.TypeInline || n.FirstChild() != nil && n.FirstChild().Type() == ast.TypeInline {
		return r.wrap(r.inlines(n, sNone, nil), width)
	}
	return r.blocks(n, width, false)
}

// code draws a code block verbatim, indented 2 and cut at the width.
func (r *mdRenderer) code(segs *text.Segments, width int) []string {
	var out []string
	for i := range segs.Len() {
		seg := segs.At(i)
		l := strings.TrimRight(expandTabs(string(seg.Value(r.src))), " \r\n")
		if l == "" {
			out = append(out, "")
			continue
		}
		l = clean(l)
		if textWidth(l) > width-2 {
			l = ansi.Truncate(l, max(width-2, 1), "…")
		}
		out = append(out, "  "+r.render(sCodeBlock, l))
	}
	// A fence's blank last lines would only add space.
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

func (r *mdRenderer) list(n *ast.List, width int) []string {
	if r.nesting >= maxNesting {
		var out []string
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			out = append(out, r.blocks(c, width, n.IsTight)...)
		}
		return out
	}
	r.nesting++
	defer func() { r.nesting-- }()
	bullet := [...]string{"•", "◦", "▪"}[r.depth%3]
	r.depth++
	defer func() { r.depth-- }()
	var markers []string
	indent := 0
	for c, i := n.FirstChild(), 0; c != nil; c, i = c.NextSibling(), i+1 {
		m := bullet
		if n.IsOrdered() {
			m = strconv.Itoa(n.Start+i) + string(n.Marker)
		}
		markers = append(markers, m)
		indent = max(indent, ansi.StringWidth(m)+1)
	}
	pad := strings.Repeat(" ", indent)
	var out []string
	for c, i := n.FirstChild(), 0; c != nil; c, i = c.NextSibling(), i+1 {
		lines := r.blocks(c, width-indent, n.IsTight)
		if len(out) > 0 && !n.IsTight {
			out = append(out, "")
		}
		if len(lines) == 0 {
			out = append(out, markers[i])
			continue
		}
		for j, l := range lines {
			switch {
			case j == 0:
				out = append(out, markers[i]+pad[ansi.StringWidth(markers[i]):]+l)
			case l == "":
				out = append(out, "")
			default:
				out = append(out, pad+l)
			}
		}
	}
	return out
}

// table draws a GFM table with aligned columns; rows wider than the width
// are cut.
func (r *mdRenderer) table(n *east.Table, width int) []string {
	type cell struct {
		s     string
		w     int
		align east.Alignment
	}
	var rows [][]cell
	var widths []int
	for row := n.FirstChild(); row != nil; row = row.NextSibling() {
		base := sNone
		if _, ok := row.(*east.TableHeader); ok {
			base = sStrong
		}
		var cells []cell
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			tc, ok := c.(*east.TableCell)
			if !ok {
				continue
			}
			r.inCell = true
			s, w := r.line(r.inlines(tc, base, nil))
			r.inCell = false
			cells = append(cells, cell{s, w, tc.Alignment})
			if i := len(cells) - 1; i >= len(widths) {
				widths = append(widths, w)
			} else {
				widths[i] = max(widths[i], w)
			}
		}
		rows = append(rows, cells)
	}
	var out []string
	for i, cells := range rows {
		var b strings.Builder
		for j, c := range cells {
			if j > 0 {
				b.WriteString(" │ ")
			}
			gap := widths[j] - c.w
			left := 0
			switch c.align {
			case east.AlignRight:
				left = gap
			case east.AlignCenter:
				left = gap / 2
			}
			b.WriteString(strings.Repeat(" ", left) + c.s + strings.Repeat(" ", gap-left))
		}
		out = append(out, cutLine(trimRight(b.String()), width))
		if i == 0 {
			var sep []string
			for _, w := range widths {
				sep = append(sep, strings.Repeat("─", w))
			}
			out = append(out, cutLine(strings.Join(sep, "─┼─"), width))
		}
	}
	return out
}

func cutLine(s string, width int) string {
	if ansi.StringWidth(s) > width {
		return ansi.Truncate(s, width, "…")
	}
	return s
}

// span is a run of inline text in one style; brk is a hard line break.
type span struct {
	text string
	id   int
	brk  bool
}

// inlines appends the spans of n's inline children in style id.
func (r *mdRenderer) inlines(n ast.Node, id int, out []span) []span {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			v := c.Segment.Value(r.src)
			if !c.IsRaw() {
				v = util.ResolveEntityNames(util.ResolveNumericReferences(util.UnescapePunctuations(v)))
			}
			out = append(out, span{text: string(v), id: id})
			switch {
			case c.HardLineBreak():
				out = append(out, span{brk: true})
			case c.SoftLineBreak():
				out = append(out, span{text: " ", id: id})
			}
		case *ast.String:
			out = append(out, span{text: string(c.Value), id: id})
		case *ast.CodeSpan:
			var b strings.Builder
			for t := c.FirstChild(); t != nil; t = t.NextSibling() {
				switch t := t.(type) {
				case *ast.Text:
					b.Write(t.Segment.Value(r.src))
				case *ast.String:
					b.Write(t.Value)
				}
			}
			code := strings.ReplaceAll(b.String(), "\n", " ")
			if r.inCell {
				// GFM: a pipe in a cell is escaped, even in code.
				code = strings.ReplaceAll(code, `\|`, "|")
			}
			out = append(out, span{text: code, id: r.nest(id, sCode)})
		case *ast.Emphasis:
			st := sEmph
			if c.Level >= 2 {
				st = sStrong
			}
			out = r.inlines(c, r.nest(id, st), out)
		case *east.Strikethrough:
			out = r.inlines(c, r.nest(id, sStrike), out)
		case *ast.Link:
			out = r.link(c, c.Destination, id, out)
		case *ast.Image:
			out = r.link(c, c.Destination, id, out)
		case *ast.AutoLink:
			out = append(out, span{text: string(c.Label(r.src)), id: r.nest(id, sLink)})
		case *ast.RawHTML:
			for i := range c.Segments.Len() {
				seg := c.Segments.At(i)
				out = append(out, span{text: strings.ReplaceAll(string(seg.Value(r.src)), "\n", " "), id: id})
			}
		default:
			out = r.inlines(c, id, out)
		}
	}
	return out
}

// link appends a link's text, then its URL muted unless the text is the URL.
func (r *mdRenderer) link(n ast.Node, dest []byte, id int, out []span) []span {
	start := len(out)
	out = r.inlines(n, r.nest(id, sLink), out)
	var label strings.Builder
	for _, s := range out[start:] {
		label.WriteString(s.text)
	}
	url := string(dest)
	if url != "" && url != label.String() {
		out = append(out, span{text: " (" + url + ")", id: r.nest(id, sURL)})
	}
	return out
}

// piece is a part of a word in one style.
type piece struct {
	text string
	id   int
}

// wrap lays spans out in lines of at most width cells, breaking at spaces
// and inside words longer than a line.
func (r *mdRenderer) wrap(spans []span, width int) []string {
	width = max(width, 1)
	var (
		out   []string
		line  []piece
		lineW int
		word  []piece
		wordW int
		gap   = -1 // the style of the space before word; -1: none
	)
	flushLine := func() {
		out = append(out, r.join(line))
		line, lineW = nil, 0
	}
	flushWord := func() {
		if wordW == 0 && len(word) == 0 {
			return
		}
		if lineW > 0 && lineW+1+wordW > width {
			flushLine()
		}
		if lineW > 0 {
			line = append(line, piece{" ", max(gap, 0)})
			lineW++
		}
		for _, p := range word {
			for p.text != "" {
				room := width - lineW
				// A cell takes at least a byte, so only the first bytes
				// need measuring: cutting a long word stays linear.
				chunk := p.text
				if len(chunk) > room*8 {
					chunk = p.text[:runeStart(p.text, room*8)]
				}
				head := chunk
				if len(chunk) > room {
					head = ansi.Truncate(chunk, room, "")
				}
				if head == p.text {
					line = append(line, p)
					lineW += textWidth(head)
					break
				}
				if head == chunk && head != "" {
					// All of it fit (zero-width characters): take it and go on.
					line = append(line, piece{head, p.id})
					lineW += textWidth(head)
					p.text = p.text[len(head):]
					continue
				}
				if head == "" {
					if lineW > 0 {
						flushLine()
						continue
					}
					// Not even one grapheme fits: give the line one rune.
					_, n := utf8.DecodeRuneInString(p.text)
					head = p.text[:n]
				}
				line = append(line, piece{head, p.id})
				p.text = p.text[len(head):]
				flushLine()
			}
		}
		word, wordW, gap = nil, 0, -1
	}
	for _, s := range spans {
		if s.brk {
			flushWord()
			flushLine()
			continue
		}
		t := clean(s.text)
		for t != "" {
			i := strings.IndexByte(t, ' ')
			if i < 0 {
				word = append(word, piece{t, s.id})
				wordW += textWidth(t)
				break
			}
			if i > 0 {
				word = append(word, piece{t[:i], s.id})
				wordW += textWidth(t[:i])
			}
			flushWord()
			gap = s.id
			t = strings.TrimLeft(t[i:], " ")
		}
	}
	flushWord()
	if len(line) > 0 {
		flushLine()
	}
	// A hard break at the end leaves nothing to show.
	for len(out) > 0 && ansi.Strip(out[len(out)-1]) == "" {
		out = out[:len(out)-1]
	}
	return out
}

// runeStart returns i or the start of the rune i falls in.
func runeStart(s string, i int) int {
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// wrapText wraps unstyled text (an HTML block's line, shown as it is).
func (r *mdRenderer) wrapText(s string, width int) []string {
	return r.wrap([]span{{text: strings.TrimRight(s, "\n")}}, width)
}

// line renders spans as one line (a table cell) and its width.
func (r *mdRenderer) line(spans []span) (string, int) {
	var ps []piece
	for _, s := range spans {
		t := " "
		if !s.brk {
			t = clean(s.text)
		}
		ps = append(ps, piece{t, s.id})
	}
	s := strings.TrimSpace(r.join(ps))
	return s, ansi.StringWidth(s)
}

// join renders pieces, one style run at a time.
func (r *mdRenderer) join(ps []piece) string {
	var b strings.Builder
	for i := 0; i < len(ps); {
		j := i + 1
		for j < len(ps) && ps[j].id == ps[i].id {
			j++
		}
		if ps[i].id == sNone {
			for _, p := range ps[i:j] {
				b.WriteString(p.text)
			}
		} else {
			var run strings.Builder
			for _, p := range ps[i:j] {
				run.WriteString(p.text)
			}
			b.WriteString(r.render(ps[i].id, run.String()))
		}
		i = j
	}
	return b.String()
}

// clean makes text from the model safe to draw: invalid UTF-8 and control
// characters (an ESC would start an escape sequence in the operator's
// terminal) become U+FFFD, tabs become spaces.
func clean(s string) string {
	ok := utf8.ValidString(s)
	for i := 0; ok && i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c == 0xc2 && i+1 < len(s) && s[i+1] < 0xa0 {
			ok = false
		}
	}
	if ok {
		return s
	}
	return strings.Map(func(c rune) rune {
		switch {
		case c == '\t':
			return ' '
		case c < 0x20, c >= 0x7f && c < 0xa0:
			return utf8.RuneError
		}
		return c
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// textWidth is ansi.StringWidth of text without escape sequences, quick
// for ASCII.
func textWidth(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return ansi.StringWidth(s)
		}
	}
	return len(s)
}

// expandTabs replaces tabs with spaces to the next stop of 4.
func expandTabs(s string) string {
	if !strings.Contains(s, "\t") {
		return s
	}
	var b strings.Builder
	col := 0
	for i, part := range strings.Split(s, "\t") {
		if i > 0 {
			n := 4 - col%4
			b.WriteString(strings.Repeat(" ", n))
			col += n
		}
		b.WriteString(part)
		col += textWidth(part)
	}
	return b.String()
}
