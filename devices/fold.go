package devices

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Fold writes a list of target names the short way TARGETS reads them,
// as ClusterShell's NodeSet does: names that differ only in their last
// number become one range, so web1,web2,web3,db2 is "db2,web[1-3]",
// n01..n10 is "n[01-10]" and web01.lan,web02.lan is "web[01-02].lan".
// Names are sorted and duplicates dropped; a name without a number is kept
// as it is. Fold's output expands back to the same names.
func Fold(names []string) string {
	type group struct {
		prefix, suffix string
		width          int // digits of a zero-padded number; 0 for plain numbers
		nums           []int
	}
	groups := map[string]*group{}
	var plain []string
	type pending struct {
		prefix, suffix string
		digits         string
	}
	var unpadded []pending
	seen := map[string]bool{}
	key := func(prefix, suffix string, width int) string {
		return prefix + "\x00" + suffix + "\x00" + strconv.Itoa(width)
	}
	get := func(prefix, suffix string, width int) *group {
		k := key(prefix, suffix, width)
		g := groups[k]
		if g == nil {
			g = &group{prefix: prefix, suffix: suffix, width: width}
			groups[k] = g
		}
		return g
	}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		// The last run of digits.
		end := len(n)
		for end > 0 && (n[end-1] < '0' || n[end-1] > '9') {
			end--
		}
		i := end
		for i > 0 && n[i-1] >= '0' && n[i-1] <= '9' {
			i--
		}
		digits := n[i:end]
		// Names that are all digits, or whose number would not survive a
		// round trip (too long, or a bracket already in the name), stay.
		if i == 0 && end == len(n) || digits == "" || len(digits) > 9 || strings.ContainsAny(n, "[]") {
			plain = append(plain, n)
			continue
		}
		if len(digits) > 1 && digits[0] == '0' {
			v, _ := strconv.Atoi(digits)
			g := get(n[:i], n[end:], len(digits))
			g.nums = append(g.nums, v)
			continue
		}
		unpadded = append(unpadded, pending{n[:i], n[end:], digits})
	}
	// A plain number as wide as a padded range of its prefix joins it
	// (n09, n10 fold to n[09-10]).
	for _, u := range unpadded {
		v, _ := strconv.Atoi(u.digits)
		w := 0
		if groups[key(u.prefix, u.suffix, len(u.digits))] != nil {
			w = len(u.digits)
		}
		g := get(u.prefix, u.suffix, w)
		g.nums = append(g.nums, v)
	}
	type item struct{ sortKey, text string }
	var items []item
	for _, n := range plain {
		items = append(items, item{n, n})
	}
	for _, g := range groups {
		sort.Ints(g.nums)
		num := func(v int) string { return fmt.Sprintf("%0*d", g.width, v) }
		if len(g.nums) == 1 {
			n := g.prefix + num(g.nums[0]) + g.suffix
			items = append(items, item{n, n})
			continue
		}
		var parts []string
		for i := 0; i < len(g.nums); {
			j := i
			for j+1 < len(g.nums) && g.nums[j+1] == g.nums[j]+1 {
				j++
			}
			if j == i {
				parts = append(parts, num(g.nums[i]))
			} else {
				parts = append(parts, num(g.nums[i])+"-"+num(g.nums[j]))
			}
			i = j + 1
		}
		items = append(items, item{g.prefix + num(g.nums[0]) + g.suffix, g.prefix + "[" + strings.Join(parts, ",") + "]" + g.suffix})
	}
	sort.Slice(items, func(i, j int) bool { return lessName(items[i].sortKey, items[j].sortKey) })
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.text
	}
	return strings.Join(out, ",")
}

// lessName orders names by their text, numbers by value (web2 < web10).
func lessName(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, _ := strconv.Atoi(a[:min(da, 9)])
			nb, _ := strconv.Atoi(b[:min(db, 9)])
			if na != nb {
				return na < nb
			}
			if da != db {
				return da < db
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitRun(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
