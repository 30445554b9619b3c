// Command warm times `rex run` inside one process, the way the console runs
// commands: the first run dials and bootstraps every target, later runs reuse
// the pooled connections. It prints one line per run: "cold SECONDS" first,
// then "warm SECONDS". Output goes through the same printer as `rex run`
// (prefixed lines) into /dev/null.
//
//	warm [-reps N] TARGETS -- CMD [ARG...]
package main

import (
	"context"
	"flag"
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
	reps := flag.Int("reps", 3, "warm runs after the cold one")
	flag.Parse()
	setup, err := commands.NewSetup(commands.Paths{
		Config: filepath.Join(xdg.ConfigHome, "rex"),
		Cache:  filepath.Join(xdg.CacheHome, "rex"),
		State:  filepath.Join(xdg.StateHome, "rex"),
	}, commands.SetupOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "warm:", err)
		os.Exit(1)
	}
	app := setup.App(fanout.PoolOptions{})
	defer app.Pool.Close()
	o := commands.IO{Out: io.Discard, Err: io.Discard}
	spec, err := commands.ParseRun(flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "warm:", err)
		os.Exit(2)
	}
	for i := 0; i <= *reps; i++ {
		start := time.Now()
		if err := commands.Run(context.Background(), app, o, spec); err != nil {
			fmt.Fprintln(os.Stderr, "warm: run failed:", err)
			os.Exit(1)
		}
		label := "warm"
		if i == 0 {
			label = "cold"
		}
		fmt.Printf("%s %.3f\n", label, time.Since(start).Seconds())
	}
}
