package cas

import "math"

// This file is a line diff that reproduces the choices of git's xdiff
// (Myers' O(ND) algorithm with its divide-and-conquer split, the same
// pre-filtering of lines, cost heuristics and change compaction), so that
// the three-way merge built on it reports what `git merge-file` reports.
// Matching git matters more here than elegance: where two diffs are equally
// short, git's choice decides which edits look adjacent.

// Tuning constants, as in xdiff.
const (
	diffMaxCostMin   = 256  // minimum edit cost before giving up on optimality
	diffHeurMinCost  = 256  // edit cost that enables the snake heuristic
	diffSnakeCnt     = 20   // a "good snake" is longer than this
	diffKHeur        = 4    // heuristic factor
	diffMaxEqLimit   = 1024 // cap for the "too many matches" threshold
	diffSimscanWin   = 100  // window for the multi-match scan
	diffKeepRunRatio = 4    // XDL_KPDIS_RUN
)

// diffChange is one hunk: lines [i1, i1+chg1) of the first sequence are
// replaced by lines [i2, i2+chg2) of the second.
type diffChange struct {
	i1, i2, chg1, chg2 int
}

// diffSide is one sequence being compared.
type diffSide struct {
	class   []int  // equivalence class of each line
	changed []bool // changed[i+1] marks line i; both ends are sentinels
	rindex  []int  // the lines the core algorithm considers…
	rclass  []int  // …and their classes
	dstart  int    // first line not in the common prefix
	dend    int    // last line not in the common suffix
}

func (s *diffSide) n() int { return len(s.class) }

func (s *diffSide) chg(i int) bool {
	if i < -1 || i > s.n() {
		return false
	}
	return s.changed[i+1]
}

func (s *diffSide) mark(i int, v bool) { s.changed[i+1] = v }

// splitLines cuts b after each '\n'; a last line without one is kept.
func splitLines(b []byte) [][]byte {
	var lines [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		if i < len(b) {
			i++
		}
		lines = append(lines, b[:i:i])
		b = b[i:]
	}
	return lines
}

// diffLines compares two sequences of lines and returns the edit script.
func diffLines(a, b [][]byte) []diffChange {
	s1, s2 := diffPrepare(a, b)
	diffCore(s1, s2)
	diffCompact(s1, s2)
	diffCompact(s2, s1)
	return diffScript(s1, s2)
}

func diffPrepare(a, b [][]byte) (*diffSide, *diffSide) {
	// Lines are classified together so equal lines share a class;
	// count[side][class] says how often a class occurs on each side.
	ids := make(map[string]int, len(a)+len(b))
	var count [2][]int
	classify := func(side int, lines [][]byte) *diffSide {
		s := &diffSide{class: make([]int, len(lines)), changed: make([]bool, len(lines)+2)}
		for i, l := range lines {
			id, ok := ids[string(l)]
			if !ok {
				id = len(ids)
				ids[string(l)] = id
				count[0] = append(count[0], 0)
				count[1] = append(count[1], 0)
			}
			count[side][id]++
			s.class[i] = id
		}
		return s
	}
	s1, s2 := classify(0, a), classify(1, b)
	diffTrimEnds(s1, s2)
	diffCleanup(s1, s2, count[0], count[1])
	return s1, s2
}

// diffTrimEnds finds the common prefix and suffix.
func diffTrimEnds(s1, s2 *diffSide) {
	lim := min(s1.n(), s2.n())
	i := 0
	for i < lim && s1.class[i] == s2.class[i] {
		i++
	}
	s1.dstart, s2.dstart = i, i
	lim -= i
	j := 0
	for j < lim && s1.class[s1.n()-1-j] == s2.class[s2.n()-1-j] {
		j++
	}
	s1.dend = s1.n() - j - 1
	s2.dend = s2.n() - j - 1
}

// bogoSqrt is xdiff's rough integer square root.
func bogoSqrt(n int) int {
	i := 1
	for ; n > 0; n >>= 2 {
		i <<= 1
	}
	return i
}

