package sshx

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/rexconsole/rex/internal/sudo"
	"github.com/rexconsole/rex/internal/version"
)

// bootScript runs on the target under /bin/sh (whatever the login shell),
// as `sh -c bootScript rexd-boot MODE ARG... -- REXD-ARGS...`. The ARGs:
//
//	<uname -sm>=<version>-<hash12>  the cache directory of the rexd build for
//	                                that platform (one per platform)
//	sum=<uname -sm>=<sha256>        that build's full SHA-256
//	version=V                       the version (clean mode)
//	known=<path>=<stat>             a cached rexd this rex verified already,
//	                                with its device:inode:size:mtime:ctime
//	fresh=<path>                    the rexd this rex has just uploaded and
//	                                verified: run it without hashing again
//	fast=<path>=<stat>              one of the known ones, of a build this
//	                                rex carries: run mode tries it first,
//	                                with a single stat (see fok)
//	fastsum=<sha256>                that build's SHA-256, given to the fast
//	                                path's rexd (--build-hash) so that it
//	                                does not hash itself
//	first=<base64>                  rexd's first requests, handed to it in
//	                                REXD_FIRST (not through sudo)
//
// Candidate cache directories, in order: $XDG_CACHE_HOME/rexd,
// $HOME/.cache/rexd, ${TMPDIR:-/tmp}/rexd-<uid>. A cache directory and its
// version directory are used only when, checked without following
// symlinks (ls -ld), they are directories of this user with mode 0700; one
// of this user with a looser mode is tightened first. The cached rexd must
// be a regular file of this user whose SHA-256 is the build's, unless it
// is the fresh upload or a known one with the same stat: it is never run
// on the strength of what it says about itself.
//
// Modes:
//
//	run    exec the cached rexd for this platform ("rexd-verified PATH STAT"
//	       after hashing it, then "rexd-exec PATH STAT"); on a miss, go on
//	       as probe. With become=USER (and bmode=-n|-S, bprompt=P,
//	       bready=SCRIPT) rexd is started through sudo as USER (see
//	       package sudo)
//	probe  print "rexd-uname U" (and "rexd-gzip yes" when gzip is there to
//	       unpack a compressed upload), then find the first candidate that
//	       can be written and executed, create its version directory and
//	       print "rexd-dir D" (exit 3); "rexd-bad WHY D" for each one that
//	       cannot; exit 4 for an unknown platform, 5 when none is usable
//	check  print uname, the cached rexd and its --version, and every rexd
//	       found in the candidates
//	clean  remove every "<version>-*" directory of the candidates
//
// The script holds no single quote, no "!" and no newline, so it survives
// being quoted for any login shell (csh included); values travel as
// arguments, never inside the script.
const bootScript = `m=$1; shift; v=; r=; want=; k=; fresh=; fp=; fh=; fq=; pl=; bu=; bm=; bp=; br=; ` +
	`while [ $# -gt 0 ]; do e=$1; shift; if [ "$e" = -- ]; then break; fi; ` +
	`case $e in version=*) r=${e#version=};; sum=*) pl="$pl|$e|";; known=*) k="$k|${e#known=}|";; fresh=*) fresh=${e#fresh=};; fast=*) fp=${e#fast=};; fastsum=*) fh=${e#fastsum=};; first=*) fq=${e#first=};; ` +
	`become=*) bu=${e#become=};; bmode=*) bm=${e#bmode=};; bprompt=*) bp=${e#bprompt=};; bready=*) br=${e#bready=};; *=*) pl="$pl|$e|";; esac; done; ` +
	// rx F STAT SUM V ARGS: run rexd F, through sudo when become= says so:
	// then root runs rootScript, which never executes F itself but its
	// own copy of it (SUM: the build's SHA-256, V: its version directory).
	`rx() { p=$1; ps=$2; rw=$3; rv=$4; shift 4; echo "rexd-exec $p $ps"; if [ -n "$bu" ]; then exec sudo "$bm" -H -p "$bp" -u "$bu" -- /bin/sh -c "$br" "$p" "$rw" "$rv" --stdio "$@"; fi; if [ -n "$fq" ]; then REXD_FIRST=$fq; export REXD_FIRST; fi; exec "$p" --stdio "$@"; }; ` +
	// The fast path of a cold start: the rexd of fast= runs when it is a
	// regular file of ours, not a symbolic link, in directories of ours with
	// mode 0700 (not links either), whose stat is still the one this rex
	// recorded when it verified it (the same inode, unchanged since: any
	// write, chmod or rename changes its ctime), and every parent directory
	// up to / (as named, no link) passes par's test. One stat, where the
	// checks below take uname, id, ls and a stat; anything else goes on below.
	`fok() { n=0; q=$pd; set --; while [ -n "$q" ]; do q=${q%/*}; set -- "${q:-/}" "$@"; n=$((n+1)); done; ` +
	`set -- $(stat -c %u:%f:%d:%i:%s:%Y:%Z "$@" "$pd" "$vd" "$f" 2>/dev/null || stat -f %u:%p:%d:%i:%z:%m:%c "$@" "$pd" "$vd" "$f" 2>/dev/null); ` +
	`if [ $# -eq $((n+3)) ]; then :; else return 1; fi; eval "o=\${$((n+1))%%:*}"; ` +
	`while [ $n -gt 0 ]; do case ${1%%:*} in 0|"$o") ;; *) return 1;; esac; x=${1#*:}; x=${x%%:*}; case ${#x} in 4) x=$((0x$x));; *) x=$((0$x));; esac; ` +
	`if [ $((x & 16384)) -eq 0 ]; then return 1; fi; if [ $((x & 18)) -ne 0 ] && [ $((x & 512)) -eq 0 ]; then return 1; fi; shift; n=$((n-1)); done; ` +
	`for x in "$1" "$2"; do case $x in "$o":41c0:*|"$o":40700:*) ;; *) return 1;; esac; done; s=${3#*:}; s=${s#*:}; [ "$s" = "$fs" ]; }; ` +
	`if [ "$m" = run ] && [ -n "$fp" ]; then f=${fp%=*}; fs=${fp##*=}; vd=${f%/*}; pd=${vd%/*}; ` +
	`if [ -L "$pd" ] || [ -L "$vd" ] || [ -L "$f" ]; then :; elif [ -O "$pd" ] && [ -O "$vd" ] && [ -O "$f" ] && [ -f "$f" ] && [ -x "$f" ] && fok; then if [ -n "$fh" ]; then rx "$f" "$s" "$fh" "${vd##*/}" --build-hash "$fh" "$@"; fi; rx "$f" "$s" "$fh" "${vd##*/}" "$@"; fi; fi; ` +
	`u=$(uname -sm 2>/dev/null); me=$(id -u); ` +
	`case $pl in *"|sum=$u="*) want=${pl#*"|sum=$u="}; want=${want%%|*};; esac; case $pl in *"|$u="*) v=${pl#*"|$u="}; v=${v%%|*};; esac; ` +
	`c1=; case ${XDG_CACHE_HOME-} in /*) c1=$XDG_CACHE_HOME/rexd;; esac; ` +
	`c2=; case ${HOME-} in /*) c2=$HOME/.cache/rexd;; esac; ` +
	`if [ "$c1" = "$c2" ]; then c1=; fi; ` +
	`t=${TMPDIR-}; case $t in /*) ;; *) t=/tmp;; esac; c3=$t/rexd-$me; ` +
	safeScript + parScript +
	`stamp() { stat -c %d:%i:%s:%Y:%Z "$1" 2>/dev/null || stat -f %d:%i:%z:%m:%c "$1" 2>/dev/null; }; ` +
	`sum() { x=$(sha256sum < "$1" 2>/dev/null) || x=$(shasum -a 256 < "$1" 2>/dev/null) || return 1; echo "${x%% *}"; }; ` +
	// ok F: F is a regular file of ours that is the build (hashed, fresh or
	// known by its stat); sets s to its stat.
	`ok() { f=$1; s=; if [ -L "$f" ]; then return 1; fi; if [ -f "$f" ] && [ -x "$f" ]; then :; else return 1; fi; ` +
	`set -- $(ls -ln "$f" 2>/dev/null); if [ "$3" = "$me" ]; then :; else echo "rexd-bad notowned $f"; return 1; fi; ` +
	`s=$(stamp "$f"); if [ "$f" = "$fresh" ]; then return 0; fi; ` +
	`if [ -n "$s" ]; then case $k in *"|$f=$s|"*) return 0;; esac; fi; ` +
	`h=$(sum "$f") || { echo "rexd-bad nosum $f"; return 1; }; ` +
	`if [ -n "$want" ] && [ "$h" = "$want" ]; then echo "rexd-verified $f $s"; return 0; fi; echo "rexd-bad damaged $f"; return 1; }; ` +
	// A candidate that holds no rexd is not checked: on a first contact
	// none does, and the probe below checks the one it picks.
	`if [ "$m" = run ]; then ` +
	`if [ -n "$v" ]; then for d in "$c1" "$c2" "$c3"; do ` +
	`if [ -n "$d" ] && [ -f "$d/$v/rexd" ] && par "$d" >/dev/null && safe "$d" && safe "$d/$v" && ok "$d/$v/rexd"; then rx "$d/$v/rexd" "$s" "$want" "$v" "$@"; fi; done; fi; ` +
	`m=probe; fi; ` +
	`if [ "$m" = probe ]; then echo "rexd-uname $u"; if [ -z "$v" ]; then exit 4; fi; ` +
	`if command -v gzip >/dev/null 2>&1; then echo "rexd-gzip yes"; fi; ` +
	`for d in "$c1" "$c2" "$c3"; do if [ -z "$d" ]; then continue; fi; ` +
	`if [ "$d" = "$c3" ]; then :; else mkdir -p "${d%/*}" 2>/dev/null; fi; par "$d" || continue; e=$(mkdir -m 700 "$d" 2>&1); ` +
	`safe "$d"; case $? in 0) ;; 1) echo "rexd-bad create $d"; why; continue;; 2) echo "rexd-bad notowned $d"; continue;; 4) echo "rexd-bad symlink $d"; continue;; *) echo "rexd-bad mode $d"; continue;; esac; ` +
	`nv=; e=$(mkdir -m 700 "$d/$v" 2>&1) && nv=1; ` +
	`safe "$d/$v"; case $? in 0) ;; 1) echo "rexd-bad create $d"; why; continue;; 2) echo "rexd-bad notowned $d/$v"; continue;; 4) echo "rexd-bad symlink $d/$v"; continue;; *) echo "rexd-bad mode $d/$v"; continue;; esac; ` +
	`f=$d/$v/.probe.$$; ` +
	`if [ -w "$d/$v" ] && : > "$f" 2>/dev/null && chmod 700 "$f" 2>/dev/null; then :; else rm -f "$f" 2>/dev/null; rmdir "$d/$v" 2>/dev/null; echo "rexd-bad readonly $d"; continue; fi; ` +
	`if "$f" 2>/dev/null; then rm -f "$f"; if [ -z "$nv" ]; then find "$d/$v" -name ".rexd.tmp.*" -mmin +60 -exec rm -f {} + 2>/dev/null; fi; echo "rexd-dir $d"; exit 3; fi; ` +
	`rm -f "$f"; rmdir "$d/$v" 2>/dev/null; echo "rexd-bad noexec $d"; done; exit 5; fi; ` +
	`if [ -O "$c3" ] && [ -L "$c3" ]; then c3=; elif [ -O "$c3" ]; then :; else c3=; fi; ` +
	`if [ "$m" = check ]; then echo "rexd-uname $u"; for d in "$c1" "$c2" "$c3"; do if [ -z "$d" ]; then continue; fi; ` +
	`if [ -n "$v" ] && [ -f "$d/$v/rexd" ]; then echo "rexd-cached $d/$v/rexd"; if safe "$d" && safe "$d/$v" && ok "$d/$v/rexd"; then echo "rexd-version $("$d/$v/rexd" --version 2>&1 | head -n 1)"; fi; fi; ` +
	`for x in "$d"/*/rexd; do if [ -f "$x" ]; then echo "rexd-found $x"; fi; done; done; exit 0; fi; ` +
	`if [ "$m" = clean ] && [ -n "$r" ]; then for d in "$c1" "$c2" "$c3"; do if [ -z "$d" ]; then continue; fi; ` +
	`for x in "$d/$r-"*; do if [ -d "$x" ]; then rm -rf "$x" && echo "rexd-removed $x"; fi; done; done; exit 0; fi; ` +
	`exit 2`

