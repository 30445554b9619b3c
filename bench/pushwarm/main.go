// Command pushwarm times `rex push` inside one process, the way the
// console's /push runs it: the first push dials and bootstraps every target,
// later pushes reuse the pooled connections. It pushes once for every line
// read from standard input and prints the seconds each push took, one line
// each, so a script can change the source between pushes.
//
//	pushwarm [PUSH FLAGS] SRC... DEST TARGETS < steps
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/adrg/xdg"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
)

func main() {
	spec, err := commands.ParsePush(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "pushwarm:", err)
		os.Exit(2)
	}
	setup, err := commands.NewSetup(commands.Paths{
		Config: filepath.Join(xdg.ConfigHome, "rex"),
		Cache:  filepath.Join(xdg.CacheHome, "rex"),
		State:  filepath.Join(xdg.StateHome, "rex"),
	}, commands.SetupOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pushwarm:", err)
		os.Exit(1)
	}
	app := setup.App(fanout.PoolOptions{})
	defer app.Pool.Close()
	o := commands.IO{Out: io.Discard, Err: io.Discard}
	steps := bufio.NewScanner(os.Stdin)
	for steps.Scan() {
		start := time.Now()
		if err := commands.Push(context.Background(), app, o, spec); err != nil {
			fmt.Fprintln(os.Stderr, "pushwarm: push failed:", err)
			os.Exit(1)
		}
		fmt.Printf("%.3f\n", time.Since(start).Seconds())
	}
}
