// Command ab compares two builds of the sessionstore library on the bench
// workloads, side by side: it checks the two revisions out into temporary
// git worktrees, builds this bench harness (the same harness code for
// both) once against each library tree, then runs the workloads with the
// sessionstore peer only, old then new, for every workload in every
// round, and prints per workload and metric each side's median and
// spread and the ratio new/old as Markdown (-abba swaps the order in
// every second round). Run it through bench/ab; see
// README.md, "Comparing two builds".
//
//	bench/ab OLD NEW [-rounds N] [-only w1,w2,...] [-quick] [-reps R] [-dir D]
package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

const (
	libModule   = "github.com/sessionstore/sessionstore"
	benchModule = "github.com/sessionstore/sessionstore/bench"
	// defaultWorkloads are the ones the restructuring issue names.
	defaultWorkloads = "append300,append300-16w,tool64k,openload,list"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ab:", err)
		if errors.Is(err, context.Canceled) {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

// side is one of the two builds compared.
type side struct {
	name   string // "old" or "new"
	rev    string // as given
	commit string // full hash; for the working tree, HEAD's
	desc   string // for the report
	lib    string // library source tree (absolute)
	bin    string // bench binary built against lib
}

// worktreeRevs name the working tree as it is, uncommitted changes
// included, instead of a commit.
var worktreeRevs = []string{".", "WORKTREE"}

func run() error {
	fs := flag.NewFlagSet("ab", flag.ContinueOnError)
	var (
		rounds  = fs.Int("rounds", 5, "rounds; each runs every workload with the old build, then the new")
		only    = fs.String("only", defaultWorkloads, "comma-separated bench workloads")
		quick   = fs.Bool("quick", false, "pass -quick to bench: small sizes (figures for trying the tool, not for quoting)")
		reps    = fs.Int("reps", 1, "bench -reps of each run (all repetitions count as samples)")
		dir     = fs.String("dir", os.TempDir(), "parent of the temporary directory (worktrees, binaries, bench scratch): the disk measured")
		abba    = fs.Bool("abba", false, "even rounds run new, then old (old new, new old, old new, ...), so a bias of the second run of a pair cancels out")
		harness = fs.String("harness", ".", "the bench module whose code is built for both sides (bench/ab passes its own directory)")
	)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: bench/ab OLD NEW [flags]\n\nOLD and NEW are git revisions, or . (or WORKTREE) for the working tree as it is.\n\n")
		fs.PrintDefaults()
	}
	// Flags may come before, between or after the two revisions.
	var revs []string
	args := os.Args[1:]
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		revs = append(revs, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(revs) != 2 {
		fs.Usage()
		return fmt.Errorf("want two revisions, OLD and NEW, got %q", revs)
	}
	if *rounds < 1 || *reps < 1 {
		return errors.New("-rounds and -reps must be at least 1")
	}
	workloads := strings.Split(*only, ",")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()

	hdir, err := filepath.Abs(*harness)
	if err != nil {
		return err
	}
	if b, err := os.ReadFile(filepath.Join(hdir, "go.mod")); err != nil || !bytes.Contains(b, []byte("module "+benchModule+"\n")) {
		return fmt.Errorf("-harness %s: not the bench module (%s)", hdir, benchModule)
	}
	root, err := git(ctx, hdir, "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(*dir, "sessionstore-ab-")
	if err != nil {
		return err
	}
	var worktrees []string
	defer func() {
		// Not ctx: it may be cancelled already, and the cleanup must run.
		for _, wt := range worktrees {
			out, err := exec.Command("git", "-C", root, "worktree", "remove", "--force", wt).CombinedOutput()
			if _, serr := os.Stat(wt); err != nil && serr == nil {
				fmt.Fprintf(os.Stderr, "ab: git worktree remove %s: %v: %s", wt, err, out)
			}
		}
		os.RemoveAll(tmp)
		if len(worktrees) > 0 {
			// Drops the record of a worktree whose add was interrupted.
			_ = exec.Command("git", "-C", root, "worktree", "prune").Run()
		}
	}()

	sides := []*side{{name: "old", rev: revs[0]}, {name: "new", rev: revs[1]}}
	for _, s := range sides {
		if slices.Contains(worktreeRevs, s.rev) {
			s.lib = root
			if s.commit, err = git(ctx, root, "rev-parse", "HEAD"); err != nil {
				return err
			}
			s.desc = "the working tree at " + s.commit[:7]
			// Changes under bench/ are the harness's, not the library's.
			if st, _ := git(ctx, root, "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench"); st != "" {
				s.desc += " plus uncommitted changes"
			}
			continue
		}
		if s.commit, err = git(ctx, root, "rev-parse", "--verify", "--end-of-options", s.rev+"^{commit}"); err != nil {
			return fmt.Errorf("revision %q: %w", s.rev, err)
		}
		subject, _ := git(ctx, root, "log", "-1", "--format=%s", s.commit)
		if len(subject) > 72 {
			subject = subject[:69] + "..."
		}
		s.desc = fmt.Sprintf("%s = %s (%s)", s.rev, s.commit[:7], subject)
		s.lib = filepath.Join(tmp, "lib-"+s.name+"-"+s.commit[:7])
		fmt.Fprintf(os.Stderr, "ab: worktree of %s (%s) in %s\n", s.rev, s.commit[:7], s.lib)
		worktrees = append(worktrees, s.lib)
		if _, err := git(ctx, root, "worktree", "add", "--detach", "--quiet", s.lib, s.commit); err != nil {
			return err
		}
	}
	hrev, _ := git(ctx, root, "rev-parse", "--short", "HEAD")
	hdesc := fmt.Sprintf("%s at %s", hdir, hrev)
	if st, _ := git(ctx, hdir, "status", "--porcelain", "--untracked-files=no", "--", "."); st != "" {
		hdesc += " plus uncommitted changes"
	}
	for _, s := range sides {
		if err := build(ctx, hdir, tmp, s); err != nil {
			return err
		}
	}

	// Everything a bench run writes goes under tmp, which is removed even
	// when a run is killed half-way.
	scratch := filepath.Join(tmp, "scratch")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return err
	}
	transcript := filepath.Join(root, "testdata", "transcripts", "recorded-session.jsonl")
	var (
		rows    []string                         // row keys, in the order first seen
		meta    = map[string]jsonRow{}           // by key
		samples = map[string][2][]float64{}      // by key: old, new (every repetition)
		perRun  = map[string][][2]float64{}      // by key: per round, each side's median
		load    []float64                        // other processes' CPU share, per run
		cur     = map[string]map[int][]float64{} // key -> side -> this round's values
	)
	for round := 1; round <= *rounds; round++ {
		for _, w := range workloads {
			clear(cur)
			order := []int{0, 1}
			if *abba && round%2 == 0 {
				order = []int{1, 0}
			}
			for _, si := range order {
				s := sides[si]
				rep, wall, err := runBench(ctx, s, tmp, scratch, transcript, w, *quick, *reps)
				if err != nil {
					return fmt.Errorf("round %d, %s, %s build: %w", round, w, s.name, err)
				}
				var figs []string
				for _, r := range rep.Rows {
					vs := r.Values[r.Subject]
					if len(vs) == 0 {
						continue
					}
					if _, ok := meta[r.Key]; !ok {
						rows = append(rows, r.Key)
						meta[r.Key] = r
					}
					sm := samples[r.Key]
					sm[si] = append(sm[si], vs...)
					samples[r.Key] = sm
					if cur[r.Key] == nil {
						cur[r.Key] = map[int][]float64{}
					}
					cur[r.Key][si] = vs
					figs = append(figs, fmt.Sprintf("%s %s %s", metric(r.Key), format(median(vs)), r.Unit))
				}
				others := "?"
				for _, l := range rep.Load {
					if l.OthersCPU >= 0 {
						load = append(load, l.OthersCPU)
						others = fmt.Sprintf("%.0f%%", 100*l.OthersCPU)
					}
				}
				fmt.Fprintf(os.Stderr, "round %d/%d  %-14s %s  %s  (%.1fs, other processes %s of the CPUs)\n",
					round, *rounds, w, s.name, strings.Join(figs, ", "), wall.Seconds(), others)
			}
			for key, m := range cur {
				if len(m[0]) > 0 && len(m[1]) > 0 {
					perRun[key] = append(perRun[key], [2]float64{median(m[0]), median(m[1])})
				}
			}
		}
	}

	w := os.Stdout
	mode := "full sizes"
	if *quick {
		mode = "**quick sizes** (-quick: not for quoting)"
	}
	fmt.Fprintf(w, "## bench/ab: old against new build of the library\n\n")
	fmt.Fprintf(w, "- old: %s\n- new: %s\n", sides[0].desc, sides[1].desc)
	fmt.Fprintf(w, "- harness: the same bench code for both sides (%s), built against each library tree\n", hdesc)
	order := "with the old build, then the new"
	if *abba {
		order = "with both builds, old first in odd rounds and new first in even ones (-abba)"
	}
	fmt.Fprintf(w, "- %d round(s); each round runs every workload %s (`-peers sessionstore -reps %d`, %s); %s in all\n", *rounds, order, *reps, mode, time.Since(started).Round(time.Second))
	fmt.Fprintf(w, "- %s, %s/%s, %d CPUs", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	if len(load) > 0 {
		fmt.Fprintf(w, "; other processes' CPU during the runs: median %.0f%%, max %.0f%%", 100*median(load), 100*slices.Max(load))
	}
	fmt.Fprintf(w, "\n\n")
	fmt.Fprintf(w, "Medians and spreads (min-max) are over all %d runs of a side. new/old is the ratio of the medians: above 1 means new is higher (for throughput, faster), below 1 lower (for time, faster). The per-round column is the spread of new/old within each round (both runs back to back); \"new better\" counts the rounds where new beat old.\n\n", *rounds**reps)
	fmt.Fprintln(w, "| workload | metric | better | old median | old min-max | new median | new min-max | new/old | per-round new/old | new better |")
	fmt.Fprintln(w, "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, key := range rows {
		r := meta[key]
		sm := samples[key]
		if len(sm[0]) == 0 || len(sm[1]) == 0 {
			continue
		}
		better := "lower"
		if r.Higher {
			better = "higher"
		}
		om, nm := median(sm[0]), median(sm[1])
		var ratios []float64
		wins := 0
		for _, p := range perRun[key] {
			if p[0] != 0 {
				ratios = append(ratios, p[1]/p[0])
			}
			if (r.Higher && p[1] > p[0]) || (!r.Higher && p[1] < p[0]) {
				wins++
			}
		}
		ratio, spread := "—", "—"
		if om != 0 {
			ratio = fmt.Sprintf("**%.3f**", nm/om)
		}
		if len(ratios) > 0 {
			spread = fmt.Sprintf("%.3f-%.3f", slices.Min(ratios), slices.Max(ratios))
		}
		wl, _, _ := strings.Cut(key, "/")
		fmt.Fprintf(w, "| %s | %s (%s) | %s | %s | %s-%s | %s | %s-%s | %s | %s | %d/%d |\n",
			wl, metric(key), r.Unit, better,
			format(om), format(slices.Min(sm[0])), format(slices.Max(sm[0])),
			format(nm), format(slices.Min(sm[1])), format(slices.Max(sm[1])),
			ratio, spread, wins, len(perRun[key]))
	}
	fmt.Fprintln(w)
	seen := map[string]bool{}
	for _, key := range rows {
		wl, _, _ := strings.Cut(key, "/")
		if seen[wl] {
			continue
		}
		seen[wl] = true
		t := meta[key].Title
		for _, suf := range []string{": throughput", ": p50 latency", ": p99 latency"} {
			t = strings.TrimSuffix(t, suf)
		}
		fmt.Fprintf(w, "- `%s`: %s\n", wl, t)
	}
	return nil
}

// build compiles the harness in hdir against s.lib: a copy of the
// harness's go.mod (and go.sum) whose replace directive points at s.lib,
// given to go build with -modfile, so the harness sources and every build
// flag are the same for both sides. It checks in the binary's build
// information that the library came from s.lib.
func build(ctx context.Context, hdir, tmp string, s *side) error {
	mod := filepath.Join(tmp, s.name+".mod")
	if err := copyFile(filepath.Join(hdir, "go.mod"), mod); err != nil {
		return err
	}
	if err := copyFile(filepath.Join(hdir, "go.sum"), strings.TrimSuffix(mod, ".mod")+".sum"); err != nil {
		return err
	}
	if err := goCmd(ctx, hdir, "mod", "edit", "-replace="+libModule+"="+s.lib, mod); err != nil {
		return err
	}
	s.bin = filepath.Join(tmp, "bench-"+s.name)
	fmt.Fprintf(os.Stderr, "ab: building the %s side against %s\n", s.name, s.lib)
	// -mod=mod: an older library may require other versions than the
	// harness's go.mod lists; only the copy is updated.
	if err := goCmd(ctx, hdir, "build", "-modfile="+mod, "-mod=mod", "-o", s.bin, "."); err != nil {
		return err
	}
	bi, err := buildinfo.ReadFile(s.bin)
	if err != nil {
		return err
	}
	for _, d := range bi.Deps {
		if d.Path == libModule {
			if d.Replace == nil || d.Replace.Path != s.lib {
				return fmt.Errorf("%s: built with %s from %+v, want %s", s.bin, libModule, d.Replace, s.lib)
			}
			return nil
		}
	}
	return fmt.Errorf("%s: no %s in its build information", s.bin, libModule)
}

// runBench runs one bench invocation of workload w with the sessionstore
// peer only and decodes its -json output.
func runBench(ctx context.Context, s *side, tmp, scratch, transcript, w string, quick bool, reps int) (jsonReport, time.Duration, error) {
	var rep jsonReport
	out := filepath.Join(tmp, "result.json")
	os.Remove(out)
	args := []string{"-only", w, "-peers", "sessionstore", "-reps", fmt.Sprint(reps), "-dir", scratch, "-json", out, "-transcript", transcript}
	if quick {
		args = append(args, "-quick")
	}
	cmd := exec.CommandContext(ctx, s.bin, args...)
	// bench names the library commit with git -C ..; from the side's own
	// bench/ that is the side's tree.
	cmd.Dir = filepath.Join(s.lib, "bench")
	if _, err := os.Stat(cmd.Dir); err != nil {
		cmd.Dir = s.lib
	}
	var stderr bytes.Buffer
	cmd.Stdout = io.Discard // the Markdown report; the JSON is what is read
	cmd.Stderr = &stderr
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return rep, 0, ctx.Err()
		}
		return rep, 0, fmt.Errorf("%s %s: %w\n%s", s.bin, strings.Join(args, " "), err, stderr.Bytes())
	}
	wall := time.Since(t0)
	b, err := os.ReadFile(out)
	if err != nil {
		return rep, 0, err
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return rep, 0, fmt.Errorf("%s: %w", out, err)
	}
	return rep, wall, nil
}

// jsonReport is the part of bench's -json output read here (jsonReport
// in ../../results.go).
type jsonReport struct {
	Rows []jsonRow `json:"rows"`
	Load []struct {
		OthersCPU float64 `json:"others_cpu"`
	} `json:"load"`
}

type jsonRow struct {
	Key     string               `json:"key"`
	Title   string               `json:"title"`
	Unit    string               `json:"unit"`
	Higher  bool                 `json:"higher"`
	Subject string               `json:"subject"`
	Values  map[string][]float64 `json:"values"`
}

// metric names a row by its key's second part.
func metric(key string) string {
	_, m, _ := strings.Cut(key, "/")
	switch m {
	case "rate":
		return "throughput"
	case "p50":
		return "p50 latency"
	case "p99":
		return "p99 latency"
	case "ms":
		return "time"
	}
	return m
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return strings.TrimSpace(string(out)), nil
}

func goCmd(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// format prints v with about three significant digits and thousands
// separators, as bench's report does.
func format(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 1000:
		s := fmt.Sprint(int64(math.Round(a)))
		var b strings.Builder
		if v < 0 {
			b.WriteByte('-')
		}
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(c)
		}
		return b.String()
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}