// safeScript defines safe D (for bootScript and rootScript, which set me
// to their uid): 0 when D is a directory of ours with mode 0700 (tightened
// if need be); 4 a symlink, 2 not ours, 3 a mode that cannot be fixed, 1
// no directory.
const safeScript = `safe() { p=$1; if [ -L "$p" ]; then return 4; fi; if [ -d "$p" ]; then :; else return 1; fi; ` +
	`set -- $(ls -ldn "$p" 2>/dev/null); if [ "$3" = "$me" ]; then :; else return 2; fi; ` +
	`case $1 in drwx------*) return 0;; esac; chmod 700 "$p" 2>/dev/null || return 3; ` +
	`set -- $(ls -ldn "$p" 2>/dev/null); case $1 in drwx------*) return 0;; esac; return 3; }; `

// parScript defines par D, which does for the parents of the cache
// directory D what OpenSSH's StrictModes does for a home directory: each
// one, from D's parent (resolved, as pwd -P does) up to /, must belong to
// root or to us ($me) and be writable by no one else unless it is sticky
// (like /tmp); else whoever can write it could rename D away between the
// checks and the exec. It prints "rexd-bad parentowner P" or "rexd-bad
// parentmode P" for the first that is not. A parent that is not there
// (or not a directory) passes: mkdir then says why D cannot be made. It also defines why, which
// prints the reason mkdir gave in $e ("rexd-badwhy REASON") for the
// "rexd-bad" line before it.
//
// One stat names every parent's owner and mode (GNU and busybox -c, BSD
// -f); without a stat that answers for all of them, each is read with
// ls -ldn as before. A first contact checks a handful of directories, and
// a process per parent per check was most of its processes on the target.
const parScript = `pc() { if [ "$2" = 0 ] || [ "$2" = "$me" ]; then :; else echo "rexd-bad parentowner $1"; return 1; fi; ` +
	`case $3 in d????????[tT]*) ;; d????w*|d???????w*) echo "rexd-bad parentmode $1"; return 1;; esac; }; ` +
	`par() { q=${1%/*}; q=$(cd -P "${q:-/}" 2>/dev/null && pwd -P) || return 0; ` +
	`set --; x=$q; while :; do set -- "$@" "$x"; if [ "$x" = / ]; then break; fi; x=${x%/*}; x=${x:-/}; done; ` +
	`l=$(stat -c %u:%A "$@" 2>/dev/null) || l=$(stat -f %u:%Sp "$@" 2>/dev/null) || l=; ` +
	`n=0; for y in $l; do case $y in *:d*) n=$((n+1));; *) n=-1; break;; esac; done; ` +
	`if [ $n -eq $# ]; then for y in $l; do pc "$1" "${y%%:*}" "${y#*:}" || return 1; shift; done; return 0; fi; ` +
	`while :; do set -- $(ls -ldn "$q" 2>/dev/null); pc "$q" "$3" "$1" || return 1; ` +
	`if [ "$q" = / ]; then return 0; fi; q=${q%/*}; q=${q:-/}; done; }; ` +
	`why() { if [ -n "$e" ]; then echo "rexd-badwhy ${e##*: }"; fi; }; `

