package agentview

// GFM tables and strikethrough for the parser, written here rather than
// taken from goldmark/extension: that package's initialisers compile the
// regular expressions of all its extensions (linkify's among them), 2 ms
// and 260 kB of every rex process's start (GODEBUG=inittrace=1). The nodes
// are goldmark/extension/ast's, which costs nothing at init.

import (
	"bytes"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// newMarkdownParser returns a CommonMark parser with GFM tables and
// strikethrough (no linkify: bare URLs read well enough as text).
func newMarkdownParser() parser.Parser {
	return parser.NewParser(
		parser.WithBlockParsers(parser.DefaultBlockParsers()...),
		parser.WithInlineParsers(append(parser.DefaultInlineParsers(), util.Prioritized(strikeParser{}, 500))...),
		parser.WithParagraphTransformers(append(parser.DefaultParagraphTransformers(), util.Prioritized(tableTransformer{}, 200))...),
	)
}

// strikeParser parses ~~text~~ (or ~text~) as east.Strikethrough.
type strikeParser struct{}

func (strikeParser) Trigger() []byte { return []byte{'~'} }

func (strikeParser) Parse(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	before := block.PrecendingCharacter()
	line, seg := block.PeekLine()
	d := parser.ScanDelimiter(line, before, 1, strikeDelimiter{})
	if d == nil || d.OriginalLength > 2 || before == '~' {
		return nil
	}
	d.Segment = seg.WithStop(seg.Start + d.OriginalLength)
	block.Advance(d.OriginalLength)
	pc.PushDelimiter(d)
	return d
}

func (strikeParser) CloseBlock(parent ast.Node, pc parser.Context) {}

type strikeDelimiter struct{}

func (strikeDelimiter) IsDelimiter(b byte) bool { return b == '~' }

func (strikeDelimiter) CanOpenCloser(opener, closer *parser.Delimiter) bool {
	return opener.Char == closer.Char
}

func (strikeDelimiter) OnMatch(consumes int) ast.Node { return east.NewStrikethrough() }

// tableTransformer turns a paragraph whose line after the first is a
// delimiter row (|---|:-:|) into an east.Table from that line's previous
// one on; the lines before stay a paragraph. Cells are inline-parsed
// afterwards like any block's lines.
type tableTransformer struct{}

func (tableTransformer) Transform(node *ast.Paragraph, reader text.Reader, pc parser.Context) {
	src := reader.Source()
	lines := node.Lines()
	for i := 1; i < lines.Len(); i++ {
		seg := lines.At(i)
		aligns := delimiterRow(seg.Value(src))
		if aligns == nil {
			continue
		}
		header := tableRow(src, lines.At(i-1), aligns, true)
		if header.ChildCount() != len(aligns) {
			return
		}
		table := east.NewTable()
		table.Alignments = aligns
		table.AppendChild(table, east.NewTableHeader(header))
		for j := i + 1; j < lines.Len(); j++ {
			table.AppendChild(table, tableRow(src, lines.At(j), aligns, false))
		}
		parent := node.Parent()
		parent.InsertAfter(parent, node, table)
		lines.SetSliced(0, i-1)
		if lines.Len() == 0 {
			parent.RemoveChild(parent, node)
		} else if last := lines.At(lines.Len() - 1); last.Stop > last.Start && src[last.Stop-1] == '\n' {
			// The paragraph's text now ends on what was a line break.
			last.Stop--
			lines.Set(lines.Len()-1, last)
		}
		return
	}
}

// delimiterRow returns the alignments of a delimiter row, nil if line is
// not one.
func delimiterRow(line []byte) []east.Alignment {
	if w, _ := util.IndentWidth(line, 0); w > 3 || !bytes.ContainsAny(line, "-") {
		return nil
	}
	line = bytes.TrimSpace(line)
	line = bytes.TrimPrefix(line, []byte("|"))
	line = bytes.TrimSuffix(line, []byte("|"))
	var aligns []east.Alignment
	for _, col := range bytes.Split(line, []byte("|")) {
		col = bytes.TrimSpace(col)
		left, right := bytes.HasPrefix(col, []byte(":")), bytes.HasSuffix(col, []byte(":"))
		dashes := bytes.TrimSuffix(bytes.TrimPrefix(col, []byte(":")), []byte(":"))
		if len(dashes) == 0 || len(bytes.Trim(dashes, "-")) != 0 {
			return nil
		}
		a := east.AlignNone
		switch {
		case left && right:
			a = east.AlignCenter
		case left:
			a = east.AlignLeft
		case right:
			a = east.AlignRight
		}
		aligns = append(aligns, a)
	}
	return aligns
}

// tableRow splits a row at its unescaped pipes into cells; a body row has
// as many cells as the header, a header as many as it has.
func tableRow(src []byte, seg text.Segment, aligns []east.Alignment, header bool) *east.TableRow {
	seg = seg.TrimLeftSpace(src)
	seg = seg.TrimRightSpace(src)
	line := seg.Value(src)
	pos, limit := 0, len(line)
	if limit > 0 && line[0] == '|' {
		pos++
	}
	if limit > pos && line[limit-1] == '|' && (limit < 2 || line[limit-2] != '\\') {
		limit--
	}
	row := east.NewTableRow(aligns)
	for i := 0; pos < limit && (header || i < len(aligns)); i++ {
		end := pos
		for end < limit && !(line[end] == '|' && (end == 0 || line[end-1] != '\\')) {
			end++
		}
		cell := east.NewTableCell()
		if i < len(aligns) {
			cell.Alignment = aligns[i]
		}
		cs := text.NewSegment(seg.Start+pos, seg.Start+end)
		cs = cs.TrimLeftSpace(src)
		cell.Lines().Append(cs.TrimRightSpace(src))
		row.AppendChild(row, cell)
		pos = end + 1
	}
	for i := row.ChildCount(); !header && i < len(aligns); i++ {
		row.AppendChild(row, east.NewTableCell())
	}
	return row
}
