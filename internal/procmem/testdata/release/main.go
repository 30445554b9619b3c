// Command release calls procmem.ReleaseExecutable and then runs code and
// reads data of every kind a Go binary holds in its read-only mappings
// (interface tables, type names through reflect, string constants, the
// function table a panic's stack trace reads), printing what it found: the
// test builds it as a position-independent executable, whose relocated
// data must survive the release.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/rexconsole/rex/internal/procmem"
)

type point struct {
	X, Y int
}

func (p point) String() string { return "(" + strconv.Itoa(p.X) + "," + strconv.Itoa(p.Y) + ")" }

func rss(field string) int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return -1
}

func main() {
	before := rss("RssFile:")
	r, err := procmem.ReleaseExecutable()
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	after := rss("RssFile:")
	var s fmt.Stringer = point{3, 4}
	b, _ := json.Marshal(map[string]any{"p": point{1, 2}, "t": reflect.TypeOf(s).String()})
	stack := string(debug.Stack())
	fmt.Printf("dropped=%d kept=%d before=%d after=%d\n", r.Dropped, r.Kept, before, after)
	fmt.Printf("%s %s %v\n", s, b, strings.Contains(stack, "main.main"))
}
