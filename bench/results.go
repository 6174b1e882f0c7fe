package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
)

// row is one measured quantity: a value per peer and repetition.
type row struct {
	key, title, unit string
	higher           bool   // higher is better (throughput); else lower (time, bytes)
	subject          string // the peer in the sessionstore column (sessionstore or a variant)
	vals             map[string]map[int]float64
}

func (r *row) set(peer string, rep int, v float64) {
	if r.vals[peer] == nil {
		r.vals[peer] = map[int]float64{}
	}
	r.vals[peer][rep] = v
}

// value is the median over repetitions of the peer's value.
func (r *row) value(peer string) (float64, bool) {
	m := r.vals[peer]
	if len(m) == 0 {
		return 0, false
	}
	var vs []float64
	for _, v := range m {
		vs = append(vs, v)
	}
	return median(vs), true
}

// ratio is the median over repetitions of subject / peer, each
// repetition's pair measured back to back.
func (r *row) ratio(peer string) (float64, bool) {
	var rs []float64
	for rep, s := range r.vals[r.subject] {
		if p, ok := r.vals[peer][rep]; ok && p != 0 {
			rs = append(rs, s/p)
		}
	}
	if len(rs) == 0 {
		return 0, false
	}
	return median(rs), true
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

// percentile returns the p-th percentile (0 < p <= 100) of sorted xs,
// nearest rank.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(k, len(sorted)-1))]
}

type results struct {
	rows  []*row
	byKey map[string]*row
	// details are extra Markdown sections, in order.
	details []string
}

func newResults() *results { return &results{byKey: map[string]*row{}} }

// row returns the row with key, creating it.
func (res *results) row(key, title, unit string, higher bool, subject string) *row {
	if r, ok := res.byKey[key]; ok {
		return r
	}
	r := &row{key: key, title: title, unit: unit, higher: higher, subject: subject, vals: map[string]map[int]float64{}}
	res.rows = append(res.rows, r)
	res.byKey[key] = r
	return r
}

func (res *results) detail(format string, args ...any) {
	res.details = append(res.details, fmt.Sprintf(format, args...))
}

