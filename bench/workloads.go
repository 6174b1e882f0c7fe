package main

import (
	"bytes"
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
	Recent       int   // sessions of the list-recent fixture
	RecentN      int   // newest sessions list-recent asks for
	ToolWriters  int   // concurrent writers of the tool*-8w workloads
	RealFiles    int   // disk-real: the first RealFiles transcripts (sorted by path); 0 = all
	Turns        int   // turns of the synthetic coding session (disk workload)
	TreeBytes    int64 // tool-result bytes of the tree-heap session
	TreeEvents   int   // events of the tree-heap session
	// Fleet is, per number of sessions of an append300-<N>s workload, the
	// appends each session's one writer makes per repetition and peer.
	Fleet         map[int]int
	Creates       int // create: sessions made per repetition and peer
	CreateWriters int // create: goroutines calling Create
	// workspace: files and bytes of the generated repository, and the
	// snapshots taken of it (each after a change of 3 files).
	WSFiles     int
	WSBytes     int64
	WSSnapshots int
	// search: the shared transcripts (the first SearchFiles by path, 0 for
	// all) read SearchPasses times and cut into SearchReal sessions, SearchSynth synthetic coding sessions of
	// SearchTurns turns, and at most SearchQueries timed runs of each
	// query per repetition and side, each asking for SearchLimit hits.
	SearchFiles, SearchPasses, SearchReal, SearchSynth, SearchTurns int
	SearchQueries, SearchLimit                                      int
}

func fullSizes() sizes {
	return sizes{Append300: 1000, Concurrent: 3200, Writers: 16, Tool: 300, Trunk: 1000, Branches: 10, BranchLen: 10000, Every: 20,
		ListSessions: 1000, ListIters: 5, Recent: 10000, RecentN: 50, ToolWriters: 8, Turns: 600, TreeBytes: 1 << 30, TreeEvents: 10000,
		Fleet: map[int]int{16: 200, 64: 100, 256: 50}, Creates: 2048, CreateWriters: 32,
		WSFiles: 10000, WSBytes: 100e6, WSSnapshots: 200,
		SearchPasses: 32, SearchReal: 700, SearchSynth: 300, SearchTurns: 34, SearchQueries: 100, SearchLimit: 20}
}

func quickSizes() sizes {
	return sizes{Append300: 100, Concurrent: 320, Writers: 16, Tool: 40, Trunk: 100, Branches: 10, BranchLen: 1000, Every: 20,
		ListSessions: 200, ListIters: 3, Recent: 500, RecentN: 50, ToolWriters: 8, RealFiles: 10, Turns: 40, TreeBytes: 32 << 20, TreeEvents: 1000,
		Fleet: map[int]int{16: 20, 64: 10, 256: 5}, Creates: 320, CreateWriters: 32,
		WSFiles: 500, WSBytes: 3e6, WSSnapshots: 20,
		SearchPasses: 1, SearchReal: 30, SearchSynth: 10, SearchTurns: 8, SearchQueries: 20, SearchLimit: 20}
}

// env is what every workload needs.
type env struct {
	ctx         context.Context
	scratch     string
	peers       []Peer // selected peers, subject first
	reps        int
	sz          sizes
	res         *results
	exe         string // this binary, for fresh-process measurements
	cpuprofile  string // prefix of child profiles; "" when not profiling
	loops       int    // repetitions inside a profiled child
	transcript  string
	transcripts string // directory of the real transcripts (disk-real)
	logf        func(format string, args ...any)
	seq         int
	load        []loadRow // per workload run, in order
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
		if p.Writes && p.Only == nil {
			out = append(out, p)
		}
	}
	return out
}

func (e *env) readers() []Peer {
	var out []Peer
	for _, p := range e.peers {
		if p.Reads && p.Only == nil {
			out = append(out, p)
		}
	}
	return out
}

// plusOnly is peers with the selected peers that take part only in some
// workloads (Peer.Only) and in workload key among them, each placed right
// after the subject, so that it alternates with it.
func (e *env) plusOnly(peers []Peer, key string) []Peer {
	for _, p := range e.peers {
		if slices.Contains(p.Only, key) {
			peers = slices.Insert(slices.Clone(peers), min(1, len(peers)), p)
		}
	}
	return peers
}

