package cas

import "bytes"

// Conflict markers, as git writes them.
const (
	markerOurs   = "<<<<<<<"
	markerSep    = "======="
	markerTheirs = ">>>>>>>"
)

// hunk modes of a three-way merge.
const (
	hunkConflict  = 0
	hunkOurs      = 1 // only ours changed this region
	hunkTheirs    = 2 // only theirs changed it
	hunkIdentical = 4 // both made the same change
)

// mergeHunk is one changed region: base lines [i0, i0+chg0), ours
// [i1, i1+chg1), theirs [i2, i2+chg2).
type mergeHunk struct {
	mode             int
	i0, i1, i2       int
	chg0, chg1, chg2 int
}

// MergeText merges two descendants of base line by line, as
// `git merge-file -p -L ours -L base -L theirs` does with its defaults
// (Myers diff, "zealous-alnum" conflict refinement, merge style):
//
//   - a region changed on one side only takes that change;
//   - identical changes on both sides merge;
//   - changes that overlap, or touch (adjacent lines, or an insertion right
//     at the other side's change), conflict;
//   - conflicts are narrowed to the lines that actually differ, and
//     conflicts separated by at most three lines, or by lines with no
//     letters or digits, are joined into one.
//
// Conflicting regions are written between git-style markers:
//
//	<<<<<<< oursLabel
//	(ours)
//	=======
//	(theirs)
//	>>>>>>> theirsLabel
//
// conflicts is the number of such regions (git's exit status); 0 means a
// clean merge. Labels should be single lines.
func MergeText(base, ours, theirs []byte, oursLabel, theirsLabel string) (merged []byte, conflicts int) {
	b, o, t := splitLines(base), splitLines(ours), splitLines(theirs)
	script1 := diffLines(b, o)
	script2 := diffLines(b, t)
	switch {
	case len(script1) == 0:
		return bytes.Clone(theirs), 0
	case len(script2) == 0:
		return bytes.Clone(ours), 0
	}
	m := &merger{base: b, ours: o, theirs: t}
	m.collect(script1, script2)
	m.refine()
	m.simplify()
	return m.output(oursLabel, theirsLabel)
}

type merger struct {
	base, ours, theirs [][]byte
	hunks              []mergeHunk
}

// add appends a hunk, folding it into the previous one when they overlap
// or touch on either side (a fold of different modes is a conflict).
func (m *merger) add(h mergeHunk) {
	if n := len(m.hunks); n > 0 {
		last := &m.hunks[n-1]
		if h.i1 <= last.i1+last.chg1 || h.i2 <= last.i2+last.chg2 {
			if h.mode != last.mode {
				last.mode = hunkConflict
			}
			last.chg0 = h.i0 + h.chg0 - last.i0
			last.chg1 = h.i1 + h.chg1 - last.i1
			last.chg2 = h.i2 + h.chg2 - last.i2
			return
		}
	}
	m.hunks = append(m.hunks, h)
}

// collect walks both edit scripts (base→ours, base→theirs) in base order.
// A change that ends strictly before the other side's next change stands
// alone; otherwise the two overlap or touch and, unless identical, become
// one conflict spanning both.
func (m *merger) collect(x1, x2 []diffChange) {
	nOurs, nTheirs := len(m.ours)-len(m.base), len(m.theirs)-len(m.base)
	for len(x1) > 0 && len(x2) > 0 {
		a, b := x1[0], x2[0]
		if a.i1+a.chg1 < b.i1 {
			m.add(mergeHunk{mode: hunkOurs,
				i0: a.i1, chg0: a.chg1,
				i1: a.i2, chg1: a.chg2,
				i2: b.i2 - b.i1 + a.i1, chg2: a.chg1})
			x1 = x1[1:]
			continue
		}
		if b.i1+b.chg1 < a.i1 {
			m.add(mergeHunk{mode: hunkTheirs,
				i0: b.i1, chg0: b.chg1,
				i1: a.i2 - a.i1 + b.i1, chg1: b.chg1,
				i2: b.i2, chg2: b.chg2})
			x2 = x2[1:]
			continue
		}
		if a.i1 != b.i1 || a.chg1 != b.chg1 || a.chg2 != b.chg2 || !sameLines(m.ours[a.i2:a.i2+a.chg2], m.theirs[b.i2:b.i2+b.chg2]) {
			// Stretch both sides over the union of the two base ranges.
			off := a.i1 - b.i1
			ffo := off + a.chg1 - b.chg1
			i0, i1, i2 := a.i1, a.i2, b.i2
			if off > 0 {
				i0 -= off
				i1 -= off
			} else {
				i2 += off
			}
			chg0 := a.i1 + a.chg1 - i0
			chg1 := a.i2 + a.chg2 - i1
			chg2 := b.i2 + b.chg2 - i2
			if ffo < 0 {
				chg0 -= ffo
				chg1 -= ffo
			} else {
				chg2 += ffo
			}
			m.add(mergeHunk{mode: hunkConflict, i0: i0, chg0: chg0, i1: i1, chg1: chg1, i2: i2, chg2: chg2})
		}
		end1, end2 := a.i1+a.chg1, b.i1+b.chg1
		if end1 >= end2 {
			x2 = x2[1:]
		}
		if end2 >= end1 {
			x1 = x1[1:]
		}
	}
	for _, a := range x1 {
		m.add(mergeHunk{mode: hunkOurs,
			i0: a.i1, chg0: a.chg1,
			i1: a.i2, chg1: a.chg2,
			i2: a.i1 + nTheirs, chg2: a.chg1})
	}
	for _, b := range x2 {
		m.add(mergeHunk{mode: hunkTheirs,
			i0: b.i1, chg0: b.chg1,
			i1: b.i1 + nOurs, chg1: b.chg1,
			i2: b.i2, chg2: b.chg2})
	}
}