// rootScript is what sudo runs as root for bootScript's rx (in place of
// sudo.ReadyScript), as "sh -c rootScript SRC SUM V --stdio ARGS...": SRC
// is the login user's verified rexd, which root never executes, since its
// owner could swap it between that check and this exec. Root runs its own
// copy instead: V/rexd in the first of $HOME/.cache/rexd (root's home:
// sudo -H) and /tmp/rexd-0 that is, like its parents, safe for root (a
// directory of root, mode 0700, no symlink; parents as par wants). When
// that copy is missing, root copies SRC to a temporary file there, checks
// its SHA-256 against SUM (the hash rex sent, never one rexd reports),
// and renames it into place. It prints sudo.Ready first (sudo has let it
// run), then "rexd-root PATH" before it execs PATH. Exit 12: SRC is not
// the build ("rexd-bad damaged SRC"; rex replaces it); 13: no directory
// is safe for root ("rexd-rootfail", after "rexd-bad WHY DIR" lines).
// Like bootScript it holds no single quote, no "!" and no newline.
const rootScript = `src=$0; want=$1; v=$2; shift 2; me=$(id -u); umask 077; echo ` + sudo.Ready + `; ` + safeScript + parScript +
	`c=; case ${HOME-} in /*) c=$HOME/.cache/rexd;; esac; for d in "$c" "/tmp/rexd-$me"; do if [ -z "$d" ]; then continue; fi; ` +
	`mkdir -p "${d%/*}" 2>/dev/null; par "$d" || continue; e=$(mkdir -m 700 "$d" 2>&1); ` +
	`safe "$d"; case $? in 0) ;; 1) echo "rexd-bad create $d"; why; continue;; 2) echo "rexd-bad notowned $d"; continue;; 4) echo "rexd-bad symlink $d"; continue;; *) echo "rexd-bad mode $d"; continue;; esac; ` +
	`e=$(mkdir -m 700 "$d/$v" 2>&1); ` +
	`safe "$d/$v"; case $? in 0) ;; 1) echo "rexd-bad create $d/$v"; why; continue;; 2) echo "rexd-bad notowned $d/$v"; continue;; 4) echo "rexd-bad symlink $d/$v"; continue;; *) echo "rexd-bad mode $d/$v"; continue;; esac; ` +
	`f=$d/$v/rexd; if [ -L "$f" ]; then echo "rexd-bad symlink $f"; continue; fi; ` +
	`if [ -f "$f" ] && [ -O "$f" ] && [ -x "$f" ]; then echo "rexd-root $f"; exec "$f" "$@"; fi; ` +
	`if [ -n "$want" ] && [ -f "$src" ]; then :; else echo "rexd-bad damaged $src"; exit 12; fi; ` +
	`t=$d/$v/.rexd.tmp.$$; e=$(cat < "$src" 2>&1 > "$t") || { rm -f "$t"; echo "rexd-bad readonly $d"; why; continue; }; ` +
	`x=$(sha256sum < "$t" 2>/dev/null) || x=$(shasum -a 256 < "$t" 2>/dev/null) || { rm -f "$t"; echo "rexd-bad nosum $d"; continue; }; x=${x%% *}; ` +
	`if [ "$x" = "$want" ]; then chmod 700 "$t" && mv -f "$t" "$f" && { echo "rexd-root $f"; exec "$f" "$@"; }; rm -f "$t"; echo "rexd-bad readonly $d"; continue; fi; ` +
	`rm -f "$t"; echo "rexd-bad damaged $src"; exit 12; done; echo rexd-rootfail; exit 13`

