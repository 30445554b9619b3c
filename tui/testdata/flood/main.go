// Command flood writes -rate bytes per second of 100-byte lines to
// standard output, in chunks every 10 ms, until killed: the output of a
// busy host, for the console's keystroke benchmark.
package main

import (
	"bytes"
	"flag"
	"os"
	"time"
)

func main() {
	rate := flag.Int("rate", 1<<20, "bytes per second")
	flag.Parse()
	line := append(bytes.Repeat([]byte("x"), 99), '\n')
	chunk := bytes.Repeat(line, max(1, *rate/100/len(line)))
	tick := time.NewTicker(10 * time.Millisecond)
	for range tick.C {
		if _, err := os.Stdout.Write(chunk); err != nil {
			return
		}
	}
}
