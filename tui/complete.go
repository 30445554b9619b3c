package tui

import (
	"sort"
	"strings"
)

// compSource is what completion draws names from.
type compSource struct {
	commands []string // slash commands, with the slash
	devices  []string
	groups   []string
	themes   []string
	// tools lists the tool ids; it reads the tool directories, so it is
	// called only when a /tool line needs them.
	tools func() []string
}

// completion is what tab offers for the word before the cursor.
type completion struct {
	start int      // byte offset where the completed part begins
	word  string   // the part typed so far
	cands []string // candidates that start with word, sorted
}

// deviceVerbs are the verbs of /device, as rex device has them.
func deviceVerbs() []string {
	return []string{"add", "remove", "list", "show", "group", "check", "prepare", "clean", "help"}
}

// groupVerbs are the verbs of /device group.
func groupVerbs() []string { return []string{"create", "delete", "add", "remove", "list"} }

// completeLine completes the last word of line (the text before the
// cursor): slash commands first, then each command's arguments — device
// and group names, TARGETS lists after their last comma, verbs, layouts
// and themes.
func completeLine(line string, src compSource) completion {
	start := strings.LastIndexAny(line, " \t") + 1
	word := line[start:]
	prior := strings.Fields(line[:start])
	var cands []string
	targets := false
	switch {
	case len(prior) == 0:
		if strings.HasPrefix(word, "/") {
			cands = src.commands
		}
	case !strings.HasPrefix(prior[0], "/"):
		// A shell command: nothing to offer.
	default:
		args := prior[1:]
		switch prior[0] {
		case "/target":
			targets = len(args) == 0
		case "/run":
			cands, targets = completeRun(args, word)
		case "/device":
			cands, targets = completeDevice(args, src)
		case "/layout":
			if len(args) == 0 {
				cands = []string{layoutGrid, layoutRows, layoutColumns}
			}
		case "/theme":
			if len(args) == 0 {
				cands = src.themes
			}
		case "/close", "/clear", "/reconnect":
			if len(args) == 0 {
				cands = []string{"all"}
			}
		case "/attach", "/focus":
			targets = len(args) == 0
		case "/push", "/pull":
			// LOCAL REMOTE TARGETS, REMOTE LOCAL TARGET; -w's and -x's value
			targets = len(args) == 2
			if n := len(args); n > 0 {
				switch args[n-1] {
				case "-w", "--target", "-x", "--exclude":
					targets = true
				}
			}
		case "/tool":
			cands, targets = completeTool(args, word, src)
		}
	}
	if targets {
		// Complete the item after the last comma of a TARGETS list.
		if i := strings.LastIndexByte(word, ','); i >= 0 {
			start += i + 1
			word = word[i+1:]
		}
		cands = append([]string{"local", "all"}, src.devices...)
		cands = append(cands, src.groups...)
	}
	c := completion{start: start, word: word}
	seen := map[string]bool{}
	for _, s := range cands {
		if strings.HasPrefix(s, word) && !seen[s] {
			seen[s] = true
			c.cands = append(c.cands, s)
		}
	}
	sort.Strings(c.cands)
	return c
}

// completeRun completes /run TARGETS [flags] -- CMD: the first plain word
// is TARGETS, a word starting with '-' is a flag, nothing after "--".
func completeRun(args []string, word string) ([]string, bool) {
	sawTargets := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return nil, false
		case a == "--timeout" || a == "-t" || a == "--concurrency" || a == "-f":
			i++
			if i == len(args) {
				return nil, false // the word is the flag's value
			}
		case strings.HasPrefix(a, "-"):
		default:
			if sawTargets {
				return nil, false // the command has begun
			}
			sawTargets = true
		}
	}
	if strings.HasPrefix(word, "-") {
		return []string{"--", "--gather", "--timeout", "--concurrency"}, false
	}
	return nil, !sawTargets
}

// completeDevice completes /device VERB ARGS.
func completeDevice(args []string, src compSource) ([]string, bool) {
	if len(args) == 0 {
		return deviceVerbs(), false
	}
	switch args[0] {
	case "show", "remove":
		if len(args) == 1 {
			return src.devices, false
		}
	case "check", "prepare", "clean":
		if len(args) == 1 {
			return nil, true
		}
	case "group":
		switch {
		case len(args) == 1:
			return groupVerbs(), false
		case len(args) == 2 && (args[1] == "add" || args[1] == "remove" || args[1] == "delete"):
			return src.groups, false
		case len(args) >= 3 && (args[1] == "add" || args[1] == "remove"):
			return src.devices, false
		}
	}
	return nil, false
}

// completeTool completes /tool VERB ID [flags]: the verbs, tool ids,
// flags, and TARGETS after --target.
func completeTool(args []string, word string, src compSource) ([]string, bool) {
	if len(args) == 0 {
		return []string{"list", "show", "run", "new", "check"}, false
	}
	verb := args[0]
	if verb != "show" && verb != "run" {
		return nil, false
	}
	if n := len(args); n > 1 && (args[n-1] == "--target" || args[n-1] == "-w") && verb == "run" {
		return nil, true
	}
	if n := len(args); n > 1 && (args[n-1] == "--param" || args[n-1] == "-p") {
		return nil, false // a KEY=VALUE of the operator's own
	}
	if strings.HasPrefix(word, "-") {
		if verb == "show" {
			return []string{"--trace"}, false
		}
		return []string{"--param", "--target", "--trace"}, false
	}
	hasID := false
	for i := 1; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--param" || a == "-p" || a == "--target" || a == "-t":
			i++
		case !strings.HasPrefix(a, "-"):
			hasID = true
		}
	}
	if hasID || src.tools == nil {
		return nil, false
	}
	return src.tools(), false
}

// commonPrefix is the longest prefix every string shares.
func commonPrefix(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	p := ss[0]
	for _, s := range ss[1:] {
		for !strings.HasPrefix(s, p) {
			p = p[:len(p)-1]
		}
	}
	return p
}