// Exit statuses of rootScript.
const (
	exitRootDamaged = 12
	exitRootNoDir   = 13
)

// Exit statuses of bootScript.
const (
	exitDir         = 3
	exitUnsupported = 4
	exitNoDir       = 5
)

// sumScript prints "rexd-sum HEX" for the file $1, or exits 7 when the
// target has no SHA-256 tool.
const sumScript = `f=$1; if command -v sha256sum >/dev/null 2>&1; then s=$(sha256sum < "$f") || exit 2; ` +
	`elif command -v shasum >/dev/null 2>&1; then s=$(shasum -a 256 < "$f") || exit 2; ` +
	`else exit 7; fi; echo "rexd-sum ${s%% *}"`

const exitNoSumTool = 7

// unpackScript unpacks the gzip file $1 into $2 (mode 0600 until it is
// installed), removes $1, then does what sumScript does for $2; it exits 8
// when the target has no gzip and 9 when unpacking fails (the caller then
// copies the build uncompressed).
const unpackScript = `z=$1; f=$2; command -v gzip >/dev/null 2>&1 || { rm -f "$z"; exit 8; }; ` +
	`(umask 077; gzip -dc < "$z" > "$f") || { rm -f "$z" "$f"; exit 9; }; rm -f "$z"; set -- "$f"; ` + sumScript

