package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// sizes are the workload sizes; -quick shrinks them, never drops a
// workload.
type sizes struct {
	Append300    int   // events per repetition and peer, one writer
	Concurrent   int   // events per repetition and peer, all writers together
	Writers      int   // concurrent writers
	Tool         int   // tool results per repetition and peer, per size
	Trunk        int   // open+load fixture: trunk events
	Branches     int   // branches forking from the trunk's last event
	BranchLen    int   // events per branch
	Every        int   // in the second open+load fixture every Every-th event is a 16 KiB tool result
	ListSessions int   // sessions to list
	ListIters    int   // open+list per repetition and peer (median taken)
	Turns        int   // turns of the synthetic coding session (disk workload)
	TreeBytes    int64 // tool-result bytes of the tree-heap session
	TreeEvents   int   // events of the tree-heap session
}

func fullSizes() sizes {
	return sizes{Append300: 1000, Concurrent: 3200, Writers: 16, Tool: 300, Trunk: 1000, Branches: 10, BranchLen: 10000, Every: 20,
		ListSessions: 1000, ListIters: 5, Turns: 600, TreeBytes: 1 << 30, TreeEvents: 10000}
}

func quickSizes() sizes {
	return sizes{Append300: 100, Concurrent: 320, Writers: 16, Tool: 40, Trunk: 100, Branches: 10, BranchLen: 1000, Every: 20,
		ListSessions: 200, ListIters: 3, Turns: 40, TreeBytes: 32 << 20, TreeEvents: 1000}
}

// env is what every workload needs.
type env struct {
	ctx        context.Context
	scratch    string
	peers      []Peer // selected peers, subject first
	reps       int
	sz         sizes
	res        *results
	exe        string // this binary, for fresh-process measurements
	cpuprofile string // prefix of child profiles; "" when not profiling
	loops      int    // repetitions inside a profiled child
	transcript string
	logf       func(format string, args ...any)
	seq        int
	load       []loadRow // per workload run, in order
}

// freshDir creates a new, empty directory under the scratch directory.
func (e *env) freshDir(parts ...string) (string, error) {
	e.seq++
	dir := filepath.Join(append([]string{e.scratch}, append(parts, fmt.Sprint(e.seq))...)...)
	return dir, os.MkdirAll(dir, 0o700)
}

func (e *env) writers() []Peer {
	var out []Peer
	for _, p := range e.peers {
		if p.Writes {
			out = append(out, p)
		}
	}
	return out
}

func (e *env) readers() []Peer {
	var out []Peer
	for _, p := range e.peers {
		if p.Reads {
			out = append(out, p)
		}
	}
	return out
}

func (e *env) has(name string) bool {
	return slices.ContainsFunc(e.peers, func(p Peer) bool { return p.Name == name })
}

// timed runs fn with the pprof label timed=<label>, so a CPU profile of the
// whole run can be narrowed to one workload and peer
// (go tool pprof -tagfocus=timed=<workload>/<peer>).
func timed(ctx context.Context, label string, fn func(context.Context)) {
	pprof.Do(ctx, pprof.Labels("timed", label), fn)
}

// workload is one of the measured workloads.
type workload struct {
	name string
	run  func(e *env) error
}

var workloads = []workload{
	{"append300", func(e *env) error {
		return e.appendWorkload("append300", "durable append 300 B, 1 writer", 1, 1, e.sz.Append300, constEvents(message300(), e.sz.Append300))
	}},
	{"append300-16w", func(e *env) error {
		return e.appendWorkload("append300-16w", fmt.Sprintf("durable append 300 B, %d writers, one session", e.sz.Writers), e.sz.Writers, 1, e.sz.Concurrent, constEvents(message300(), e.sz.Concurrent))
	}},
	{"append300-16s", func(e *env) error {
		return e.appendWorkload("append300-16s", fmt.Sprintf("durable append 300 B, %d writers, one session each", e.sz.Writers), e.sz.Writers, e.sz.Writers, e.sz.Concurrent, constEvents(message300(), e.sz.Concurrent))
	}},
	{"tool16k", func(e *env) error {
		return e.appendWorkload("tool16k", "durable append of a 16 KiB tool result", 1, 1, e.sz.Tool, toolEvents(16<<10, e.sz.Tool))
	}},
	{"tool64k", func(e *env) error {
		return e.appendWorkload("tool64k", "durable append of a 64 KiB tool result", 1, 1, e.sz.Tool, toolEvents(64<<10, e.sz.Tool))
	}},
	{"openload", func(e *env) error { return e.openLoad("openload", 0) }},
	{"openload16k", func(e *env) error { return e.openLoad("openload16k", e.sz.Every) }},
	{"list", (*env).list},
	{"disk", (*env).disk},
	{"treeheap", (*env).treeHeap},
}