// diffCleanup drops from the core comparison the lines with no match on
// the other side (they are certainly changed) and lines with very many
// matches that sit among unmatched lines.
func diffCleanup(s1, s2 *diffSide, count1, count2 []int) {
	discard := func(s *diffSide, otherCount []int) []byte {
		dis := make([]byte, s.n()+1)
		mlim := min(bogoSqrt(s.n()), diffMaxEqLimit)
		for i := s.dstart; i <= s.dend; i++ {
			switch nm := otherCount[s.class[i]]; {
			case nm == 0:
				dis[i] = 0
			case nm >= mlim:
				dis[i] = 2
			default:
				dis[i] = 1
			}
		}
		return dis
	}
	dis1 := discard(s1, count2)
	dis2 := discard(s2, count1)
	keep := func(s *diffSide, dis []byte) {
		for i := s.dstart; i <= s.dend; i++ {
			if dis[i] == 1 || (dis[i] == 2 && !diffMultiMatchDiscard(dis, i, s.dstart, s.dend)) {
				s.rindex = append(s.rindex, i)
				s.rclass = append(s.rclass, s.class[i])
			} else {
				s.mark(i, true)
			}
		}
	}
	keep(s1, dis1)
	keep(s2, dis2)
}

// diffMultiMatchDiscard decides whether the multi-match line i is
// surrounded by enough unmatched lines to be treated as changed.
func diffMultiMatchDiscard(dis []byte, i, s, e int) bool {
	if i-s > diffSimscanWin {
		s = i - diffSimscanWin
	}
	if e-i > diffSimscanWin {
		e = i + diffSimscanWin
	}
	rdis0, rpdis0 := 0, 1
	for r := 1; i-r >= s; r++ {
		if dis[i-r] == 0 {
			rdis0++
		} else if dis[i-r] == 2 {
			rpdis0++
		} else {
			break
		}
	}
	if rdis0 == 0 {
		return false
	}
	rdis1, rpdis1 := 0, 1
	for r := 1; i+r <= e; r++ {
		if dis[i+r] == 0 {
			rdis1++
		} else if dis[i+r] == 2 {
			rpdis1++
		} else {
			break
		}
	}
	if rdis1 == 0 {
		return false
	}
	rdis1 += rdis0
	rpdis1 += rpdis0
	return rpdis1*diffKeepRunRatio < rpdis1+rdis1
}

// diffEnv holds the state of the core algorithm over the reduced sequences.
type diffEnv struct {
	s1, s2  *diffSide
	h1, h2  []int
	kf, kb  []int // forward and backward furthest-reaching paths by diagonal
	koff    int   // index of diagonal 0 in kf and kb
	mxcost  int
	snake   int
	heurMin int
}

type diffSplit struct {
	i1, i2       int
	minLo, minHi bool
}

func diffCore(s1, s2 *diffSide) {
	n1, n2 := len(s1.rclass), len(s2.rclass)
	ndiags := n1 + n2 + 3
	e := &diffEnv{
		s1: s1, s2: s2, h1: s1.rclass, h2: s2.rclass,
		kf: make([]int, ndiags), kb: make([]int, ndiags),
		koff:    n2 + 1,
		mxcost:  max(bogoSqrt(ndiags), diffMaxCostMin),
		snake:   diffSnakeCnt,
		heurMin: diffHeurMinCost,
	}
	e.compare(0, n1, 0, n2, false)
}

// compare marks the changed lines of h1[off1:lim1] against h2[off2:lim2].
func (e *diffEnv) compare(off1, lim1, off2, lim2 int, needMin bool) {
	for off1 < lim1 && off2 < lim2 && e.h1[off1] == e.h2[off2] {
		off1++
		off2++
	}
	for off1 < lim1 && off2 < lim2 && e.h1[lim1-1] == e.h2[lim2-1] {
		lim1--
		lim2--
	}
	switch {
	case off1 == lim1:
		for ; off2 < lim2; off2++ {
			e.s2.mark(e.s2.rindex[off2], true)
		}
	case off2 == lim2:
		for ; off1 < lim1; off1++ {
			e.s1.mark(e.s1.rindex[off1], true)
		}
	default:
		spl := e.split(off1, lim1, off2, lim2, needMin)
		e.compare(off1, spl.i1, off2, spl.i2, spl.minLo)
		e.compare(spl.i1, lim1, spl.i2, lim2, spl.minHi)
	}
}