// bootCommand is the command line that runs bootScript in mode; extra are
// further ARGs (known=, fresh=).
//
// Through sudo as root, the script runs as the login user and starts the
// login user's verified rexd through sudo (become=). As any other user,
// who cannot read the login user's 0700 cache, the whole script runs
// through sudo as that user instead: it finds, checks and (on a miss)
// probes that user's own cache directories, and installScript copies rexd
// there.
func bootCommand(mode string, builds []build, rexdArgs []string, as *become, extra ...string) string {
	script := []string{"/bin/sh", "-c", bootScript, "rexd-boot", mode}
	for _, b := range builds {
		for _, n := range b.unames {
			script = append(script, n+"="+b.entry, "sum="+n+"="+b.SHA256)
		}
	}
	script = append(script, extra...)
	if as != nil && as.root() {
		script = append(script, "become="+as.user, "bmode="+sudo.Mode(as.password != nil), "bprompt="+sudo.Prompt, "bready="+rootScript)
	}
	script = append(script, "version="+version.Version, "--")
	script = append(script, rexdArgs...)
	if as != nil && !as.root() {
		return command(append([]string{"exec", "sudo"}, sudo.Args(as.user, as.password != nil, script...)...)...)
	}
	return command(append([]string{"exec"}, script...)...)
}

// installScript installs the rexd build it reads on its standard input in
// one exec: as the login user (install), or as the become user through
// sudo after sudo's Ready line (installAs). It writes the build to a
// temporary file in $1, a version directory that bootScript's probe made
// (checked again here without following symlinks: a directory of this
// user with mode 0700), unpacking it with gzip when $3 is "gz", prints
// "rexd-sum HEX" of what it got and, when that is $2, makes it executable
// and renames it to $1/rexd atomically, then prints "rexd-installed STAT"
// (bootScript's stamp of it, for the fast path). Exit 6: the directory is not
// usable ("rexd-bad WHY DIR"); 7: no SHA-256 tool; 8: the copy is damaged;
// 9: no gzip (nothing read); 10: unpacking failed; 11: writing failed.
//
// With a fourth argument N, the build is the first N bytes of its input
// (head -c; exit 14 without a head that takes -c, as a small busybox
// lacks, before anything is read) and, once installed, the script goes on
// as the start of it: "rexd-exec PATH STAT", then it execs PATH --stdio
// --build-hash $2 with the arguments after N, on the same input. The
// client sends nothing more until it has read rexd-installed, so a head
// that reads ahead finds nothing to take. One exec installs and starts,
// where a second exec cost a channel, a shell and three round trips.
// Like bootScript it holds no single quote, no "!" and no newline.
const installScript = `d=$1; want=$2; z=${3-}; n=${4-}; if [ $# -ge 4 ]; then shift 4; else set --; fi; ` +
	`if [ -n "$n" ]; then head -c 1 < /dev/null > /dev/null 2>&1 || exit 14; rd() { head -c "$n"; }; else rd() { cat; }; fi; me=$(id -u); umask 077; ` +
	`if [ -L "$d" ]; then echo "rexd-bad symlink $d"; exit 6; fi; if [ -d "$d" ]; then :; else echo "rexd-bad create $d"; exit 6; fi; ` +
	`own() { set -- $(ls -ldn "$d" 2>/dev/null); if [ "$3" = "$me" ]; then :; else echo "rexd-bad notowned $d"; exit 6; fi; ` +
	`case $1 in drwx------*) ;; *) echo "rexd-bad mode $d"; exit 6;; esac; }; own; ` +
	`t=$d/.rexd.tmp.$$; if [ "$z" = gz ]; then command -v gzip >/dev/null 2>&1 || exit 9; rd | gzip -dc > "$t" || { rm -f "$t"; exit 10; }; ` +
	`else rd > "$t" || { rm -f "$t"; exit 11; }; fi; ` +
	`x=$(sha256sum < "$t" 2>/dev/null) || x=$(shasum -a 256 < "$t" 2>/dev/null) || { rm -f "$t"; exit 7; }; x=${x%% *}; echo "rexd-sum $x"; ` +
	`if [ "$x" = "$want" ]; then chmod 700 "$t" && mv -f "$t" "$d/rexd" || { rm -f "$t"; exit 11; }; ` +
	`s=$(stat -c %d:%i:%s:%Y:%Z "$d/rexd" 2>/dev/null || stat -f %d:%i:%z:%m:%c "$d/rexd" 2>/dev/null); echo "rexd-installed $s"; ` +
	`if [ -n "$n" ]; then echo "rexd-exec $d/rexd $s"; exec "$d/rexd" --stdio --build-hash "$want" "$@"; fi; exit 0; fi; rm -f "$t"; exit 8`

// Exit statuses of installScript (7 is exitNoSumTool).
const (
	exitInstallDir     = 6
	exitInstallDamaged = 8
	exitInstallNoGzip  = 9
	exitInstallUnpack  = 10
	exitInstallWrite   = 11
)