func constEvents(ev Event, n int) []Event {
	out := make([]Event, n)
	for i := range out {
		out[i] = ev
	}
	return out
}

// toolEvents returns n distinct tool results of size bytes of output.
func toolEvents(size, n int) []Event {
	base := toolOutput(uint64(size), size)
	out := make([]Event, n)
	for i := range out {
		out[i] = toolResult(base, i)
	}
	return out
}

// appendWorkload: per repetition and writing peer, a new store with
// `sessions` sessions, one untimed warm-up append per session, then
// `writers` goroutines appending evs (split evenly, writer w to session
// w % sessions), each append timed. Throughput is len(evs) / wall time.
func (e *env) appendWorkload(key, title string, writers, sessions, n int, evs []Event) error {
	rate := e.res.row(key+"/rate", title+": throughput", "appends/s", true, "sessionstore")
	p99 := e.res.row(key+"/p99", title+": p99 latency", "ms", false, "sessionstore")
	per := n / writers
	warm := message300()
	// What the appends will write, for a store that prepares (the raw
	// floor preallocates it, untimed).
	prepBytes := int64(sessions) * int64(len(warm.Payload)+rawLineOverhead)
	for _, ev := range evs {
		prepBytes += int64(len(ev.Payload) + rawLineOverhead)
	}
	for rep := range e.reps {
		for _, p := range e.writers() {
			dir, err := e.freshDir(key, p.Name)
			if err != nil {
				return err
			}
			st, err := p.Open(dir)
			if err != nil {
				return fmt.Errorf("%s: open: %w", p.Name, err)
			}
			if pr, ok := st.(appendPreparer); ok {
				if err := pr.PrepareAppends(writers, prepBytes); err != nil {
					return fmt.Errorf("%s: %w", p.Name, err)
				}
			}
			ids := make([]uuid.UUID, sessions)
			for i := range ids {
				if ids[i], err = st.Create(e.ctx, fmt.Sprintf("bench %d", i)); err != nil {
					return fmt.Errorf("%s: create: %w", p.Name, err)
				}
				if _, err := st.Append(e.ctx, ids[i], warm); err != nil {
					return fmt.Errorf("%s: append: %w", p.Name, err)
				}
			}
			lats := make([][]time.Duration, writers)
			var (
				mu   sync.Mutex
				errs []error
			)
			start := time.Now()
			timed(e.ctx, key+"/"+p.Name, func(ctx context.Context) {
				var wg sync.WaitGroup
				for w := range writers {
					wg.Go(func() {
						sid := ids[w%sessions]
						lat := make([]time.Duration, 0, per)
						for _, ev := range evs[w*per : (w+1)*per] {
							t0 := time.Now()
							if _, err := st.Append(ctx, sid, ev); err != nil {
								mu.Lock()
								errs = append(errs, err)
								mu.Unlock()
								return
							}
							lat = append(lat, time.Since(t0))
						}
						lats[w] = lat
					})
				}
				wg.Wait()
			})
			wall := time.Since(start)
			if err := errors.Join(append(errs, st.Close())...); err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
			var all []float64
			for _, l := range lats {
				for _, d := range l {
					all = append(all, float64(d.Nanoseconds())/1e6)
				}
			}
			slices.Sort(all)
			rate.set(p.Name, rep, float64(per*writers)/wall.Seconds())
			p99.set(p.Name, rep, percentile(all, 99))
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
		}
	}
	return nil
}