// split finds where a shortest (or, past the cost limit, a good enough)
// edit path crosses the middle of the box, searching from both corners.
func (e *diffEnv) split(off1, lim1, off2, lim2 int, needMin bool) diffSplit {
	kf := func(d int) *int { return &e.kf[d+e.koff] }
	kb := func(d int) *int { return &e.kb[d+e.koff] }
	h1, h2 := e.h1, e.h2
	dmin, dmax := off1-lim2, lim1-off2
	fmid, bmid := off1-off2, lim1-lim2
	odd := (fmid-bmid)&1 != 0
	fmin, fmax := fmid, fmid
	bmin, bmax := bmid, bmid
	*kf(fmid) = off1
	*kb(bmid) = lim1

	for ec := 1; ; ec++ {
		gotSnake := false

		if fmin > dmin {
			fmin--
			*kf(fmin - 1) = -1
		} else {
			fmin++
		}
		if fmax < dmax {
			fmax++
			*kf(fmax + 1) = -1
		} else {
			fmax--
		}
		for d := fmax; d >= fmin; d -= 2 {
			var i1 int
			if *kf(d - 1) >= *kf(d + 1) {
				i1 = *kf(d - 1) + 1
			} else {
				i1 = *kf(d + 1)
			}
			prev := i1
			i2 := i1 - d
			for i1 < lim1 && i2 < lim2 && h1[i1] == h2[i2] {
				i1++
				i2++
			}
			if i1-prev > e.snake {
				gotSnake = true
			}
			*kf(d) = i1
			if odd && bmin <= d && d <= bmax && *kb(d) <= i1 {
				return diffSplit{i1, i2, true, true}
			}
		}

		if bmin > dmin {
			bmin--
			*kb(bmin - 1) = math.MaxInt
		} else {
			bmin++
		}
		if bmax < dmax {
			bmax++
			*kb(bmax + 1) = math.MaxInt
		} else {
			bmax--
		}
		for d := bmax; d >= bmin; d -= 2 {
			var i1 int
			if *kb(d - 1) < *kb(d + 1) {
				i1 = *kb(d - 1)
			} else {
				i1 = *kb(d + 1) - 1
			}
			prev := i1
			i2 := i1 - d
			for i1 > off1 && i2 > off2 && h1[i1-1] == h2[i2-1] {
				i1--
				i2--
			}
			if prev-i1 > e.snake {
				gotSnake = true
			}
			*kb(d) = i1
			if !odd && fmin <= d && d <= fmax && i1 <= *kf(d) {
				return diffSplit{i1, i2, true, true}
			}
		}

		if needMin {
			continue
		}

		// Past the heuristic threshold, accept a diagonal that got far
		// along a long snake rather than insisting on the optimum.
		if gotSnake && ec > e.heurMin {
			best, spl := 0, diffSplit{}
			for d := fmax; d >= fmin; d -= 2 {
				dd := abs(d - fmid)
				i1 := *kf(d)
				i2 := i1 - d
				v := (i1 - off1) + (i2 - off2) - dd
				if v > diffKHeur*ec && v > best &&
					off1+e.snake <= i1 && i1 < lim1 &&
					off2+e.snake <= i2 && i2 < lim2 {
					for k := 1; h1[i1-k] == h2[i2-k]; k++ {
						if k == e.snake {
							best = v
							spl.i1, spl.i2 = i1, i2
							break
						}
					}
				}
			}
			if best > 0 {
				spl.minLo, spl.minHi = true, false
				return spl
			}
			best = 0
			for d := bmax; d >= bmin; d -= 2 {
				dd := abs(d - bmid)
				i1 := *kb(d)
				i2 := i1 - d
				v := (lim1 - i1) + (lim2 - i2) - dd
				if v > diffKHeur*ec && v > best &&
					off1 < i1 && i1 <= lim1-e.snake &&
					off2 < i2 && i2 <= lim2-e.snake {
					for k := 0; h1[i1+k] == h2[i2+k]; k++ {
						if k == e.snake-1 {
							best = v
							spl.i1, spl.i2 = i1, i2
							break
						}
					}
				}
			}
			if best > 0 {
				spl.minLo, spl.minHi = false, true
				return spl
			}
		}

		// Too expensive: take the furthest-reaching path found so far.
		if ec >= e.mxcost {
			fbest, fbest1 := -1, -1
			for d := fmax; d >= fmin; d -= 2 {
				i1 := min(*kf(d), lim1)
				i2 := i1 - d
				if lim2 < i2 {
					i1, i2 = lim2+d, lim2
				}
				if fbest < i1+i2 {
					fbest, fbest1 = i1+i2, i1
				}
			}
			bbest, bbest1 := math.MaxInt, math.MaxInt
			for d := bmax; d >= bmin; d -= 2 {
				i1 := max(off1, *kb(d))
				i2 := i1 - d
				if i2 < off2 {
					i1, i2 = off2+d, off2
				}
				if i1+i2 < bbest {
					bbest, bbest1 = i1+i2, i1
				}
			}
			if (lim1+lim2)-bbest < fbest-(off1+off2) {
				return diffSplit{fbest1, fbest - fbest1, true, false}
			}
			return diffSplit{bbest1, bbest - bbest1, false, true}
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// diffGroup is a run of changed lines [start, end) (possibly empty).
type diffGroup struct{ start, end int }

func (s *diffSide) groupInit() diffGroup {
	g := diffGroup{}
	for s.chg(g.end) {
		g.end++
	}
	return g
}

func (s *diffSide) groupNext(g *diffGroup) bool {
	if g.end == s.n() {
		return false
	}
	g.start = g.end + 1
	g.end = g.start
	for s.chg(g.end) {
		g.end++
	}
	return true
}

func (s *diffSide) groupPrev(g *diffGroup) bool {
	if g.start == 0 {
		return false
	}
	g.end = g.start - 1
	g.start = g.end
	for s.chg(g.start - 1) {
		g.start--
	}
	return true
}

func (s *diffSide) slideDown(g *diffGroup) bool {
	if g.end < s.n() && s.class[g.start] == s.class[g.end] {
		s.mark(g.start, false)
		g.start++
		s.mark(g.end, true)
		g.end++
		for s.chg(g.end) {
			g.end++
		}
		return true
	}
	return false
}

func (s *diffSide) slideUp(g *diffGroup) bool {
	if g.start > 0 && s.class[g.start-1] == s.class[g.end-1] {
		g.start--
		s.mark(g.start, true)
		g.end--
		s.mark(g.end, false)
		for s.chg(g.start - 1) {
			g.start--
		}
		return true
	}
	return false
}

// diffCompact slides each group of changes in s as far down as it goes,
// merging groups it bumps into, then back up to line up with a change in
// the other side o if it can. This is what makes equal-cost diffs agree
// with git's.
func diffCompact(s, o *diffSide) {
	g := s.groupInit()
	og := o.groupInit()
	for {
		if g.end != g.start {
			var earliestEnd, endMatchingOther int
			for {
				size := g.end - g.start
				endMatchingOther = -1
				for s.slideUp(&g) {
					o.groupPrev(&og)
				}
				earliestEnd = g.end
				if og.end > og.start {
					endMatchingOther = g.end
				}
				for s.slideDown(&g) {
					o.groupNext(&og)
					if og.end > og.start {
						endMatchingOther = g.end
					}
				}
				if size == g.end-g.start {
					break
				}
			}
			if g.end != earliestEnd && endMatchingOther != -1 {
				for og.end == og.start {
					if !s.slideUp(&g) || !o.groupPrev(&og) {
						break // cannot happen: a match was seen above
					}
				}
			}
		}
		if !s.groupNext(&g) || !o.groupNext(&og) {
			break
		}
	}
}

// diffScript collects the marked lines into hunks, in order.
func diffScript(s1, s2 *diffSide) []diffChange {
	var rev []diffChange
	for i1, i2 := s1.n(), s2.n(); i1 >= 0 || i2 >= 0; i1, i2 = i1-1, i2-1 {
		if s1.chg(i1-1) || s2.chg(i2-1) {
			l1, l2 := i1, i2
			for s1.chg(i1 - 1) {
				i1--
			}
			for s2.chg(i2 - 1) {
				i2--
			}
			rev = append(rev, diffChange{i1: i1, i2: i2, chg1: l1 - i1, chg2: l2 - i2})
		}
	}
	out := make([]diffChange, len(rev))
	for i, c := range rev {
		out[len(rev)-1-i] = c
	}
	return out
}