// header is what bootScript reported.
type header struct {
	exec     string   // rexd-exec: the cached rexd that was started
	stamp    string   // its stat (device:inode:size:mtime:ctime), when known
	verified []string // rexd-verified: rexds hashed on the target this time
	uname    string   // rexd-uname
	dir      string   // rexd-dir: the usable cache directory
	bad      []string // rexd-bad: "WHY DIR"
	cached   string   // rexd-cached
	version  string   // rexd-version
	found    []string // rexd-found
	removed  []string // rexd-removed
	sum      string   // rexd-sum
	gzip     bool     // rexd-gzip: the target can unpack a compressed upload
	// installed is the stat of the rexd installScript has just installed.
	installed string
	// badWhy[i] is why bad[i] failed, as the remote command said it
	// (rexd-badwhy after it), or "".
	badWhy []string
	// root is the root-owned copy rootScript ran (rexd-root); rootFail
	// says it found no directory safe for one (rexd-rootfail).
	root     string
	rootFail bool
}

// ran is the rexd that runs: root's own copy through sudo, else exec.
func (h header) ran() string {
	if h.root != "" {
		return h.root
	}
	return h.exec
}

// maxHeaderLines bounds what is kept of the script's report.
const maxHeaderLines = 256

// parseHeader reads the "rexd-KEY VALUE" lines of the remote scripts; the
// target is not trusted, so anything else is ignored.
func parseHeader(lines []string) header {
	var h header
	for i, l := range lines {
		if i >= maxHeaderLines {
			break
		}
		key, val, _ := strings.Cut(strings.TrimRight(l, "\r"), " ")
		switch key {
		case "rexd-exec":
			h.exec, h.stamp = cutLast(val)
		case "rexd-verified":
			f, _ := cutLast(val)
			h.verified = append(h.verified, f)
		case "rexd-uname":
			h.uname = val
		case "rexd-dir":
			h.dir = val
		case "rexd-bad":
			h.bad = append(h.bad, val)
			h.badWhy = append(h.badWhy, "")
		case "rexd-badwhy":
			if n := len(h.badWhy); n > 0 {
				h.badWhy[n-1] = val
			}
		case "rexd-root":
			h.root = val
		case "rexd-rootfail":
			h.rootFail = true
		case "rexd-cached":
			h.cached = val
		case "rexd-version":
			h.version = val
		case "rexd-found":
			h.found = append(h.found, val)
		case "rexd-removed":
			h.removed = append(h.removed, val)
		case "rexd-sum":
			h.sum = val
		case "rexd-installed":
			h.installed = val
		case "rexd-gzip":
			h.gzip = val == "yes"
		}
	}
	return h
}

// cutLast splits "PATH STAMP" at its last space (a path may hold spaces).
func cutLast(val string) (path, stamp string) {
	i := strings.LastIndexByte(val, ' ')
	if i < 0 {
		return val, ""
	}
	return val[:i], val[i+1:]
}

// describeBad turns the "WHY DIR" reports of h into words.
func describeBad(h header) string {
	var out []string
	for i, b := range h.bad {
		why, dir, _ := strings.Cut(b, " ")
		reason := ""
		if i < len(h.badWhy) {
			reason = h.badWhy[i]
		}
		switch why {
		case "create":
			if noSpace(reason) {
				out = append(out, dir+" cannot be created: no space left on its file system")
			} else {
				out = append(out, dir+" cannot be created"+because(reason))
			}
		case "parentowner":
			out = append(out, dir+", a parent of the cache directory, belongs to another user than root or this account")
		case "parentmode":
			out = append(out, dir+", a parent of the cache directory, is writable by other users and not sticky")
		case "damaged":
			out = append(out, dir+" is not the build rex carries")
		case "nosum":
			out = append(out, dir+" has neither sha256sum nor shasum to check a copy")
		case "readonly":
			out = append(out, dir+" is not writable"+because(reason))
		case "noexec":
			out = append(out, dir+" does not allow executing programs (noexec)")
		case "notowned":
			out = append(out, dir+" belongs to another user")
		case "symlink":
			out = append(out, dir+" is a symbolic link")
		case "mode":
			out = append(out, dir+" cannot be made private (mode 0700)")
		default:
			out = append(out, b)
		}
	}
	return strings.Join(out, ", ")
}

// because is " (reason)", or "" when the remote command gave none.
func because(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

// noSpace says whether a reason mkdir gave is a full disk (ENOSPC), or
// a quota used up (EDQUOT), as strerror spells them.
func noSpace(reason string) bool {
	r := strings.ToLower(reason)
	return strings.Contains(r, "no space left") || strings.Contains(r, "quota exceeded")
}

// spaceDirs are the directories of h.bad that could not be created for
// want of space.
func spaceDirs(h header) []string {
	var out []string
	for i, b := range h.bad {
		if why, dir, _ := strings.Cut(b, " "); why == "create" && i < len(h.badWhy) && noSpace(h.badWhy[i]) {
			out = append(out, dir)
		}
	}
	return out
}

// headerReader passes a remote session's stdout to the REXD client after
// taking off what comes before rexd's first JSON line: the "rexd-" lines of
// bootScript, and any noise a login shell prints (a chatty .bashrc).
type headerReader struct {
	r *bufio.Reader
	// src is r's source, read directly once the header is read and r's
	// buffer drained: the client reading this has a buffer of its own,
	// and a pooled connection would keep r's 64 KiB for nothing.
	src io.Reader

	mu    sync.Mutex
	done  bool
	lines []string
}

func newHeaderReader(r io.Reader) *headerReader {
	return &headerReader{r: bufio.NewReaderSize(r, 64<<10), src: r}
}

func (h *headerReader) Read(p []byte) (int, error) {
	if h.r == nil {
		return h.src.Read(p)
	}
	for !h.isDone() {
		peek, err := h.r.Peek(1)
		if len(peek) == 0 {
			h.finish()
			return 0, err
		}
		if peek[0] == '{' {
			h.finish()
			break
		}
		line, err := h.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			h.finish() // a line that long is not ours: let the client see it
			break
		}
		if l := strings.TrimSuffix(string(line), "\n"); strings.HasPrefix(l, "rexd-") {
			h.add(l)
		}
		if err != nil {
			h.finish()
			return 0, err
		}
	}
	if h.r.Buffered() == 0 {
		h.r = nil
		return h.src.Read(p)
	}
	return h.r.Read(p)
}