func sameLines(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// refine diffs ours against theirs inside each conflict: identical sides
// stop being a conflict, and lines both sides share split it into smaller
// conflicts.
func (m *merger) refine() {
	var out []mergeHunk
	for _, h := range m.hunks {
		if h.mode != hunkConflict || h.chg1 == 0 || h.chg2 == 0 {
			out = append(out, h)
			continue
		}
		script := diffLines(m.ours[h.i1:h.i1+h.chg1], m.theirs[h.i2:h.i2+h.chg2])
		if len(script) == 0 {
			h.mode = hunkIdentical
			out = append(out, h)
			continue
		}
		for _, x := range script {
			part := h
			part.i1, part.chg1 = h.i1+x.i1, x.chg1
			part.i2, part.chg2 = h.i2+x.i2, x.chg2
			out = append(out, part)
		}
	}
	m.hunks = out
}

// simplify joins neighbouring conflicts when what separates them is at
// most three lines, or lines without any ASCII letter or digit: one bigger
// conflict reads better than two with a sliver between.
func (m *merger) simplify() {
	if len(m.hunks) == 0 {
		return
	}
	out := []mergeHunk{m.hunks[0]}
	for _, next := range m.hunks[1:] {
		cur := &out[len(out)-1]
		begin, end := cur.i1+cur.chg1, next.i1
		if cur.mode != hunkConflict || next.mode != hunkConflict ||
			(end-begin > 3 && linesHaveAlnum(m.ours[begin:end])) {
			out = append(out, next)
			continue
		}
		cur.chg1 = next.i1 + next.chg1 - cur.i1
		cur.chg2 = next.i2 + next.chg2 - cur.i2
	}
	m.hunks = out
}

func linesHaveAlnum(lines [][]byte) bool {
	for _, l := range lines {
		for _, c := range l {
			if ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') {
				return true
			}
		}
	}
	return false
}

func (m *merger) output(oursLabel, theirsLabel string) ([]byte, int) {
	var out bytes.Buffer
	conflicts := 0
	i := 0 // next line of ours to copy
	for _, h := range m.hunks {
		switch h.mode {
		case hunkConflict:
			conflicts++
			copyLines(&out, m.ours[i:h.i1], false, false)
			cr := m.needsCR(h)
			marker(&out, markerOurs, oursLabel, cr)
			copyLines(&out, m.ours[h.i1:h.i1+h.chg1], cr, true)
			marker(&out, markerSep, "", cr)
			copyLines(&out, m.theirs[h.i2:h.i2+h.chg2], cr, true)
			marker(&out, markerTheirs, theirsLabel, cr)
		case hunkOurs:
			copyLines(&out, m.ours[i:h.i1+h.chg1], false, false)
		case hunkTheirs:
			copyLines(&out, m.ours[i:h.i1], false, false)
			copyLines(&out, m.theirs[h.i2:h.i2+h.chg2], false, false)
		default: // identical: ours' lines are copied with what follows
			continue
		}
		i = h.i1 + h.chg1
	}
	copyLines(&out, m.ours[i:], false, false)
	return out.Bytes(), conflicts
}

func marker(out *bytes.Buffer, m, label string, cr bool) {
	out.WriteString(m)
	if m != markerSep {
		out.WriteByte(' ')
		out.WriteString(label)
	}
	if cr {
		out.WriteByte('\r')
	}
	out.WriteByte('\n')
}

// copyLines writes lines; with addNL a last line lacking its newline gets
// one, so a marker never lands on the same line.
func copyLines(out *bytes.Buffer, lines [][]byte, cr, addNL bool) {
	for _, l := range lines {
		out.Write(l)
	}
	if addNL && len(lines) > 0 {
		if last := lines[len(lines)-1]; len(last) == 0 || last[len(last)-1] != '\n' {
			if cr {
				out.WriteByte('\r')
			}
			out.WriteByte('\n')
		}
	}
}

// needsCR tells whether a conflict's markers should end in CRLF: when the
// lines around it on both sides, and the base's first line, use CRLF.
func (m *merger) needsCR(h mergeHunk) bool {
	at := func(i int) int { return max(i-1, 0) }
	v := eolCRLF(m.ours, at(h.i1))
	if v != 0 {
		v = eolCRLF(m.theirs, at(h.i2))
	}
	if v != 0 {
		v = eolCRLF(m.base, 0)
	}
	return v > 0
}

// eolCRLF reports 1 if line i ends in CRLF, 0 if in LF, -1 if unknown.
func eolCRLF(lines [][]byte, i int) int {
	crlf := func(l []byte) int {
		if len(l) > 1 && l[len(l)-2] == '\r' {
			return 1
		}
		return 0
	}
	n := len(lines)
	if i < n-1 {
		return crlf(lines[i])
	}
	if n == 0 {
		return -1
	}
	if l := lines[i]; len(l) > 0 && l[len(l)-1] == '\n' {
		return crlf(l)
	}
	if i == 0 {
		return -1
	}
	return crlf(lines[i-1])
}
