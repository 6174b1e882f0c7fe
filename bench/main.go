// Command bench compares sessionstore with the stores a harness would
// otherwise pick (SQLite, bbolt, a plain JSONL file) and with a raw floor
// (lines written into a preallocated file and fdatasynced, group-committed)
// on the same disk in one run,
// alternating the peers inside each repetition, and prints medians and
// ratios as Markdown. See README.md.
//
//	cd bench && go run . -out results.md   # full run
//	cd bench && go run . -quick            # every workload, small sizes, about a minute
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	sqlite "modernc.org/sqlite"
)

// sqliteSync names the system call SQLite commits with, for the report.
var sqliteSync = "fdatasync"

func main() {
	if len(os.Args) == 3 && os.Args[1] == childCommand {
		if err := childMain(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		quick      = flag.Bool("quick", false, "every workload with small sizes and 2 repetitions (under two minutes), for CI")
		out        = flag.String("out", "", "also write the Markdown report to this file")
		jsonOut    = flag.String("json", "", "also write the results as JSON to this `file` (every value per peer and repetition; see README.md)")
		reps       = flag.Int("reps", 0, "repetitions (default 5, or 2 with -quick)")
		dir        = flag.String("dir", os.TempDir(), "parent of the scratch directory (put it on the disk you want measured)")
		keep       = flag.Bool("keep", false, "keep the scratch directory")
		only       = flag.String("only", "", "comma-separated workloads to run (default all): "+workloadNames())
		peersFlag  = flag.String("peers", "", "comma-separated peers to run (default all): "+peerNames())
		cpuprofile = flag.String("cpuprofile", "", "write a CPU profile of this process to `file` (timed sections labelled timed=<workload>/<peer>); fresh-process workloads write <file>.<workload>.pprof of their sessionstore side")
		loops      = flag.Int("profile-loops", 30, "with -cpuprofile, how many times a profiled child repeats its operation")
		transcript = flag.String("transcript", "../testdata/transcripts/recorded-session.jsonl", "the recorded transcript for the disk workload")
		realDir    = flag.String("transcripts", "", "directory of the shared real Claude Code transcripts for the disk-real workload (every non-empty *.jsonl under it); default: claude-code under $SESSIONSTORE_SHARED_DATA, ../../shared/data (from bench/) or /work/shared/data, the first that exists")
		fdatasync  = flag.Bool("sqlite-fdatasync", true, "SQLite commits with fdatasync(2), as the C SQLite of Linux distributions does; false keeps modernc.org/sqlite's default, fsync(2)")
	)
	flag.Parse()
	if _, err := sqlite.Fdatasync(*fdatasync); err != nil {
		return err
	}
	sqliteSync = "fsync"
	if *fdatasync {
		sqliteSync = "fdatasync"
	}
	if flag.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	started := time.Now()
	sz := fullSizes()
	if *quick {
		sz = quickSizes()
	}
	if *reps == 0 {
		*reps = 5
		if *quick {
			*reps = 2
		}
	}
	peers, err := selectPeers(*peersFlag)
	if err != nil {
		return err
	}
	wls, err := selectWorkloads(*only)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	scratch, err := os.MkdirTemp(*dir, "sessionstore-bench-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(scratch)
	}
	e := &env{
		ctx: context.Background(), scratch: scratch, peers: peers, reps: *reps, sz: sz, res: newResults(),
		exe: exe, loops: *loops, transcript: *transcript, transcripts: transcriptsDir(*realDir),
		logf: func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) },
	}
	if *cpuprofile != "" {
		stop, err := startCPUProfile(*cpuprofile)
		if err != nil {
			return err
		}
		defer stop()
		e.cpuprofile = *cpuprofile
	}
	mach := describeMachine(scratch)
	e.logf("bench: %d repetitions, %s sizes, scratch %s (%s)", e.reps, map[bool]string{true: "quick", false: "full"}[*quick], scratch, mach.FS)
	for _, w := range wls {
		t0 := time.Now()
		e.logf("%s ...", w.name)
		before := sampleLoad()
		if err := w.run(e); err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		lr := loadBetween(w.name, before, sampleLoad(), mach.Cores)
		e.load = append(e.load, lr)
		e.logf("%s done in %s (other processes: %s of the CPUs)", w.name, time.Since(t0).Round(100*time.Millisecond), percent(lr.othersCPU))
	}
	var buf bytes.Buffer
	writeReport(&buf, e, mach, *quick, time.Since(started))
	os.Stdout.Write(buf.Bytes())
	if *out != "" {
		if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if *jsonOut != "" {
		if err := writeJSON(*jsonOut, e, *quick); err != nil {
			return err
		}
	}
	e.logf("bench: done in %s", time.Since(started).Round(time.Second))
	return nil
}

func workloadNames() string {
	var names []string
	for _, w := range workloads {
		names = append(names, w.name)
	}
	return strings.Join(names, ", ")
}