// headerLine reads one line before rexd speaks (the sudo handshake reads
// up to its Ready line so), keeping the "rexd-" ones as header lines.
// A line longer than the reader's buffer (64 KiB) is an error: no
// target's script or sudo prints one, and rex does not hold it.
func (h *headerReader) headerLine() (string, error) {
	b, err := h.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return "", fmt.Errorf("the remote shell printed a line of over %d bytes before rexd started", h.r.Size())
	}
	line := string(b)
	if l := strings.TrimSuffix(line, "\n"); strings.HasPrefix(l, "rexd-") {
		h.add(l)
	}
	return line, err
}

func (h *headerReader) isDone() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.done
}

func (h *headerReader) finish() {
	h.mu.Lock()
	h.done = true
	h.mu.Unlock()
}

func (h *headerReader) add(line string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.lines) < maxHeaderLines {
		h.lines = append(h.lines, line)
	} else {
		h.done = true
	}
}

func (h *headerReader) header() header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return parseHeader(h.lines)
}

// remoteExec is a command on an SSH session channel. Its exec request
// asks for a reply but nothing waits for it: the first write to the
// command's input does, and costs no round trip for it, because sshd opens
// a session channel's window only once the command runs and sends that
// window right before the reply. So what follows the exec (rexd's first
// requests) goes out in the same flight, as with OpenSSH's ssh, and a
// server that refuses the exec is heard at once instead of at the connect
// timeout.
type remoteExec struct {
	ch      ssh.Channel
	done    chan struct{} // closed when the channel has closed and stderr is read
	status  int           // exit status; -1 unknown; set before done closes
	started chan struct{} // closed when the exec request has its answer
	execErr error         // why the command did not start; set before started closes
	once    sync.Once
	// writing is held while input is written or its EOF sent:
	// x/crypto/ssh's channel reads its sent-EOF flag in Write with no lock
	// against CloseWrite. A channel, so that sending EOF can give up on a
	// write stuck on a full window (Close then closes the channel).
	writing chan struct{}
}

// errExecRefused: the server answered the exec request with a failure.
var errExecRefused = errors.New("the server refused to run the command")

// startExec opens a session channel and runs cmd there; stderr gets the
// command's standard error.
func startExec(client *ssh.Client, cmd string, stderr io.Writer) (*remoteExec, error) {
	ch, reqs, err := client.OpenChannel("session", nil)
	if err != nil {
		return nil, err
	}
	x := &remoteExec{ch: ch, done: make(chan struct{}), status: -1, writing: make(chan struct{}, 1)}
	errDone := make(chan struct{})
	go func() {
		io.Copy(stderr, ch.Stderr())
		close(errDone)
	}()
	go func() {
		status := -1
		for r := range reqs {
			switch r.Type {
			case "exit-status":
				if len(r.Payload) >= 4 {
					status = int(binary.BigEndian.Uint32(r.Payload))
				}
			case "exit-signal":
				if status < 0 {
					status = 128 // killed by a signal; which one is in the payload
				}
			}
			if r.WantReply {
				r.Reply(false, nil)
			}
		}
		<-errDone
		x.status = status
		close(x.done)
	}()
	x.started = make(chan struct{})
	go func() {
		ok, err := ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{cmd}))
		if err == nil && !ok {
			err = errExecRefused
		}
		x.execErr = err
		close(x.started)
		if err != nil {
			ch.Close()
		}
	}()
	return x, nil
}

// refused reports whether the server has refused to run the command.
func (x *remoteExec) refused() bool {
	select {
	case <-x.started:
		return errors.Is(x.execErr, errExecRefused)
	default:
		return false
	}
}

// write writes to the command's input once the command runs.
func (x *remoteExec) write(p []byte) (int, error) {
	<-x.started
	if x.execErr != nil {
		return 0, fmt.Errorf("start the remote command: %w", x.execErr)
	}
	x.writing <- struct{}{}
	defer func() { <-x.writing }()
	return x.ch.Write(p)
}

// closeWrite sends EOF on the command's input once no write is under way,
// or gives up after wait (the input stays open; closing the channel ends it).
func (x *remoteExec) closeWrite(wait time.Duration) error {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case x.writing <- struct{}{}:
		defer func() { <-x.writing }()
		return x.ch.CloseWrite()
	case <-t.C:
		return fmt.Errorf("close the remote command's input: a write to it has not ended within %s", wait)
	}
}