// format prints v with about three significant digits and thousands
// separators.
func format(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 1000:
		return thousands(int64(math.Round(v)))
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

func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// writeTable writes the summary table: one row per quantity, the
// subject's median, then each peer's median and the ratio subject / peer.
func (res *results) writeTable(w io.Writer, peers []Peer) {
	fmt.Fprintf(w, "| workload | unit | better | sessionstore |")
	for _, p := range peers[1:] {
		fmt.Fprintf(w, " %s |", p.Label)
	}
	fmt.Fprintf(w, "\n| --- | --- | --- | ---: |")
	for range peers[1:] {
		fmt.Fprintf(w, " ---: |")
	}
	fmt.Fprintln(w)
	for _, r := range res.rows {
		better := "lower"
		if r.higher {
			better = "higher"
		}
		sv, ok := r.value(r.subject)
		cell := "—"
		if ok {
			cell = "**" + format(sv) + "**"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |", r.title, r.unit, better, cell)
		for _, p := range peers[1:] {
			v, ok := r.value(p.Name)
			if !ok {
				fmt.Fprintf(w, " — |")
				continue
			}
			if q, ok := r.ratio(p.Name); ok {
				fmt.Fprintf(w, " %s (%.2fx) |", format(v), q)
			} else {
				fmt.Fprintf(w, " %s |", format(v))
			}
		}
		fmt.Fprintln(w)
	}
}

// target is one of the project's goals for a workload, checked against the
// results.
type target struct {
	text   string  // the goal, as the report prints it
	key    string  // row
	peer   string  // ratio against this peer; "" for the subject's own value
	atMin  bool    // the measured figure must be >= limit (else <= limit)
	limit  float64 // the bound
	strict bool    // < limit rather than <= (with atMin false)
}

// toolTargets are the three targets of a tool-result append workload.
func toolTargets(key, what string) []target {
	return []target{
		{text: what + ": >= 1.5x SQLite WAL FULL throughput", key: key + "/rate", peer: "sqlite-full", atMin: true, limit: 1.5},
		{text: what + ": >= 0.9x the raw floor's throughput", key: key + "/rate", peer: "raw", atMin: true, limit: 0.9},
		{text: what + ": p99 <= 1.5x the raw floor's p99", key: key + "/p99", peer: "raw", limit: 1.5},
	}
}

var targets = slices.Concat(
	[]target{
		{text: "durable append 300 B: >= 1.2x SQLite WAL FULL throughput", key: "append300/rate", peer: "sqlite-full", atMin: true, limit: 1.2},
		{text: "durable append 300 B: >= 0.95x the raw floor's throughput (preallocated file, write+fdatasync)", key: "append300/rate", peer: "raw", atMin: true, limit: 0.95},
		{text: "durable append 300 B, 16 writers, one session: >= 0.9x the raw floor's throughput (group commit)", key: "append300-16w/rate", peer: "raw", atMin: true, limit: 0.9},
		{text: "durable append 300 B, 16 sessions, one writer each: >= 0.9x the raw floor's throughput (one file, group commit across sessions)", key: "append300-16s/rate", peer: "raw", atMin: true, limit: 0.9},
		{text: "durable append 300 B, 16 sessions, one writer each: >= 1.5x bbolt's throughput (db.Batch)", key: "append300-16s/rate", peer: "bbolt", atMin: true, limit: 1.5},
		{text: "durable append 300 B, 256 sessions, one writer each: >= 0.8x the raw floor's throughput", key: "append300-256s/rate", peer: "raw", atMin: true, limit: 0.8},
		{text: "durable append 300 B, 256 sessions, one writer each: p99 <= 3 ms", key: "append300-256s/p99", limit: 3},
		{text: "durable Create, 32 goroutines: >= 2,000 sessions/s", key: "create/rate", atMin: true, limit: 2000},
	},
	toolTargets("tool16k", "16 KiB tool result"),
	toolTargets("tool64k", "64 KiB tool result"),
	[]target{{text: "64 KiB tool result: p99 < 2 ms", key: "tool64k/p99", limit: 2, strict: true}},
	[]target{
		{text: "encrypted: durable append 300 B at most 1.1x plain's time (plain / encrypted throughput <= 1.1)", key: "append300/rate", peer: "sessionstore-enc", limit: 1.1},
		{text: "encrypted: 64 KiB tool result at most 1.1x plain's time", key: "tool64k/rate", peer: "sessionstore-enc", limit: 1.1},
		{text: "encrypted: fresh-process open + load at most 1.1x plain's time (plain / encrypted time >= 0.91)", key: "openload/ms", peer: "sessionstore-enc", atMin: true, limit: 1 / 1.1},
	},
	toolTargets("tool16k-8w", "16 KiB tool result, 8 writers"),
	toolTargets("tool64k-8w", "64 KiB tool result, 8 writers"),
	[]target{
		{text: "fresh-process open + load of the active path (101,000 events): <= 0.7x bbolt's time", key: "openload/ms", peer: "bbolt", limit: 0.7},
		{text: "the same, every 20th event 16 KiB: <= 0.7x bbolt's time", key: "openload16k/ms", peer: "bbolt", limit: 0.7},
		{text: "list 1,000 sessions: no slower than SQLite (time <= 1.0x)", key: "list/ms", peer: "sqlite-full", limit: 1.0},
		{text: "open + newest 50 sessions (list-recent): <= 1.0x SQLite's time", key: "list-recent/ms", peer: "sqlite-full", limit: 1.0},
		{text: "bytes on disk, real transcript, default 8 MiB chunks: <= 0.2x plain JSONL", key: "disk/transcript", peer: "jsonl", limit: 0.2},
		{text: "bytes on disk, real transcript, 64 KiB chunks: <= 0.2x plain JSONL", key: "disk/transcript64k", peer: "jsonl", limit: 0.2},
		{text: "bytes on disk, recorded transcript, default options, closed: <= 0.20x raw JSONL", key: "disk/transcript-raw-closed", limit: 0.2},
		{text: "bytes on disk, recorded transcript, default options, while appending: <= 0.35x raw JSONL", key: "disk/transcript-raw-appending", limit: 0.35},
		{text: "bytes on disk, shared real transcripts, default options, closed: <= 0.20x raw JSONL", key: "disk-real/closed", limit: 0.2},
		{text: "bytes on disk, shared real transcripts, default options, while appending: <= 0.35x raw JSONL", key: "disk-real/appending", limit: 0.35},
		{text: "workspace: snapshot after a change of 3 files: <= 1.0x the time of git add -A + git commit", key: "workspace/snapshot-ms", peer: gitPeerName, limit: 1.0},
		{text: "workspace: the file list as of a snapshot (Files): <= 1.0x the time of git ls-tree -r", key: "workspace/files-ms", peer: gitPeerName, limit: 1.0},
		{text: "workspace: Restore into an empty directory, files synced (default): <= 1.0x the time of git worktree add (which does not fsync)", key: "workspace/restore-ms", peer: gitPeerName, limit: 1.0},
		{text: "workspace: Restore into an empty directory with NoSync: <= 1.0x the time of git worktree add", key: "workspace/restore-nosync-ms", peer: gitPeerName, limit: 1.0},
	},
	searchTargets(),
)

// searchTargets are the search workload's: each query's p50 and p99 at
// most SQLite FTS5's, and the index at most 0.3x the stored data.
func searchTargets() []target {
	var out []target
	for _, q := range searchQueries {
		for _, p := range []string{"p50", "p99"} {
			out = append(out, target{text: fmt.Sprintf("search, %s: %s <= 1.0x SQLite FTS5's", q.what, p), key: "search/" + q.key + "-" + p, peer: ftsPeerName, limit: 1.0})
		}
	}
	return append(out,
		target{text: "search index bytes <= 0.3x the stored (compressed) data", key: "search/index-ratio", limit: 0.3},
		target{text: "searched every 50 ms while appending: durable append 300 B slowed by at most 5% (plain / searched throughput <= 1/0.95)", key: "append300/rate", peer: "sessionstore-searched", limit: 1 / 0.95},
		target{text: "searched every 50 ms while appending: 64 KiB tool result slowed by at most 5%", key: "tool64k/rate", peer: "sessionstore-searched", limit: 1 / 0.95},
	)
}

// writeTargets writes the targets table; it returns the number missed.
func (res *results) writeTargets(w io.Writer) int {
	missed := 0
	fmt.Fprintln(w, "| target | measured | status |")
	fmt.Fprintln(w, "| --- | ---: | --- |")
	for _, t := range targets {
		r, ok := res.byKey[t.key]
		if !ok {
			continue
		}
		var (
			v    float64
			have bool
			what string
		)
		if t.peer == "" {
			v, have = r.value(r.subject)
			what = format(v) + " " + r.unit
			if strings.HasPrefix(r.unit, "x ") {
				what = fmt.Sprintf("%.3f%s", v, r.unit)
			}
		} else {
			v, have = r.ratio(t.peer)
			what = fmt.Sprintf("%.3fx", v) // three decimals: 0.949 is not 0.95
		}
		if !have {
			continue
		}
		met := v <= t.limit
		if t.strict {
			met = v < t.limit
		}
		if t.atMin {
			met = v >= t.limit
		}
		status := "met"
		if !met {
			status = "**missed**"
			missed++
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", t.text, what, status)
	}
	return missed
}

// jsonReport is what -json writes: every row with its values per peer in
// repetition order, and the machine's load per workload. bench/cmd/ab
// reads it.
type jsonReport struct {
	Quick   bool       `json:"quick"`
	Reps    int        `json:"reps"`
	Library string     `json:"library,omitempty"` // libraryRevision
	Rows    []jsonRow  `json:"rows"`
	Load    []jsonLoad `json:"load"`
}

type jsonRow struct {
	Key     string               `json:"key"` // <workload>/<metric>, e.g. append300/rate
	Title   string               `json:"title"`
	Unit    string               `json:"unit"`
	Higher  bool                 `json:"higher"`  // higher is better
	Subject string               `json:"subject"` // the sessionstore peer of the row
	Values  map[string][]float64 `json:"values"`  // per peer, one per repetition measured, in order
}

type jsonLoad struct {
	Workload  string  `json:"workload"`
	WallS     float64 `json:"wall_s"`
	OthersCPU float64 `json:"others_cpu"` // share of all cores; -1 unknown
	Steal     float64 `json:"steal"`      // share of all cores; -1 unknown
	Loadavg   string  `json:"loadavg"`
}

func writeJSON(path string, e *env, quick bool) error {
	rep := jsonReport{Quick: quick, Reps: e.reps, Library: libraryRevision(), Rows: []jsonRow{}, Load: []jsonLoad{}}
	for _, r := range e.res.rows {
		jr := jsonRow{Key: r.key, Title: r.title, Unit: r.unit, Higher: r.higher, Subject: r.subject, Values: map[string][]float64{}}
		for peer, m := range r.vals {
			reps := slices.Sorted(maps.Keys(m))
			vs := make([]float64, len(reps))
			for i, k := range reps {
				vs[i] = m[k]
			}
			jr.Values[peer] = vs
		}
		rep.Rows = append(rep.Rows, jr)
	}
	for _, l := range e.load {
		rep.Load = append(rep.Load, jsonLoad{Workload: l.name, WallS: l.wall.Seconds(), OthersCPU: l.othersCPU, Steal: l.steal, Loadavg: l.loadavg})
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