// fixture is a session built once per peer, read in the repetitions.
type fixture struct {
	dir     string
	session uuid.UUID
	expect  int
	head    uuid.UUID // the newest event
	hash    string    // openload: payloadHash of the active path, root to HEAD, as appended
	payload int64     // tree: payload bytes of all the events appended
}

// appendChain appends n events made by gen (given a running index),
// each a child of the one before, in batches, and returns the last id.
func appendChain(ctx context.Context, st Store, sid uuid.UUID, n int, next *int, batch int, gen func(i int) Event) (uuid.UUID, error) {
	var last uuid.UUID
	for n > 0 {
		k := min(n, batch)
		evs := make([]Event, k)
		for j := range evs {
			evs[j] = gen(*next)
			*next++
		}
		ids, err := st.AppendBatch(ctx, sid, evs)
		if err != nil {
			return last, err
		}
		last = ids[len(ids)-1]
		n -= k
	}
	return last, nil
}

// openLoad: a session of Trunk events and Branches branches of BranchLen
// events forking from the trunk's last event, HEAD on the last branch
// (built with AppendBatch in batches of 500: one durable transaction or
// write per batch). Each repetition opens it in a new process of this
// binary and loads the active path (Trunk + BranchLen events), timed
// inside the child from before Open to after Load. The page cache is not
// dropped: a cold process, warm cache. With every > 0, every every-th
// event is a 16 KiB tool result.
func (e *env) openLoad(key string, every int) error {
	title := fmt.Sprintf("fresh process: open + load the active path (%s of %s events)", thousands(int64(e.sz.Trunk+e.sz.BranchLen)), thousands(int64(e.sz.Trunk+e.sz.Branches*e.sz.BranchLen)))
	if every > 0 {
		title += fmt.Sprintf(", every %dth event 16 KiB", every)
	}
	row := e.res.row(key+"/ms", title, "ms", false, "sessionstore")
	base := toolOutput(16, 16<<10)
	msg := message300()
	gen := func(i int) Event {
		if every > 0 && i%every == every-1 {
			return toolResult(base, i)
		}
		return msg
	}
	fixtures := map[string]fixture{}
	var sizes []string
	for _, p := range e.readers() {
		dir, err := e.freshDir(key, p.Name)
		if err != nil {
			return err
		}
		st, err := p.Open(dir)
		if err != nil {
			return err
		}
		sid, err := st.Create(e.ctx, "branchy")
		if err != nil {
			return err
		}
		next := 0
		// path: the events appended on the way to HEAD, the trunk and then
		// the last branch, whose payloads the load must return.
		var path []Event
		record := func(i int) Event {
			ev := gen(i)
			path = append(path, ev)
			return ev
		}
		fork, err := appendChain(e.ctx, st, sid, e.sz.Trunk, &next, 500, record)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		trunk := len(path)
		var head uuid.UUID
		for range e.sz.Branches {
			if err := st.Branch(e.ctx, sid, fork); err != nil {
				return err
			}
			path = path[:trunk]
			if head, err = appendChain(e.ctx, st, sid, e.sz.BranchLen, &next, 500, record); err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
		}
		if err := st.Close(); err != nil {
			return err
		}
		fixtures[p.Name] = fixture{dir: dir, session: sid, expect: e.sz.Trunk + e.sz.BranchLen, head: head, hash: payloadHash(path)}
		apparent, _, err := dirSize(dir)
		if err != nil {
			return err
		}
		sizes = append(sizes, fmt.Sprintf("%s %.1f MiB", p.Label, float64(apparent)/(1<<20)))
	}
	e.res.detail("Open + load fixture `%s` on disk: %s.", key, strings.Join(sizes, ", "))
	for rep := range e.reps {
		for _, p := range e.readers() {
			f := fixtures[p.Name]
			r, err := runChild(e.ctx, e.exe, childSpec{Op: "openload", Peer: p.Name, Dir: f.dir, Session: f.session, Expect: f.expect, Head: f.head})
			if err != nil {
				return err
			}
			if err := checkLoad(p.Name, "openload", r, f); err != nil {
				return err
			}
			row.set(p.Name, rep, r.Ms)
		}
	}
	if err := e.profileChild(key, "openload", fixtures); err != nil {
		return err
	}
	return removeFixtures(fixtures)
}