func peerNames() string {
	var names []string
	for _, p := range allPeers() {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

func selectWorkloads(only string) ([]workload, error) {
	if only == "" {
		return workloads, nil
	}
	var out []workload
	for _, name := range strings.Split(only, ",") {
		i := slices.IndexFunc(workloads, func(w workload) bool { return w.name == name })
		if i < 0 {
			return nil, fmt.Errorf("no workload %q (have %s)", name, workloadNames())
		}
		out = append(out, workloads[i])
	}
	return out, nil
}

func selectPeers(list string) ([]Peer, error) {
	all := allPeers()
	if list == "" {
		return all, nil
	}
	want := strings.Split(list, ",")
	for _, name := range want {
		if !slices.ContainsFunc(all, func(p Peer) bool { return p.Name == name }) {
			return nil, fmt.Errorf("no peer %q (have %s)", name, peerNames())
		}
	}
	var out []Peer
	for _, p := range all { // keep the canonical order, subject first
		if slices.Contains(want, p.Name) {
			out = append(out, p)
		}
	}
	return out, nil
}

// writeReport writes the Markdown report.
func writeReport(w io.Writer, e *env, m machine, quick bool, elapsed time.Duration) {
	mode := "full sizes"
	if quick {
		mode = "**quick sizes** (-quick: for CI, not for quoting)"
	}
	fmt.Fprintf(w, "## Results %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "- command: `cd bench && go run .%s` (%d repetitions, %s), %s in all\n", commandArgs(), e.reps, mode, elapsed.Round(time.Second))
	fmt.Fprintf(w, "- machine: %d cores (%s), %s RAM, %s\n", m.Cores, m.CPU, m.Memory, m.Kernel)
	fmt.Fprintf(w, "- file system of the scratch directory: %s\n", m.FS)
	fmt.Fprintf(w, "- Go: %s; SQLite commits with %s\n", m.Go, sqliteSync)
	if rev := libraryRevision(); rev != "" {
		fmt.Fprintf(w, "- library: %s\n", rev)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Each cell is the median over repetitions; the peers ran one after another inside each repetition. In a peer's cell, the figure in brackets is sessionstore / peer: the median of the per-repetition ratios (each pair measured back to back). For throughput, above 1 means sessionstore is faster; for time, bytes and memory, below 1 means sessionstore uses less. — means the peer does not take part in that workload.\n\n")
	e.res.writeTable(w, e.peers)
	fmt.Fprintf(w, "\n### Targets (sessionstore / peer, same run)\n\n")
	e.res.writeTargets(w)
	if len(e.res.details) > 0 {
		fmt.Fprintf(w, "\n### Details\n\n")
		for _, d := range e.res.details {
			fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(d))
		}
	}
	if len(e.load) > 0 {
		fmt.Fprintf(w, "### Load on the machine during the run\n\n")
		fmt.Fprintf(w, "Other processes' CPU is the CPU time all processes used (from /proc/stat, without idle, iowait and steal) less this run's own and its child processes', as a share of all %d cores (kernel threads count as others, including the writeback and ext4 journal work this run causes); steal is time the hypervisor gave to other guests. The disk's load is not measured: the ext4 root is shared with the other processes, whose syncs queue with this run's. The load average counts this run's threads blocked in fdatasync too.\n\n", m.Cores)
		fmt.Fprintf(w, "| workload | wall | other processes' CPU | steal | load average (1 min) at the end |\n| --- | ---: | ---: | ---: | ---: |\n")
		for _, l := range e.load {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", l.name, l.wall.Round(100*time.Millisecond), percent(l.othersCPU), percent(l.steal), l.loadavg)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "<details><summary>Per-repetition values</summary>\n\n| workload | peer | values |\n| --- | --- | --- |\n")
	for _, r := range e.res.rows {
		for _, p := range append(slices.Clone(e.peers), sessionstore64k) {
			vals := r.vals[p.Name]
			if len(vals) == 0 {
				continue
			}
			var s []string
			for rep := range e.reps {
				if v, ok := vals[rep]; ok {
					s = append(s, format(v))
				}
			}
			fmt.Fprintf(w, "| %s (%s) | %s | %s |\n", r.title, r.unit, p.Name, strings.Join(s, ", "))
		}
	}
	fmt.Fprintf(w, "\n</details>\n")
}

// percent formats a share; a negative one is unknown.
func percent(v float64) string {
	if v < 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f%%", 100*v)
}

func commandArgs() string {
	var b strings.Builder
	for _, a := range os.Args[1:] {
		b.WriteString(" " + a)
	}
	return b.String()
}

// libraryRevision describes the sessionstore source measured (the module
// is replaced by ../): its commit and whether the tree outside bench/ had
// changes. It
// runs read-only git commands and returns "" without git.
func libraryRevision() string {
	rev, err := exec.Command("git", "-C", "..", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	s := "commit " + strings.TrimSpace(string(rev))
	// Changes under bench/ are this harness's, not the library's.
	if st, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		s += " plus uncommitted changes"
	}
	return s
}

// transcriptsDir is the -transcripts flag, or when it is empty the first
// of the places the shared data is kept that exists (as the package's
// tests look for it); if none does, the first candidate, so that the
// disk-real workload fails naming it.
func transcriptsDir(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	var candidates []string
	if env := os.Getenv("SESSIONSTORE_SHARED_DATA"); env != "" {
		candidates = append(candidates, filepath.Join(env, "claude-code"))
	}
	candidates = append(candidates, filepath.Join("..", "..", "shared", "data", "claude-code"), "/work/shared/data/claude-code")
	for _, dir := range candidates {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir
		}
	}
	return candidates[0]
}