// fleetPeers are the peers of the many-session workloads (append300-<N>s
// and create): the subject, the raw floor, SQLite FULL and bbolt.
var fleetPeers = []string{"sessionstore", "raw", "sqlite-full", "bbolt"}

// fleetWriters returns the selected peers among fleetPeers.
func (e *env) fleetWriters() []Peer {
	var out []Peer
	for _, p := range e.writers() {
		if slices.Contains(fleetPeers, p.Name) {
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
	{"append300-16s", func(e *env) error { return e.fleetAppends(16) }},
	{"append300-64s", func(e *env) error { return e.fleetAppends(64) }},
	{"append300-256s", func(e *env) error { return e.fleetAppends(256) }},
	{"create", (*env).create},
	{"tool16k", func(e *env) error {
		return e.appendWorkload("tool16k", "durable append of a 16 KiB tool result", 1, 1, e.sz.Tool, toolEvents(16<<10, e.sz.Tool))
	}},
	{"tool64k", func(e *env) error {
		return e.appendWorkload("tool64k", "durable append of a 64 KiB tool result", 1, 1, e.sz.Tool, toolEvents(64<<10, e.sz.Tool))
	}},
	{"tool16k-8w", func(e *env) error {
		n := roundUp(e.sz.Tool, e.sz.ToolWriters)
		return e.appendWorkload("tool16k-8w", fmt.Sprintf("durable append of a 16 KiB tool result, %d writers, one session", e.sz.ToolWriters), e.sz.ToolWriters, 1, n, toolEvents(16<<10, n))
	}},
	{"tool64k-8w", func(e *env) error {
		n := roundUp(e.sz.Tool, e.sz.ToolWriters)
		return e.appendWorkload("tool64k-8w", fmt.Sprintf("durable append of a 64 KiB tool result, %d writers, one session", e.sz.ToolWriters), e.sz.ToolWriters, 1, n, toolEvents(64<<10, n))
	}},
	{"openload", func(e *env) error { return e.openLoad("openload", 0) }},
	{"openload16k", func(e *env) error { return e.openLoad("openload16k", e.sz.Every) }},
	{"list", (*env).list},
	{"list-recent", (*env).listRecent},
	{"disk", (*env).disk},
	{"disk-real", (*env).diskReal},
	{"treeheap", (*env).treeHeap},
	{"workspace", (*env).workspace},
	{"search", (*env).search},
}

// roundUp returns n rounded up to a multiple of m.
func roundUp(n, m int) int { return (n + m - 1) / m * m }

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
// `sessions` sessions, each created and given one untimed warm-up append
// (one goroutine per session), then `writers` goroutines appending evs
// (split evenly, writer w to session w % sessions), each append timed.
// Throughput is len(evs) / wall time. n is len(evs).
func (e *env) appendWorkload(key, title string, writers, sessions, n int, evs []Event) error {
	return e.runAppends(appendSpec{key: key, title: title, writers: writers, sessions: sessions, evs: evs[:n], peers: e.plusOnly(e.writers(), key)})
}

// appendSpec describes an append workload.
type appendSpec struct {
	key, title        string
	writers, sessions int
	evs               []Event
	peers             []Peer // the peers that run it
	p50               bool   // also a p50 latency row
}

// fleetAppends is append300-<sessions>s: sessions sessions in one store,
// one writer goroutine each, e.sz.Fleet[sessions] durable 300-byte
// appends per writer, on the fleet peers; throughput, p50 and p99.
func (e *env) fleetAppends(sessions int) error {
	n := sessions * e.sz.Fleet[sessions]
	return e.runAppends(appendSpec{
		key:   fmt.Sprintf("append300-%ds", sessions),
		title: fmt.Sprintf("durable append 300 B, %d sessions, one writer each", sessions),
		// One writer per session: writer w appends to session w.
		writers: sessions, sessions: sessions, evs: constEvents(message300(), n),
		peers: e.fleetWriters(), p50: true,
	})
}

// runAppends runs an append workload (see appendWorkload).
func (e *env) runAppends(a appendSpec) error {
	rate := e.res.row(a.key+"/rate", a.title+": throughput", "appends/s", true, "sessionstore")
	var p50 *row
	if a.p50 {
		p50 = e.res.row(a.key+"/p50", a.title+": p50 latency", "ms", false, "sessionstore")
	}
	p99 := e.res.row(a.key+"/p99", a.title+": p99 latency", "ms", false, "sessionstore")
	per := len(a.evs) / a.writers
	warm := message300()
	// What the creates and appends will write, for a store that prepares
	// (the raw floor preallocates it, untimed).
	prepBytes := int64(a.sessions) * int64(rawCreateOverhead+len(sessionName(a.sessions))+len(warm.Payload)+rawLineOverhead)
	for _, ev := range a.evs {
		prepBytes += int64(len(ev.Payload) + rawLineOverhead)
	}
	for rep := range e.reps {
		for _, p := range a.peers {
			dir, err := e.freshDir(a.key, p.Name)
			if err != nil {
				return err
			}
			st, err := p.Open(dir)
			if err != nil {
				return fmt.Errorf("%s: open: %w", p.Name, err)
			}
			if pr, ok := st.(writePreparer); ok {
				if err := pr.PrepareWrites(a.writers, prepBytes); err != nil {
					return fmt.Errorf("%s: %w", p.Name, err)
				}
			}
			ids := make([]uuid.UUID, a.sessions)
			err = parallel(a.sessions, a.sessions, func(i int) error {
				id, err := st.Create(e.ctx, sessionName(i))
				if err != nil {
					return fmt.Errorf("create: %w", err)
				}
				if _, err := st.Append(e.ctx, id, warm); err != nil {
					return fmt.Errorf("append: %w", err)
				}
				ids[i] = id
				return nil
			})
			if err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
			wall, lats, err := timeOps(e.ctx, a.key+"/"+p.Name, a.writers, per, func(ctx context.Context, w, i int) error {
				_, err := st.Append(ctx, ids[w%a.sessions], a.evs[w*per+i])
				return err
			})
			if err := errors.Join(err, st.Close()); err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
			rate.set(p.Name, rep, float64(per*a.writers)/wall.Seconds())
			if p50 != nil {
				p50.set(p.Name, rep, percentile(lats, 50))
			}
			p99.set(p.Name, rep, percentile(lats, 99))
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
		}
	}
	return nil
}

// sessionName is the name of an append workload's i-th session.
func sessionName(i int) string { return fmt.Sprintf("bench %d", i) }

// timeOps runs op(ctx, w, i) for i in [0, per) in order on each of
// writers goroutines w, all started together under the pprof label
// timed=label, and times every call. It returns the wall time from the
// start to the last goroutine's end and every call's latency in
// milliseconds, sorted; or the errors (a goroutine stops at its first).
func timeOps(ctx context.Context, label string, writers, per int, op func(ctx context.Context, w, i int) error) (time.Duration, []float64, error) {
	lats := make([][]time.Duration, writers)
	var (
		mu   sync.Mutex
		errs []error
	)
	start := time.Now()
	timed(ctx, label, func(ctx context.Context) {
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				lat := make([]time.Duration, 0, per)
				for i := range per {
					t0 := time.Now()
					if err := op(ctx, w, i); err != nil {
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
	if err := errors.Join(errs...); err != nil {
		return wall, nil, err
	}
	all := make([]float64, 0, writers*per)
	for _, l := range lats {
		for _, d := range l {
			all = append(all, float64(d.Nanoseconds())/1e6)
		}
	}
	slices.Sort(all)
	return wall, all, nil
}

// create: per repetition and fleet peer, a new store in which
// CreateWriters goroutines make Creates sessions (Creates rounded up to a
// multiple of CreateWriters, split evenly), each Create durable when it
// returns and timed. Throughput is sessions / wall time. Then, untimed, a
// peer that lists must list exactly the sessions made (ids and names).
func (e *env) create() error {
	w := e.sz.CreateWriters
	n := roundUp(e.sz.Creates, w)
	per := n / w
	title := fmt.Sprintf("durable Create, %d goroutines", w)
	rate := e.res.row("create/rate", title+": throughput", "creates/s", true, "sessionstore")
	p50 := e.res.row("create/p50", title+": p50 latency", "ms", false, "sessionstore")
	p99 := e.res.row("create/p99", title+": p99 latency", "ms", false, "sessionstore")
	names := make([]string, n)
	var prepBytes int64
	for i := range names {
		names[i] = fmt.Sprintf("session %d: fix the build", i)
		prepBytes += int64(rawCreateOverhead + len(names[i]))
	}
	for rep := range e.reps {
		for _, p := range e.fleetWriters() {
			dir, err := e.freshDir("create", p.Name)
			if err != nil {
				return err
			}
			st, err := p.Open(dir)
			if err != nil {
				return fmt.Errorf("%s: open: %w", p.Name, err)
			}
			if pr, ok := st.(writePreparer); ok {
				if err := pr.PrepareWrites(w, prepBytes); err != nil {
					return fmt.Errorf("%s: %w", p.Name, err)
				}
			}
			created := make([]SessionInfo, n)
			wall, lats, err := timeOps(e.ctx, "create/"+p.Name, w, per, func(ctx context.Context, g, i int) error {
				k := g*per + i
				id, err := st.Create(ctx, names[k])
				created[k] = SessionInfo{ID: id, Name: names[k]}
				return err
			})
			if err == nil && p.Reads {
				var l []SessionInfo
				if l, err = st.List(e.ctx); err == nil {
					err = checkList(p.Name, l, listHash(created))
				}
			}
			if err := errors.Join(err, st.Close()); err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
			rate.set(p.Name, rep, float64(n)/wall.Seconds())
			p50.set(p.Name, rep, percentile(lats, 50))
			p99.set(p.Name, rep, percentile(lats, 99))
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
	readers := e.plusOnly(e.readers(), key)
	fixtures := map[string]fixture{}
	var sizes []string
	for _, p := range readers {
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
		for _, p := range readers {
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
	return e.timeLists(row, "list", dirs, func(ctx context.Context, st Store) ([]SessionInfo, error) { return st.List(ctx) },
		func(name string, l []SessionInfo) error {
			if len(l) != e.sz.ListSessions {
				return fmt.Errorf("%s listed %d sessions, want %d", name, len(l), e.sz.ListSessions)
			}
			return checkList(name, l, want[name])
		})
}

// timeLists times e.sz.ListIters rounds of a read-only open and list per
// repetition and reader, keeping the median round in row, checks each
// list outside the timing, and removes the fixtures in dirs.
func (e *env) timeLists(r *row, what string, dirs map[string]string, list func(context.Context, Store) ([]SessionInfo, error), check func(peer string, l []SessionInfo) error) error {
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
				timed(e.ctx, what+"/"+p.Name, func(ctx context.Context) {
					t0 := time.Now()
					if st, err = p.OpenRead(dirs[p.Name]); err != nil {
						return
					}
					l, err = list(ctx, st)
					d = time.Since(t0)
				})
				if err != nil {
					return fmt.Errorf("%s: %s: %w", p.Name, what, err)
				}
				if err := st.Close(); err != nil {
					return err
				}
				if err := check(p.Name, l); err != nil {
					return err
				}
				ms = append(ms, float64(d.Nanoseconds())/1e6)
			}
			r.set(p.Name, rep, median(ms))
		}
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	return nil
}

// bulkBuilder is implemented by a peer with a faster correct way to
// create many sessions than Create and AppendBatch one by one: SQLite one
// transaction, bbolt one db.Update per 10,000 sessions, JSONL every file
// written and fsynced from 32 goroutines and the directory fsynced once.
type bulkBuilder interface {
	BuildSessions(ctx context.Context, names []string, evs []Event) ([]uuid.UUID, error)
}

// buildWorkers is how many goroutines build a fixture of many sessions
// through Create and AppendBatch.
const buildWorkers = 32

// buildSessions creates one session per name, each holding evs (appended
// with one AppendBatch), through the peer's bulkBuilder or else with
// buildWorkers goroutines calling Create and AppendBatch. It returns the
// ids in the order of names.
func buildSessions(ctx context.Context, st Store, names []string, evs []Event) ([]uuid.UUID, error) {
	if b, ok := st.(bulkBuilder); ok {
		return b.BuildSessions(ctx, names, evs)
	}
	ids := make([]uuid.UUID, len(names))
	err := parallel(buildWorkers, len(names), func(i int) error {
		id, err := st.Create(ctx, names[i])
		if err != nil {
			return err
		}
		ids[i] = id
		if len(evs) > 0 {
			_, err = st.AppendBatch(ctx, id, evs)
		}
		return err
	})
	return ids, err
}

// parallel calls fn(i) for i in [0, n) from workers goroutines and
// returns the first error (the others stop taking work after one).
func parallel(workers, n int, fn func(i int) error) error {
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	for range min(workers, n) {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil || i >= n
				mu.Unlock()
				if stop {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// listRecent: Recent sessions of two 300-byte events each (the list
// workload's shape), built in parallel or in bulk (buildSessions, timed
// and reported); each repetition times ListIters rounds of open the store
// read-only + the RecentN newest sessions (in this process, warm cache)
// and keeps the median round; each round's answer is checked against the
// RecentN greatest ids Create returned, newest first, and their names.
func (e *env) listRecent() error {
	n, k := e.sz.Recent, e.sz.RecentN
	row := e.res.row("list-recent/ms", fmt.Sprintf("open + newest %d of %s sessions", k, thousands(int64(n))), "ms", false, "sessionstore")
	msg := message300()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("session %d: fix the build", i)
	}
	dirs := map[string]string{}
	want := map[string][]SessionInfo{} // the k newest, newest first, per peer
	var built []string
	for _, p := range e.readers() {
		dir, err := e.freshDir("list-recent", p.Name)
		if err != nil {
			return err
		}
		st, err := p.Open(dir)
		if err != nil {
			return err
		}
		t0 := time.Now()
		ids, err := buildSessions(e.ctx, st, names, []Event{msg, msg})
		if err == nil {
			err = st.Close()
		}
		if err != nil {
			return fmt.Errorf("%s: build: %w", p.Name, err)
		}
		took := time.Since(t0)
		created := make([]SessionInfo, n)
		for i := range created {
			created[i] = SessionInfo{ID: ids[i], Name: names[i]}
		}
		slices.SortFunc(created, func(a, b SessionInfo) int { return -bytes.Compare(a.ID[:], b.ID[:]) })
		dirs[p.Name] = dir
		want[p.Name] = created[:min(k, n)]
		apparent, _, err := dirSize(dir)
		if err != nil {
			return err
		}
		built = append(built, fmt.Sprintf("%s %.1f s (%.1f MiB)", p.Label, took.Seconds(), float64(apparent)/(1<<20)))
		e.logf("  %s: built %s sessions in %s", p.Name, thousands(int64(n)), took.Round(100*time.Millisecond))
	}
	e.res.detail("List-recent fixture, %s sessions of two 300-byte events each: build time, not part of the timing (sessionstore Create + AppendBatch from %d goroutines; SQLite one transaction; bbolt one db.Update per 10,000 sessions; JSONL every file written and fsynced from 32 goroutines, the directory fsynced once), and size on disk: %s.", thousands(int64(n)), buildWorkers, strings.Join(built, ", "))
	return e.timeLists(row, "list-recent", dirs, func(ctx context.Context, st Store) ([]SessionInfo, error) { return st.ListRecent(ctx, k) },
		func(name string, l []SessionInfo) error { return checkRecent(name, l, want[name]) })
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
// session of each reading peer, and the bytes of its directory counted
// twice (session metadata, index, WAL and free pages included): while
// appending (after the last Append returned, before Close: sessionstore's
// active chunk still holds its preallocated free space) and closed. Once,
// not per repetition: the sizes do not depend on the disk's mood. Two
// sessions: the package's synthetic coding session and the recorded
// transcript in testdata; sessionstore with its default 8 MiB chunks and
// with 64 KiB chunks. For the transcript, the sizes are also given as a
// ratio to the transcript file's size (raw JSONL).
func (e *env) disk() error {
	trans, err := loadTranscript(e.transcript)
	if err != nil {
		return err
	}
	info, err := os.Stat(e.transcript)
	if err != nil {
		return err
	}
	sets := []struct {
		key, title string
		evs        []Event
		raw        int64 // bytes of the input file; 0 for none
	}{
		{"synthetic", fmt.Sprintf("synthetic coding session (%d turns)", e.sz.Turns), codingSession(e.sz.Turns, 1), 0},
		{"transcript", "real transcript (testdata/transcripts/recorded-session.jsonl)", trans, info.Size()},
	}
	peers := e.readers()
	if e.has("sessionstore") {
		peers = slices.Insert(peers, 1, sessionstore64k)
	}
	for _, set := range sets {
		def := e.res.row("disk/"+set.key, "bytes on disk per event, "+set.title+", sessionstore 8 MiB chunks", "bytes/event", false, "sessionstore")
		small := e.res.row("disk/"+set.key+"64k", "bytes on disk per event, "+set.title+", sessionstore 64 KiB chunks", "bytes/event", false, "sessionstore-64k")
		var rawOpen, rawClosed *row
		if set.raw > 0 {
			rawOpen = e.res.row("disk/"+set.key+"-raw-appending", "bytes on disk / raw JSONL, "+set.title+", default options, while appending", "x raw JSONL", false, "sessionstore")
			rawClosed = e.res.row("disk/"+set.key+"-raw-closed", "bytes on disk / raw JSONL, "+set.title+", default options, closed", "x raw JSONL", false, "sessionstore")
		}
		n := float64(len(set.evs))
		var b strings.Builder
		fmt.Fprintf(&b, "Bytes on disk, %s: %d events, %.2f MiB of payload (records as compact JSON)", set.title, len(set.evs), float64(payloadBytes(set.evs))/(1<<20))
		if set.raw > 0 {
			fmt.Fprintf(&b, ", raw JSONL file %s bytes", thousands(set.raw))
		}
		fmt.Fprintf(&b, ".\n\n| store | while appending: apparent MiB | allocated MiB (du) | closed: apparent MiB | allocated MiB (du) | bytes/event (closed) |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
		var (
			breakdown []string
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
			open, err := measureDir(dir)
			if err != nil {
				return err
			}
			if err := st.Close(); err != nil {
				return err
			}
			closed, err := measureDir(dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.2f | %.2f | %s |\n", p.Label, mib(open.apparent), mib(open.allocated), mib(closed.apparent), mib(closed.allocated), format(float64(closed.apparent)/n))
			if strings.HasPrefix(p.Name, "sessionstore") {
				breakdown = append(breakdown, open.partsLine(p.Label+", while appending", set.raw), closed.partsLine(p.Label+", closed", set.raw))
			}
			if p.Name == "jsonl" {
				jsonlSize = closed.apparent
			}
			a := float64(closed.apparent)
			switch p.Name {
			case "sessionstore":
				def.set(p.Name, 0, a/n)
			case "sessionstore-64k":
				small.set(p.Name, 0, a/n)
			default:
				def.set(p.Name, 0, a/n)
				small.set(p.Name, 0, a/n)
			}
			if set.raw > 0 && p.Name != "sessionstore-64k" {
				rawOpen.set(p.Name, 0, float64(open.apparent)/float64(set.raw))
				rawClosed.set(p.Name, 0, a/float64(set.raw))
			}
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
		}
		if jsonlSize > 0 {
			fmt.Fprintf(&b, "\nThe naive JSONL store's file (closed) is %s bytes.\n", thousands(jsonlSize))
		}
		if len(breakdown) > 0 {
			fmt.Fprintf(&b, "\nBytes by part (apparent)%s:\n\n", map[bool]string{true: ", and as a fraction of the raw JSONL file", false: ""}[set.raw > 0])
			for _, l := range breakdown {
				fmt.Fprintf(&b, "- %s\n", l)
			}
		}
		e.res.detail("%s", b.String())
	}
	return nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// dirSnapshot is the bytes of a store's directory at one moment: apparent
// (sum of file sizes) and allocated (st_blocks), and the apparent bytes by
// part (ssParts: meaningful for a sessionstore root).
type dirSnapshot struct {
	apparent, allocated int64
	parts               map[string]int64
	names               map[string][]string // per part of partNamed, the base names of its files
}

// measureDir counts dir's regular files, by sessionstore part.
func measureDir(dir string) (dirSnapshot, error) {
	snap := dirSnapshot{parts: map[string]int64{}, names: map[string][]string{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		snap.apparent += info.Size()
		snap.allocated += blocks(info)
		part := ssPart(rel)
		snap.parts[part] += info.Size()
		if partNamed[part] {
			base := filepath.Base(rel)
			if !slices.Contains(snap.names[part], base) && len(snap.names[part]) < 8 {
				snap.names[part] = append(snap.names[part], base)
			}
		}
		return nil
	})
	return snap, err
}

// partsLine describes the snapshot's parts, each also as a fraction of
// raw when raw > 0.
func (s dirSnapshot) partsLine(label string, raw int64) string {
	var out []string
	for _, k := range partKinds {
		n, ok := s.parts[k]
		if !ok {
			continue
		}
		name := k
		if len(s.names[k]) > 0 {
			name += " (" + strings.Join(s.names[k], ", ") + ")"
		}
		share := ""
		if raw > 0 {
			share = fmt.Sprintf(" (%.3f)", float64(n)/float64(raw))
		}
		out = append(out, fmt.Sprintf("%s %s bytes%s", name, thousands(n), share))
	}
	total := ""
	if raw > 0 {
		total = fmt.Sprintf(" (%.3f)", float64(s.apparent)/float64(raw))
	}
	return fmt.Sprintf("%s: %s bytes in all%s: %s", label, thousands(s.apparent), total, strings.Join(out, ", "))
}

// The parts of a sessionstore root ssPart tells apart (chunk.go's
// chunkExt and sealedExt, session.go's file names).
const (
	partPlain  = "plain chunks"
	partSealed = "sealed chunks (zstd, with their index lines)"
	partBlobs  = "blobs"
	partIndex  = "index.jsonl"
	partMeta   = "session metadata (session.json, HEAD, LOCK)"
	partRoot   = "root files"
	partSearch = "search index"
	partOther  = "other"
)

// partKinds orders the parts; partNamed are listed with the names of
// their files (root files and unknown ones).
var (
	partKinds = []string{partPlain, partSealed, partBlobs, partIndex, partMeta, partSearch, partRoot, partOther}
	partNamed = map[string]bool{partRoot: true, partOther: true}
)

// ssPart names the part of a sessionstore root a file (path relative to
// the root) belongs to: sessions/<id>/chunks/NNNNNN.jsonl (plain) or
// .jsonl.zst (sealed), sessions/<id>/blobs/..., sessions/<id>/index.jsonl,
// sessions/<id>/{session.json,HEAD,LOCK}, files at the root
// (sessionstore.json, anything else the library keeps there), and
// anything else (temporary files, unknown names) as other.
func ssPart(rel string) string {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	switch {
	case len(parts) == 1:
		return partRoot
	case parts[0] == searchDir:
		return partSearch
	case parts[0] != "sessions" || len(parts) < 3:
		return partOther
	}
	name := parts[len(parts)-1]
	switch {
	case len(parts) == 3 && name == "index.jsonl":
		return partIndex
	case len(parts) == 3 && (name == "session.json" || name == "HEAD" || name == "LOCK"):
		return partMeta
	case len(parts) == 4 && parts[2] == "chunks" && strings.HasSuffix(name, ".jsonl.zst"):
		return partSealed
	case len(parts) == 4 && parts[2] == "chunks" && strings.HasSuffix(name, ".jsonl"):
		return partPlain
	case len(parts) > 3 && parts[2] == "blobs" && !strings.HasSuffix(name, ".tmp"):
		return partBlobs
	}
	return partOther
}

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
