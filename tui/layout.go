package tui

// Pane layouts.
const (
	layoutGrid    = "grid"
	layoutRows    = "rows"
	layoutColumns = "columns"
)

func validLayout(s string) bool {
	return s == layoutGrid || s == layoutRows || s == layoutColumns
}

// Smallest pane worth drawing: a border, a header and two body lines.
const (
	minPaneW = 20
	minPaneH = 4
)

// rect is a box on the screen.
type rect struct{ x, y, w, h int }

func (r rect) contains(x, y int) bool {
	return x >= r.x && x < r.x+r.w && y >= r.y && y < r.y+r.h
}

// perPage is how many panes of n fit in area with the layout.
func perPage(kind string, n int, area rect) int {
	if n <= 0 {
		return 0
	}
	switch kind {
	case layoutRows:
		return max(1, min(n, area.h/minPaneH))
	case layoutColumns:
		return max(1, min(n, area.w/minPaneW))
	}
	for k := n; k > 1; k-- {
		if _, ok := gridShape(k, area); ok {
			return k
		}
	}
	return 1
}

// gridShape picks columns and rows for n panes so that cells come out
// closest to twice as wide as tall (a terminal cell is about half as wide
// as it is tall, so that looks square).
func gridShape(n int, area rect) (cols int, ok bool) {
	best, bestScore := 0, -1
	for c := 1; c <= n; c++ {
		r := (n + c - 1) / c
		w, h := area.w/c, area.h/r
		if w < minPaneW || h < minPaneH {
			continue
		}
		score := min(w/2, h)
		if score > bestScore {
			best, bestScore = c, score
		}
	}
	return best, best > 0
}

// arrange places n panes in area.
func arrange(kind string, n int, area rect) []rect {
	if n <= 0 {
		return nil
	}
	switch kind {
	case layoutRows:
		return split(area, n, false)
	case layoutColumns:
		return split(area, n, true)
	}
	cols, ok := gridShape(n, area)
	if !ok {
		cols = 1
	}
	rows := (n + cols - 1) / cols
	var out []rect
	for i, r := range split(area, rows, false) {
		inRow := cols
		if i == rows-1 {
			inRow = n - cols*(rows-1)
		}
		out = append(out, split(r, inRow, true)...)
	}
	return out
}

// split cuts area into n equal parts side by side (horizontal) or
// stacked; the first parts take the remainder.
func split(area rect, n int, horizontal bool) []rect {
	out := make([]rect, 0, n)
	total := area.h
	if horizontal {
		total = area.w
	}
	size, extra := total/n, total%n
	pos := 0
	for i := range n {
		s := size
		if i < extra {
			s++
		}
		r := area
		if horizontal {
			r.x, r.w = area.x+pos, s
		} else {
			r.y, r.h = area.y+pos, s
		}
		out = append(out, r)
		pos += s
	}
	return out
}