// Read reads the command's standard output.
func (x *remoteExec) Read(p []byte) (int, error) { return x.ch.Read(p) }

// Write writes to the command's standard input.
func (x *remoteExec) Write(p []byte) (int, error) { return x.write(p) }

// closeGrace is how long a remote rexd has to exit after its input closes.
const closeGrace = 3 * time.Second

// Close ends a remote rexd: close its input, give it closeGrace to exit
// (so its processes are stopped cleanly), then close the channel.
func (x *remoteExec) Close() error {
	x.once.Do(func() {
		x.closeWrite(closeGrace)
		select {
		case <-x.done:
		case <-time.After(closeGrace):
		}
		x.ch.Close()
	})
	return nil
}

// abort closes the channel at once: for a launch given up on (its context
// ended), where Close would first wait for a write stuck on the window.
func (x *remoteExec) abort() { x.ch.Close() }

// stdin is the command's input as a closer of its own: closing it sends
// EOF and leaves the output open.
func (x *remoteExec) stdin() io.WriteCloser { return execStdin{x} }

type execStdin struct{ x *remoteExec }

func (s execStdin) Write(p []byte) (int, error) { return s.x.write(p) }
func (s execStdin) Close() error                { return s.x.closeWrite(closeGrace) }

// sessionCloser ends a command on an x/crypto session (installAs) as
// remoteExec.Close does: close its input, give it closeGrace, then close
// the channel.
type sessionCloser struct {
	sess  *ssh.Session
	stdin io.Closer

	done    chan struct{}
	waitErr error
	once    sync.Once
}

func newSessionCloser(sess *ssh.Session, stdin io.Closer) *sessionCloser {
	s := &sessionCloser{sess: sess, stdin: stdin, done: make(chan struct{})}
	go func() {
		s.waitErr = sess.Wait()
		close(s.done)
	}()
	return s
}

func (s *sessionCloser) Close() error {
	s.once.Do(func() {
		s.stdin.Close()
		select {
		case <-s.done:
		case <-time.After(closeGrace):
		}
		s.sess.Close()
	})
	return nil
}

// exitStatus is the remote exit status, -1 if unknown (yet).
func (s *sessionCloser) exitStatus() int {
	select {
	case <-s.done:
	default:
		return -1
	}
	var ee *ssh.ExitError
	switch {
	case s.waitErr == nil:
		return 0
	case errors.As(s.waitErr, &ee):
		return ee.ExitStatus()
	}
	return -1
}

// exitStatus is the remote exit status, -1 if unknown (yet).
func (x *remoteExec) exitStatus() int {
	select {
	case <-x.done:
		return x.status
	default:
		return -1
	}
}

// run runs cmd on the target and returns its output and exit status; ctx
// ends it early by closing the channel.
func run(ctx context.Context, sc *ssh.Client, cmd string, stdin io.Reader) (stdout []byte, stderr string, status int, err error) {
	sess, err := sc.NewSession()
	if err != nil {
		return nil, "", -1, err
	}
	defer sess.Close()
	var out bytes.Buffer
	errBuf := &tailBuffer{max: 4096}
	sess.Stdout = &limitedBuffer{buf: &out, max: 1 << 20}
	sess.Stderr = errBuf
	sess.Stdin = stdin
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	defer stop()
	err = sess.Run(cmd)
	if ctx.Err() != nil {
		return nil, errBuf.String(), -1, ctx.Err()
	}
	var ee *ssh.ExitError
	if errors.As(err, &ee) {
		return out.Bytes(), errBuf.String(), ee.ExitStatus(), nil
	}
	if err != nil {
		return nil, errBuf.String(), -1, err
	}
	return out.Bytes(), errBuf.String(), 0, nil
}

func lines(b []byte) []string {
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

// limitedBuffer keeps the first max bytes written and drops the rest.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// tailBuffer keeps the last max bytes written (remote stderr, for errors).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// prefixWriter writes whole lines to w, each prefixed, so the stderr of
// many targets sharing one writer does not interleave mid-line.
type prefixWriter struct {
	w      io.Writer
	prefix string

	mu   sync.Mutex
	part []byte
}

// maxPartialLine flushes a line that never ends.
const maxPartialLine = 4096

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.part = append(p.part, b...)
	for {
		i := bytes.IndexByte(p.part, '\n')
		if i < 0 {
			if len(p.part) < maxPartialLine {
				return len(b), nil
			}
			i = len(p.part) - 1
		}
		line := append([]byte(p.prefix), p.part[:i+1]...)
		if line[len(line)-1] != '\n' {
			line = append(line, '\n')
		}
		p.part = p.part[i+1:]
		if _, err := p.w.Write(line); err != nil {
			return len(b), nil // diagnostics must not break the connection
		}
	}
}

// oneSentence folds remote stderr into a message tail.
func oneSentence(stderr string) string {
	s := strings.Join(strings.Fields(stderr), " ")
	if len(s) > 300 {
		s = s[len(s)-300:]
	}
	if s == "" {
		return ""
	}
	return fmt.Sprintf(" (remote said: %s)", s)
}