// profileChild, when profiling, runs the sessionstore side of a
// fresh-process workload in one more child that repeats it e.loops times
// under the CPU profiler.
func (e *env) profileChild(key, op string, fixtures map[string]fixture) error {
	f, ok := fixtures["sessionstore"]
	if e.cpuprofile == "" || !ok {
		return nil
	}
	path := e.cpuprofile + "." + key + ".pprof"
	r, err := runChild(e.ctx, e.exe, childSpec{Op: op, Peer: "sessionstore", Dir: f.dir, Session: f.session, Expect: f.expect, Head: f.head, CPUProfile: path, Loops: e.loops})
	if err == nil {
		err = checkLoad("sessionstore", op, r, f)
	}
	if err == nil {
		e.logf("  cpu profile of the sessionstore side (%d loops): %s", e.loops, path)
	}
	return err
}

func removeFixtures(fixtures map[string]fixture) error {
	for _, f := range fixtures {
		if err := os.RemoveAll(f.dir); err != nil {
			return err
		}
	}
	return nil
}

// list: ListSessions sessions of two 300-byte events each; each
// repetition times ListIters rounds of open the store + list every
// session (in this process, warm cache) and keeps the median round.
func (e *env) list() error {
	row := e.res.row("list/ms", fmt.Sprintf("open + list %s sessions", thousands(int64(e.sz.ListSessions))), "ms", false, "sessionstore")
	msg := message300()
	dirs := map[string]string{}
	want := map[string]string{} // listHash of the sessions created, per peer
	for _, p := range e.readers() {
		dir, err := e.freshDir("list", p.Name)
		if err != nil {
			return err
		}
		st, err := p.Open(dir)
		if err != nil {
			return err
		}
		var created []SessionInfo
		for i := range e.sz.ListSessions {
			name := fmt.Sprintf("session %d: fix the build", i)
			sid, err := st.Create(e.ctx, name)
			if err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
			created = append(created, SessionInfo{ID: sid, Name: name})
			if _, err := st.AppendBatch(e.ctx, sid, []Event{msg, msg}); err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
		}
		if err := st.Close(); err != nil {
			return err
		}
		dirs[p.Name] = dir
		want[p.Name] = listHash(created)
	}
	for rep := range e.reps {
		for _, p := range e.readers() {
			var ms []float64
			for range e.sz.ListIters {
				var (
					l   []SessionInfo
					err error
					d   time.Duration
					st  Store
				)
				timed(e.ctx, "list/"+p.Name, func(ctx context.Context) {
					t0 := time.Now()
					if st, err = p.OpenRead(dirs[p.Name]); err != nil {
						return
					}
					l, err = st.List(ctx)
					d = time.Since(t0)
				})
				if err != nil {
					return fmt.Errorf("%s: list: %w", p.Name, err)
				}
				if err := st.Close(); err != nil {
					return err
				}
				if len(l) != e.sz.ListSessions {
					return fmt.Errorf("%s listed %d sessions, want %d", p.Name, len(l), e.sz.ListSessions)
				}
				if err := checkList(p.Name, l, want[p.Name]); err != nil {
					return err
				}
				ms = append(ms, float64(d.Nanoseconds())/1e6)
			}
			row.set(p.Name, rep, median(ms))
		}
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	return nil
}

// dirSize returns the apparent size (sum of file sizes) and the allocated
// size (st_blocks) of the regular files under dir.
func dirSize(dir string) (apparent, allocated int64, err error) {
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		apparent += info.Size()
		allocated += blocks(info)
		return nil
	})
	return apparent, allocated, err
}

// disk: the same events appended one by one (each durable) to a new
// session of each reading peer, then the store closed and the bytes of
// its directory counted (session metadata, index, WAL and free pages
// included). Once, not per repetition: the sizes do not depend on the
// disk's mood. Two sessions: the package's synthetic coding session and
// the recorded transcript in testdata; sessionstore with its default 8 MiB
// chunks and with 64 KiB chunks.
func (e *env) disk() error {
	trans, err := loadTranscript(e.transcript)
	if err != nil {
		return err
	}
	sets := []struct {
		key, title string
		evs        []Event
	}{
		{"synthetic", fmt.Sprintf("synthetic coding session (%d turns)", e.sz.Turns), codingSession(e.sz.Turns, 1)},
		{"transcript", "real transcript (testdata/transcripts/recorded-session.jsonl)", trans},
	}
	peers := e.readers()
	if e.has("sessionstore") {
		peers = slices.Insert(peers, 1, sessionstore64k)
	}
	for _, set := range sets {
		def := e.res.row("disk/"+set.key, "bytes on disk per event, "+set.title+", sessionstore 8 MiB chunks", "bytes/event", false, "sessionstore")
		small := e.res.row("disk/"+set.key+"64k", "bytes on disk per event, "+set.title+", sessionstore 64 KiB chunks", "bytes/event", false, "sessionstore-64k")
		n := float64(len(set.evs))
		var b strings.Builder
		fmt.Fprintf(&b, "Bytes on disk, %s: %d events, %.2f MiB of payload (records as compact JSON).\n\n", set.title, len(set.evs), float64(payloadBytes(set.evs))/(1<<20))
		fmt.Fprintf(&b, "| store | apparent MiB | allocated MiB (du) | bytes/event |\n| --- | ---: | ---: | ---: |\n")
		var (
			breakdown []struct {
				label string
				parts map[string]int64
			}
			jsonlSize int64
		)
		for _, p := range peers {
			dir, err := e.freshDir("disk", p.Name)
			if err != nil {
				return err
			}
			st, err := p.Open(dir)
			if err != nil {
				return err
			}
			sid, err := st.Create(e.ctx, set.key)
			if err != nil {
				return err
			}
			for _, ev := range set.evs {
				if _, err := st.Append(e.ctx, sid, ev); err != nil {
					return fmt.Errorf("%s: %w", p.Name, err)
				}
			}
			if err := st.Close(); err != nil {
				return err
			}
			apparent, allocated, err := dirSize(dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "| %s | %.2f | %.2f | %s |\n", p.Label, float64(apparent)/(1<<20), float64(allocated)/(1<<20), format(float64(apparent)/n))
			if strings.HasPrefix(p.Name, "sessionstore") {
				parts, err := ssParts(dir)
				if err != nil {
					return err
				}
				breakdown = append(breakdown, struct {
					label string
					parts map[string]int64
				}{p.Label, parts})
			}
			if p.Name == "jsonl" {
				jsonlSize = apparent
			}
			switch p.Name {
			case "sessionstore":
				def.set(p.Name, 0, float64(apparent)/n)
			case "sessionstore-64k":
				small.set(p.Name, 0, float64(apparent)/n)
			default:
				def.set(p.Name, 0, float64(apparent)/n)
				small.set(p.Name, 0, float64(apparent)/n)
			}
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
		}
		for _, bd := range breakdown {
			var out []string
			for _, k := range partKinds {
				if n, ok := bd.parts[k]; ok {
					share := ""
					if jsonlSize > 0 {
						share = fmt.Sprintf(" (%.3f of the JSONL file)", float64(n)/float64(jsonlSize))
					}
					out = append(out, fmt.Sprintf("%s %s bytes%s", k, thousands(n), share))
				}
			}
			fmt.Fprintf(&b, "\n%s, bytes by part: %s.\n", bd.label, strings.Join(out, ", "))
		}
		e.res.detail("%s", b.String())
	}
	return nil
}

// ssParts adds up a sessionstore root's bytes by part.
func ssParts(dir string) (map[string]int64, error) {
	parts := map[string]int64{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		kind := "metadata (session.json, HEAD, LOCK, sessionstore.json)"
		switch {
		case filepath.Base(path) == "index.jsonl":
			kind = "index.jsonl"
		case strings.Contains(rel, "/chunks/") && strings.HasSuffix(path, ".zst"):
			kind = "sealed chunks (zstd, with their index lines)"
		case strings.Contains(rel, "/chunks/"):
			kind = "plain chunks"
		case strings.Contains(rel, "/blobs/"):
			kind = "blobs"
		}
		parts[kind] += info.Size()
		return nil
	})
	return parts, err
}

// partKinds orders the parts ssParts reports.
var partKinds = []string{"plain chunks", "sealed chunks (zstd, with their index lines)", "blobs", "index.jsonl", "metadata (session.json, HEAD, LOCK, sessionstore.json)"}

// treeHeap: a session of TreeEvents tool results holding TreeBytes of
// output in all, built with AppendBatch; each repetition opens it in a new
// process and builds the payload-free tree, sampling the heap every
// millisecond.
func (e *env) treeHeap() error {
	per := int(e.sz.TreeBytes / int64(e.sz.TreeEvents))
	title := fmt.Sprintf("fresh process: open + payload-free tree of %s events holding %s MiB of tool results", thousands(int64(e.sz.TreeEvents)), thousands(e.sz.TreeBytes>>20))
	heap := e.res.row("tree/heap", title+": peak Go heap", "MiB", false, "sessionstore")
	rss := e.res.row("tree/rss", title+": peak RSS", "MiB", false, "sessionstore")
	ms := e.res.row("tree/ms", title+": time", "ms", false, "sessionstore")
	base := toolOutput(1, per)
	batch := max(1, (8<<20)/per)
	fixtures := map[string]fixture{}
	var sizes []string
	for _, p := range e.readers() {
		dir, err := e.freshDir("tree", p.Name)
		if err != nil {
			return err
		}
		st, err := p.Open(dir)
		if err != nil {
			return err
		}
		sid, err := st.Create(e.ctx, "heavy")
		if err != nil {
			return err
		}
		next := 0
		var payload int64
		if _, err := appendChain(e.ctx, st, sid, e.sz.TreeEvents, &next, batch, func(i int) Event {
			ev := toolResult(base, i)
			payload += int64(len(ev.Payload))
			return ev
		}); err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		if err := st.Close(); err != nil {
			return err
		}
		fixtures[p.Name] = fixture{dir: dir, session: sid, expect: e.sz.TreeEvents, payload: payload}
		apparent, _, err := dirSize(dir)
		if err != nil {
			return err
		}
		sizes = append(sizes, fmt.Sprintf("%s %s MiB", p.Label, thousands(apparent>>20)))
	}
	e.res.detail("Tree fixture on disk (%s MiB of tool-result text, each output distinct but sharing most bytes with the others, like successive test runs): %s.", thousands(e.sz.TreeBytes>>20), strings.Join(sizes, ", "))
	retained := map[string][]float64{}
	for rep := range e.reps {
		for _, p := range e.readers() {
			f := fixtures[p.Name]
			r, err := runChild(e.ctx, e.exe, childSpec{Op: "tree", Peer: p.Name, Dir: f.dir, Session: f.session, Expect: f.expect})
			if err != nil {
				return err
			}
			if err := checkLoad(p.Name, "tree", r, f); err != nil {
				return err
			}
			heap.set(p.Name, rep, float64(r.PeakHeap)/(1<<20))
			rss.set(p.Name, rep, float64(r.PeakRSS)/(1<<20))
			ms.set(p.Name, rep, r.Ms)
			retained[p.Name] = append(retained[p.Name], float64(r.RetainedHeap)/(1<<20))
		}
	}
	var parts []string
	for _, p := range e.readers() {
		parts = append(parts, fmt.Sprintf("%s %.1f MiB", p.Label, median(retained[p.Name])))
	}
	e.res.detail("Tree heap: heap still in use after a GC with the tree (and the open store) alive: %s.", strings.Join(parts, ", "))
	if err := e.profileChild("tree", "tree", fixtures); err != nil {
		return err
	}
	return removeFixtures(fixtures)
}
