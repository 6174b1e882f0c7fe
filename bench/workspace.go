package main

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/klauspost/compress/zstd"

	"github.com/sessionstore/sessionstore"
)

// The workspace workload: a repository of WSFiles files (WSBytes in all)
// recorded WSSnapshots times, each after a change of wsChanged files, by
// sessionstore (Store.SnapshotDir into one session) and by git (git add
// -A && git commit) side by side on the same tree, alternating which goes
// first; then the workspace as of a few events (Store.Files against git
// ls-tree -r) and the whole tree restored into an empty directory
// (Store.Restore against git worktree add). See README.md.

const (
	gitPeerName = "git"
	wsChanged   = 3  // files changed before each snapshot
	wsFilesAt   = 10 // events Files is timed at
)

// wsBaseTime is the modification time of every generated file: a tree
// checked out long before the session, as a harness finds it (neither
// side's racy-timestamp check re-reads it).
var wsBaseTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// wsFile is a file of the generated tree.
type wsFile struct {
	path   string // relative, slash-separated
	binary bool   // random bytes (never chosen for a change)
	id     wsID   // its content now
}

// wsID names a content as each side does: sessionstore's digest
// ("sha256:<hex>") and git's blob id (SHA-1 of "blob <size>\x00" and the
// content, in hex).
type wsID struct {
	digest, git string
}

func wsIDOf(data []byte) wsID {
	g := sha1.New()
	fmt.Fprintf(g, "blob %d\x00", len(data))
	g.Write(data)
	d := sha256.Sum256(data)
	return wsID{digest: "sha256:" + hex.EncodeToString(d[:]), git: hex.EncodeToString(g.Sum(nil))}
}

// ids returns the content of every file now, by path.
func (t *wsTree) ids() map[string]wsID {
	m := make(map[string]wsID, len(t.files))
	for _, f := range t.files {
		m[f.path] = f.id
	}
	return m
}

// wsTree is the generated repository and what changes it.
type wsTree struct {
	root  string
	files []wsFile
	text  []int // indexes of the text files
	dirs  int
	bytes int64 // sum of the generated sizes
	zstd  int64 // sum of their zstd sizes, each file alone
	rng   *rand.Rand
	enc   *zstd.Encoder
}

// wsWords are the tokens the text files are made of: source-like lines
// that compress about 3-4x with zstd.
var wsWords = strings.Fields(`func return if else for range err != nil := = == { } ( ) [ ] , ; . * & ctx context.Context
	string int int64 byte []byte error bool true false var const type struct interface map chan go defer select case
	switch default break continue package import fmt.Errorf errors.Is strings.Split bytes.Buffer len cap append make
	new // TODO: FIXME the a of to in is that this with for value result config options path file name data index
	count size buffer reader writer handler server client request response session event store record manifest`)

// wsIdents are identifier stems; each use gets a number, so the files
// differ.
var wsIdents = []string{"user", "item", "node", "conn", "token", "entry", "block", "chunk", "frame", "batch", "queue", "cache", "key", "val", "opt", "cfg", "msg", "buf", "tmp", "idx"}

// wsLine appends one source-like line to b.
func wsLine(rng *rand.Rand, b []byte) []byte {
	for range rng.IntN(4) {
		b = append(b, '\t')
	}
	n := 2 + rng.IntN(9)
	for i := range n {
		if i > 0 {
			b = append(b, ' ')
		}
		switch r := rng.IntN(20); {
		case r < 15:
			b = append(b, wsWords[rng.IntN(len(wsWords))]...)
		case r < 19:
			b = append(b, wsIdents[rng.IntN(len(wsIdents))]...)
			b = strconv.AppendInt(b, int64(rng.IntN(100)), 10)
		default:
			b = strconv.AppendInt(b, int64(rng.IntN(1000)), 10)
		}
	}
	return append(b, '\n')
}

// wsText returns n bytes of source-like lines, two in five a repeat of
// one of the 32 before it, as code repeats itself.
func wsText(rng *rand.Rand, n int) []byte {
	b := make([]byte, 0, n+128)
	var starts []int // of the lines so far
	for len(b) < n {
		start := len(b)
		if len(starts) > 0 && rng.IntN(5) < 2 {
			k := len(starts) - 1 - rng.IntN(min(32, len(starts)))
			end := start
			if k+1 < len(starts) {
				end = starts[k+1]
			}
			b = append(b, b[starts[k]:end]...)
		} else {
			b = wsLine(rng, b)
		}
		starts = append(starts, start)
	}
	b = b[:n]
	if n > 0 {
		b[n-1] = '\n'
	}
	return b
}

// genWorkspace writes n files of about total bytes in all under root:
// 209 directories three levels deep (the root, 8 top-level, 5 below each,
// 4 below those), each file in a directory drawn uniformly; sizes drawn
// from a log-normal distribution (sigma 1.3: most files a few KiB, a few
// hundred KiB) scaled to the total; one in 20 random bytes (.bin), the
// rest source-like text (wsText). Deterministic for a seed (each file's
// content from its own generator, so the files are written in
// parallel). Every file's modification time is wsBaseTime.
func genWorkspace(root string, n int, total int64, seed uint64) (*wsTree, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)))
	if err != nil {
		return nil, err
	}
	t := &wsTree{root: root, rng: rand.New(rand.NewPCG(seed, 0xc4a9)), enc: enc}
	dirs := []string{""}
	for _, top := range []string{"cmd", "internal", "pkg", "web", "docs", "scripts", "api", "tools"} {
		dirs = append(dirs, top)
		for _, sub := range []string{"core", "util", "store", "net", "ui"} {
			dirs = append(dirs, top+"/"+sub)
			for _, leaf := range []string{"impl", "v1", "gen", "testdata"} {
				dirs = append(dirs, top+"/"+sub+"/"+leaf)
			}
		}
	}
	t.dirs = len(dirs)
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(d)), 0o755); err != nil {
			return nil, err
		}
	}
	raw := make([]float64, n)
	var sum float64
	for i := range raw {
		raw[i] = math.Exp(1.3 * rng.NormFloat64())
		sum += raw[i]
	}
	exts := []string{"go", "go", "go", "go", "go", "go", "go", "go", "ts", "ts", "ts", "ts", "md", "md", "json", "json", "yaml", "txt", "txt", "bin"}
	sizes := make([]int, n)
	for i := range n {
		dir := dirs[rng.IntN(len(dirs))]
		ext := exts[rng.IntN(len(exts))]
		name := fmt.Sprintf("f%05d.%s", i, ext)
		if dir != "" {
			name = dir + "/" + name
		}
		sizes[i] = min(max(32, int(raw[i]/sum*float64(total))), 4<<20)
		t.files = append(t.files, wsFile{path: name, binary: ext == "bin"})
		if ext != "bin" {
			t.text = append(t.text, i)
		}
		t.bytes += int64(sizes[i])
	}
	if len(t.text) < wsChanged {
		return nil, fmt.Errorf("workspace: %d text files, fewer than the %d a change needs", len(t.text), wsChanged)
	}
	zsizes := make([]int64, n)
	err = parallel(runtime.GOMAXPROCS(0), n, func(i int) error {
		f := t.files[i]
		frng := rand.New(rand.NewPCG(seed, uint64(i)))
		var data []byte
		if f.binary {
			data = make([]byte, sizes[i])
			for j := range data {
				data[j] = byte(frng.Uint32())
			}
		} else {
			data = wsText(frng, sizes[i])
		}
		p := filepath.Join(root, filepath.FromSlash(f.path))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
		if err := os.Chtimes(p, wsBaseTime, wsBaseTime); err != nil {
			return err
		}
		zsizes[i] = int64(len(enc.EncodeAll(data, nil)))
		t.files[i].id = wsIDOf(data)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, z := range zsizes {
		t.zstd += z
	}
	return t, nil
}

// wsChange is one change of the tree.
type wsChange struct {
	paths []string
	bytes int64 // sum of the changed files' sizes, after the change
	zstd  int64 // sum of their zstd sizes, each file alone
}

// change edits wsChanged distinct text files as an agent's edit tool
// would: in each, a run of 0-11 lines from a random line replaced by 1-12
// new lines, the file written in place (truncated and rewritten).
func (t *wsTree) change() (wsChange, error) {
	var c wsChange
	picked := map[int]bool{}
	for len(picked) < wsChanged {
		picked[t.text[t.rng.IntN(len(t.text))]] = true
	}
	for _, i := range slices.Sorted(maps.Keys(picked)) {
		p := filepath.Join(t.root, filepath.FromSlash(t.files[i].path))
		old, err := os.ReadFile(p)
		if err != nil {
			return c, err
		}
		start := t.rng.IntN(len(old) + 1)
		if j := bytes.LastIndexByte(old[:start], '\n'); j >= 0 {
			start = j + 1
		} else {
			start = 0
		}
		end := start
		for k := t.rng.IntN(12); k > 0 && end < len(old); k-- {
			if j := bytes.IndexByte(old[end:], '\n'); j >= 0 {
				end += j + 1
			} else {
				end = len(old)
			}
		}
		data := slices.Clone(old[:start])
		for k := 1 + t.rng.IntN(12); k > 0; k-- {
			data = wsLine(t.rng, data)
		}
		data = append(data, old[end:]...)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return c, err
		}
		c.paths = append(c.paths, t.files[i].path)
		t.files[i].id = wsIDOf(data)
		c.bytes += int64(len(data))
		c.zstd += int64(len(t.enc.EncodeAll(data, nil)))
	}
	return c, nil
}

// treeDigest is the SHA-256 of the regular files under dir (paths and
// contents, sorted by path; a top-level .git left out: git's store, or a
// worktree's link to it) and their number.
func treeDigest(dir string) (string, int, error) {
	h := sha256.New()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if rel == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		c := sha256.Sum256(b)
		fmt.Fprintf(h, "%s\x00%x\n", filepath.ToSlash(rel), c)
		n++
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// dirSizer sums the apparent sizes of the regular files under a
// directory, walking it each time but remembering the sizes of the files
// immutable says never change once written (content-addressed blobs,
// git's objects), so that a tree of many of them is measured fast.
type dirSizer struct {
	root      string
	immutable func(rel string) bool
	known     map[string]int64
}

func newDirSizer(root string, immutable func(rel string) bool) *dirSizer {
	return &dirSizer{root: root, immutable: immutable, known: map[string]int64{}}
}

func (z *dirSizer) size() (int64, error) {
	var total int64
	err := filepath.WalkDir(z.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path != z.root {
				return nil // a temporary file gone meanwhile
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel := path[len(z.root):]
		if n, ok := z.known[rel]; ok {
			total += n
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if z.immutable(rel) {
			z.known[rel] = info.Size()
		}
		total += info.Size()
		return nil
	})
	return total, err
}

// gitCmd runs git in a directory with the user's and the system's
// configuration left out (GIT_CONFIG_GLOBAL=/dev/null,
// GIT_CONFIG_NOSYSTEM=1) and no GIT_* variable of the caller's, so that
// only git's defaults and the repository's own configuration apply.
type gitCmd struct {
	path string // the git binary
	dir  string
	env  []string
}

func newGitCmd(path, dir string) gitCmd {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	env = append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	return gitCmd{path: path, dir: dir, env: env}
}

// run runs git with args and returns its stdout; an error carries its
// stderr.
func (g gitCmd) run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, g.path, args...)
	cmd.Dir = g.dir
	cmd.Env = g.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// gitConfig is what the workload sets in the repository's configuration;
// everything else is git's default.
var gitConfig = [][2]string{
	{"user.name", "bench"},
	{"user.email", "bench@example.invalid"},
	// No automatic gc or repack in the middle of the timed commits (and
	// none in the background: gc.autoDetach).
	{"gc.auto", "0"},
}

// blockMedians sets, per repetition r of reps, the median of the r-th of
// reps consecutive blocks of vals (fewer blocks when there are fewer
// values).
func blockMedians(r *row, peer string, reps int, vals []float64) {
	k := min(reps, len(vals))
	for b := range k {
		r.set(peer, b, median(vals[b*len(vals)/k:(b+1)*len(vals)/k]))
	}
}

func msOf(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// workspace is the workload (see the top of this file and README.md).
func (e *env) workspace() error {
	ss := e.has("sessionstore")
	useGit := e.has(gitPeerName)
	var gitPath, gitVersion string
	if useGit {
		p, err := exec.LookPath("git")
		if err != nil {
			e.logf("  git not found (%v): sessionstore alone", err)
			useGit = false
		} else {
			gitPath = p
			out, err := exec.Command(p, "--version").Output()
			if err != nil {
				return fmt.Errorf("%s --version: %w", p, err)
			}
			gitVersion = strings.TrimSpace(string(out))
		}
	}
	if !ss && !useGit {
		e.logf("  neither sessionstore nor git selected: nothing to do")
		return nil
	}
	n, total, snaps := e.sz.WSFiles, e.sz.WSBytes, e.sz.WSSnapshots
	what := fmt.Sprintf("workspace of %s files (%s MB)", thousands(int64(n)), format(float64(total)/1e6))
	snapRow := e.res.row("workspace/snapshot-ms", what+": snapshot after a change of 3 files (SnapshotDir; git add -A + git commit)", "ms", false, "sessionstore")
	bytesRow := e.res.row("workspace/snapshot-bytes", what+": bytes added per snapshot (store directory; .git)", "bytes", false, "sessionstore")
	filesRow := e.res.row("workspace/files-ms", fmt.Sprintf("%s: the file list as of a snapshot, median of %d spread over %d (Files in a store just opened, no workspace cached; git ls-tree -r)", what, min(wsFilesAt, snaps), snaps), "ms", false, "sessionstore")
	pathRow := e.res.row("workspace/files-path-ms", what+": the same, Files of each in turn in one store, each starting from the one before's workspace, which the store keeps (git: the same ls-tree times)", "ms", false, "sessionstore")
	restoreRow := e.res.row("workspace/restore-ms", what+": restore into an empty directory, Restore with files synced (default); git worktree add, which does not fsync", "ms", false, "sessionstore")
	noSyncRow := e.res.row("workspace/restore-nosync-ms", what+": restore into an empty directory, Restore with NoSync; git worktree add", "ms", false, "sessionstore")

	root, err := e.freshDir("workspace")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	treeDir := filepath.Join(root, "tree")
	t0 := time.Now()
	tree, err := genWorkspace(treeDir, n, total, 1)
	if err != nil {
		return err
	}
	e.logf("  generated %d files, %s bytes, in %s", len(tree.files), thousands(tree.bytes), time.Since(t0).Round(100*time.Millisecond))
	var details strings.Builder
	fmt.Fprintf(&details, "Workspace (`workspace`): %s files in %d directories three levels deep, %s bytes (zstd each file alone: %s, %.2fx), sizes log-normal (sigma 1.3) scaled to %s MB, one in 20 files random bytes, the rest source-like text (two lines in five a repeat of a recent one); every file's mtime set in the past. %d snapshots, each after %d text files edited in place (a run of lines replaced). ",
		thousands(int64(len(tree.files))), tree.dirs, thousands(tree.bytes), thousands(tree.zstd), float64(tree.bytes)/float64(tree.zstd), format(float64(total)/1e6), snaps, wsChanged)

	// sessionstore: a store beside the tree, one session.
	var (
		st   *sessionstore.Store
		sid  uuid.UUID
		ssSz *dirSizer
	)
	storeDir := filepath.Join(root, "store")
	if ss {
		if st, err = sessionstore.Open(storeDir, nil); err != nil {
			return err
		}
		defer func() {
			if st != nil {
				st.Close()
			}
		}()
		m, err := st.Create(e.ctx, sessionstore.Meta{Name: "workspace"})
		if err != nil {
			return err
		}
		sid = m.ID
		if _, err := st.Append(e.ctx, sid, sessionstore.UserText("Fix the failing tests in the repository.")); err != nil {
			return err
		}
		ssSz = newDirSizer(storeDir, func(rel string) bool { return strings.Contains(rel, "/blobs/") })
	}
	// git: a repository on the same tree (.git inside it, which
	// SnapshotDir never walks).
	var (
		g     gitCmd
		gitSz *dirSizer
	)
	if useGit {
		g = newGitCmd(gitPath, treeDir)
		if _, err := g.run(e.ctx, "init", "-q", "-b", "main"); err != nil {
			return err
		}
		for _, kv := range gitConfig {
			if _, err := g.run(e.ctx, "config", kv[0], kv[1]); err != nil {
				return err
			}
		}
		gitSz = newDirSizer(filepath.Join(treeDir, ".git"), func(rel string) bool {
			return strings.HasPrefix(rel, "/objects/") && !strings.HasPrefix(rel, "/objects/info/")
		})
	}

	// The initial snapshot and commit, untimed in the rows (reported).
	var initial []string
	if ss {
		t0 := time.Now()
		res, err := st.SnapshotDir(e.ctx, sid, treeDir, sessionstore.SnapshotOptions{})
		if err != nil {
			return fmt.Errorf("sessionstore: initial snapshot: %w", err)
		}
		if len(res.Added) != len(tree.files) {
			return fmt.Errorf("sessionstore: initial snapshot added %d files, want %d", len(res.Added), len(tree.files))
		}
		took := time.Since(t0)
		sz, err := ssSz.size()
		if err != nil {
			return err
		}
		initial = append(initial, fmt.Sprintf("sessionstore's first SnapshotDir %.1f s, store %s bytes", took.Seconds(), thousands(sz)))
		e.logf("  sessionstore: first snapshot in %s", took.Round(100*time.Millisecond))
	}
	if useGit {
		t0 := time.Now()
		if _, err := g.run(e.ctx, "add", "-A"); err != nil {
			return err
		}
		if _, err := g.run(e.ctx, "commit", "-q", "-m", "initial"); err != nil {
			return err
		}
		took := time.Since(t0)
		sz, err := gitSz.size()
		if err != nil {
			return err
		}
		t1 := time.Now()
		if _, err := g.run(e.ctx, "repack", "-a", "-d", "-q"); err != nil {
			return err
		}
		repack := time.Since(t1)
		gitSz.known = map[string]int64{} // the loose objects are gone
		packed, err := gitSz.size()
		if err != nil {
			return err
		}
		initial = append(initial, fmt.Sprintf("git add -A + commit %.1f s, .git %s bytes (loose objects), then `git repack -a -d` (untimed, %.1f s: a repository's history is packed, as a clone's is) to %s bytes", took.Seconds(), thousands(sz), repack.Seconds(), thousands(packed)))
		e.logf("  git: first commit in %s, repack in %s", took.Round(100*time.Millisecond), repack.Round(100*time.Millisecond))
	}
	fmt.Fprintf(&details, "First record of the tree (untimed in the rows): %s.", strings.Join(initial, "; "))

	// The snapshots, alternating which side goes first.
	var (
		ssMs, gitMs, ssGrow, gitGrow, paired []float64
		changed, changedZ                    []float64
		ssEvents                             []uuid.UUID
		commits                              []string
		ssStart, gitStart, ssEnd, gitEnd     int64
	)
	if ss {
		if ssStart, err = ssSz.size(); err != nil {
			return err
		}
	}
	if useGit {
		if gitStart, err = gitSz.size(); err != nil {
			return err
		}
	}
	restoreAt := max(0, snaps/2-1) // the snapshot restored (0-based)
	// The snapshots (0-based) Files is timed at, spread evenly, and the
	// files each must list (by path: each side's id of the content).
	var at []int
	k := min(wsFilesAt, snaps)
	for j := range k {
		at = append(at, (j+1)*snaps/k-1)
	}
	wantAt := map[int]map[string]wsID{}
	var wantDigest string
	var wantFiles int
	snapSS := func() error {
		before, err := ssSz.size()
		if err != nil {
			return err
		}
		var (
			res sessionstore.SnapshotResult
			d   time.Duration
		)
		timed(e.ctx, "workspace/sessionstore/snapshot", func(ctx context.Context) {
			t0 := time.Now()
			res, err = st.SnapshotDir(ctx, sid, treeDir, sessionstore.SnapshotOptions{})
			d = time.Since(t0)
		})
		if err != nil {
			return fmt.Errorf("sessionstore: snapshot %d: %w", len(ssEvents)+1, err)
		}
		if len(res.Modified) != wsChanged || len(res.Added)+len(res.Deleted) != 0 {
			return fmt.Errorf("sessionstore: snapshot %d: %d added, %d modified, %d deleted; want %d modified", len(ssEvents)+1, len(res.Added), len(res.Modified), len(res.Deleted), wsChanged)
		}
		after, err := ssSz.size()
		if err != nil {
			return err
		}
		ssMs = append(ssMs, msOf(d))
		ssGrow = append(ssGrow, float64(after-before))
		ssEvents = append(ssEvents, res.Event.ID)
		return nil
	}
	snapGit := func() error {
		before, err := gitSz.size()
		if err != nil {
			return err
		}
		var d time.Duration
		timed(e.ctx, "workspace/git/snapshot", func(ctx context.Context) {
			t0 := time.Now()
			if _, err = g.run(ctx, "add", "-A"); err == nil {
				_, err = g.run(ctx, "commit", "-q", "-m", "x")
			}
			d = time.Since(t0)
		})
		if err != nil {
			return err
		}
		after, err := gitSz.size()
		if err != nil {
			return err
		}
		out, err := g.run(e.ctx, "rev-parse", "HEAD")
		if err != nil {
			return err
		}
		gitMs = append(gitMs, msOf(d))
		gitGrow = append(gitGrow, float64(after-before))
		commits = append(commits, strings.TrimSpace(string(out)))
		return nil
	}
	t0 = time.Now()
	for i := range snaps {
		c, err := tree.change()
		if err != nil {
			return err
		}
		changed = append(changed, float64(c.bytes))
		changedZ = append(changedZ, float64(c.zstd))
		sides := []func() error{}
		if ss {
			sides = append(sides, snapSS)
		}
		if useGit {
			sides = append(sides, snapGit)
		}
		if i%2 == 1 {
			slices.Reverse(sides)
		}
		for _, side := range sides {
			if err := side(); err != nil {
				return err
			}
		}
		if ss && useGit {
			paired = append(paired, ssMs[i]/gitMs[i])
		}
		if ss {
			// The harness goes on with the conversation.
			msg := fmt.Sprintf("Edited %s: the tests should pass now.", strings.Join(c.paths, ", "))
			if _, err := st.Append(e.ctx, sid, sessionstore.AssistantText(msg)); err != nil {
				return err
			}
		}
		if slices.Contains(at, i) {
			wantAt[i] = tree.ids()
		}
		if i == restoreAt {
			if wantDigest, wantFiles, err = treeDigest(treeDir); err != nil {
				return err
			}
		}
	}
	e.logf("  %d snapshots in %s", snaps, time.Since(t0).Round(100*time.Millisecond))
	if ss {
		blockMedians(snapRow, "sessionstore", e.reps, ssMs)
		blockMedians(bytesRow, "sessionstore", e.reps, ssGrow)
		if ssEnd, err = ssSz.size(); err != nil {
			return err
		}
	}
	if useGit {
		blockMedians(snapRow, gitPeerName, e.reps, gitMs)
		blockMedians(bytesRow, gitPeerName, e.reps, gitGrow)
		if gitEnd, err = gitSz.size(); err != nil {
			return err
		}
	}
	// Per-snapshot bytes, next to what changed.
	fmt.Fprintf(&details, "\n\nPer snapshot (%d of them; the rows' repetitions are %d consecutive blocks of them, each block's median):\n\n| per snapshot | median | mean |\n| --- | ---: | ---: |\n", snaps, min(e.reps, snaps))
	mean := func(v []float64) float64 {
		var s float64
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	fmt.Fprintf(&details, "| the %d changed files, sum of their sizes | %s | %s |\n", wsChanged, format(median(changed)), format(mean(changed)))
	fmt.Fprintf(&details, "| their zstd size (SpeedDefault, each file alone, as sessionstore's blobs) | %s | %s |\n", format(median(changedZ)), format(mean(changedZ)))
	if ss {
		fmt.Fprintf(&details, "| sessionstore: store directory growth (apparent bytes; the manifest and message lines go into the active chunk's preallocated space, which grows the file only now and then: the mean counts it) | %s | %s |\n", format(median(ssGrow)), format(mean(ssGrow)))
	}
	if useGit {
		fmt.Fprintf(&details, "| git: .git growth (apparent bytes: loose blobs, trees and commit, the index rewritten, reflogs) | %s | %s |\n", format(median(gitGrow)), format(mean(gitGrow)))
	}
	if ss {
		fmt.Fprintf(&details, "| sessionstore: SnapshotDir time, ms (p90 %s) | %s | %s |\n", format(percentile(slices.Sorted(slices.Values(ssMs)), 90)), format(median(ssMs)), format(mean(ssMs)))
	}
	if useGit {
		fmt.Fprintf(&details, "| git: `git add -A` + `git commit -q -m x`, two processes, ms (p90 %s) | %s | %s |\n", format(percentile(slices.Sorted(slices.Values(gitMs)), 90)), format(median(gitMs)), format(mean(gitMs)))
	}
	if len(paired) > 0 {
		fmt.Fprintf(&details, "| time ratio sessionstore / git, each snapshot's pair | %.3f | %.3f |\n", median(paired), mean(paired))
	}
	var totals []string
	if ss {
		// Closed: the active chunk sealed, its preallocated space gone.
		if err := st.Close(); err != nil {
			return err
		}
		st = nil
		closed, err := ssSz.size()
		if err != nil {
			return err
		}
		if st, err = sessionstore.Open(storeDir, nil); err != nil {
			return err
		}
		totals = append(totals, fmt.Sprintf("sessionstore's store %s bytes after the first snapshot, %s after the last (%s per snapshot), %s closed", thousands(ssStart), thousands(ssEnd), format(float64(ssEnd-ssStart)/float64(snaps)), thousands(closed)))
	}
	if useGit {
		totals = append(totals, fmt.Sprintf(".git %s bytes after the first commit and repack, %s after the last (%s per commit; loose objects, never packed: gc.auto=0)", thousands(gitStart), thousands(gitEnd), format(float64(gitEnd-gitStart)/float64(snaps))))
	}
	fmt.Fprintf(&details, "\nIn all: %s.", strings.Join(totals, "; "))

	// Files at spread events, against git ls-tree -r of the same commits.
	// Each returns the time and what it listed, by path: the content's
	// id (sessionstore's digest; git's blob id).
	filesSS := func(ctx context.Context, i int) (float64, map[string]string, error) {
		var (
			ws  sessionstore.Workspace
			err error
			d   time.Duration
		)
		timed(ctx, "workspace/sessionstore/files", func(ctx context.Context) {
			t0 := time.Now()
			ws, err = st.Files(ctx, sid, ssEvents[i])
			d = time.Since(t0)
		})
		if err != nil {
			return 0, nil, err
		}
		ids := make(map[string]string, len(ws.Files))
		for _, f := range ws.Files {
			ids[f.Path] = f.Digest
		}
		return msOf(d), ids, nil
	}
	filesGit := func(ctx context.Context, i int) (float64, map[string]string, error) {
		var (
			out []byte
			err error
			d   time.Duration
		)
		timed(ctx, "workspace/git/files", func(ctx context.Context) {
			t0 := time.Now()
			out, err = g.run(ctx, "ls-tree", "-r", commits[i])
			d = time.Since(t0)
		})
		if err != nil {
			return 0, nil, err
		}
		ids := map[string]string{}
		for line := range bytes.Lines(out) {
			// <mode> blob <id>\t<path>
			meta, p, ok := bytes.Cut(bytes.TrimSuffix(line, []byte("\n")), []byte("\t"))
			f := strings.Fields(string(meta))
			if !ok || len(f) != 3 {
				return 0, nil, fmt.Errorf("git ls-tree: line %q", line)
			}
			ids[string(p)] = f[2]
		}
		return msOf(d), ids, nil
	}
	// reopen closes and opens the store, so that it has no workspace
	// cached, and loads the session (untimed).
	reopen := func() error {
		err := st.Close()
		st = nil
		if err != nil {
			return err
		}
		if st, err = sessionstore.Open(storeDir, nil); err != nil {
			return err
		}
		_, err = st.Tree(e.ctx, sid)
		return err
	}
	// checkIDs fails a list that is not every file with the content it
	// had at snapshot i (outside the timing).
	checkIDs := func(side string, i int, ids map[string]string) error {
		want := wantAt[i]
		if len(ids) != len(want) {
			return fmt.Errorf("%s: the files as of snapshot %d: %d, want %d", side, i+1, len(ids), len(want))
		}
		for p, w := range want {
			id := w.digest
			if side == gitPeerName {
				id = w.git
			}
			if ids[p] != id {
				return fmt.Errorf("%s: the files as of snapshot %d: %s is %q, want %q", side, i+1, p, ids[p], id)
			}
		}
		return nil
	}
	// A first call of git's, untimed.
	if useGit {
		if _, _, err := filesGit(e.ctx, snaps-1); err != nil {
			return err
		}
	}
	byEvent := map[string][][]float64{"sessionstore": make([][]float64, len(at)), gitPeerName: make([][]float64, len(at)), "path": make([][]float64, len(at))}
	for rep := range e.reps {
		var ssRep, gitRep, pathRep []float64
		for j, i := range at {
			sides := []string{}
			if ss {
				sides = append(sides, "sessionstore")
			}
			if useGit {
				sides = append(sides, gitPeerName)
			}
			if (rep+j)%2 == 1 {
				slices.Reverse(sides)
			}
			for _, side := range sides {
				var (
					ms  float64
					ids map[string]string
					err error
				)
				if side == "sessionstore" {
					if err := reopen(); err != nil {
						return err
					}
					ms, ids, err = filesSS(e.ctx, i)
					ssRep = append(ssRep, ms)
				} else {
					ms, ids, err = filesGit(e.ctx, i)
					gitRep = append(gitRep, ms)
				}
				if err != nil {
					return err
				}
				byEvent[side][j] = append(byEvent[side][j], ms)
				if err := checkIDs(side, i, ids); err != nil {
					return err
				}
			}
		}
		// Along the path: the same snapshots in order in one opened
		// store, each Files starting from the previous one's workspace,
		// which the store keeps (the first, cold, not counted).
		if ss {
			if err := reopen(); err != nil {
				return err
			}
			for j, i := range at {
				ms, ids, err := filesSS(e.ctx, i)
				if err != nil {
					return err
				}
				if err := checkIDs("sessionstore", i, ids); err != nil {
					return err
				}
				if j > 0 {
					pathRep = append(pathRep, ms)
					byEvent["path"][j] = append(byEvent["path"][j], ms)
				}
			}
		}
		if ss {
			filesRow.set("sessionstore", rep, median(ssRep))
			if len(pathRep) > 0 {
				pathRow.set("sessionstore", rep, median(pathRep))
			}
		}
		if useGit {
			filesRow.set(gitPeerName, rep, median(gitRep))
			pathRow.set(gitPeerName, rep, median(gitRep))
		}
	}
	fmt.Fprintf(&details, "\n\nThe file list as of snapshot k, ms (median of %d repetitions): sessionstore `Files` in a store just opened (closed and opened again, the session loaded by a `Tree` call, untimed), which reads the full manifest and the k-1 deltas after it; the same along the path (each snapshot's Files right after the previous one's in the same store, which keeps the last 4 workspaces computed: it reads the deltas in between); git `ls-tree -r <commit>`, one process, its output read through a pipe. Each list checked outside the timing: every file with the content it had at that snapshot (sessionstore's digest, git's blob id):\n\n| snapshot | sessionstore, just opened | sessionstore, along the path | git |\n| ---: | ---: | ---: | ---: |\n", e.reps)
	for j, i := range at {
		cell := func(side string) string {
			if len(byEvent[side][j]) == 0 {
				return "—"
			}
			return format(median(byEvent[side][j]))
		}
		fmt.Fprintf(&details, "| %d | %s | %s | %s |\n", i+1, cell("sessionstore"), cell("path"), cell(gitPeerName))
	}

	// Restore of the whole tree as of snapshot restoreAt into an empty
	// directory: Restore (synced, and NoSync) and git worktree add.
	type variant struct {
		name string
		run  func(ctx context.Context, dir string) error
		rows []*row
	}
	var variants []variant
	var ssSync, ssNoSync []float64
	if ss {
		for _, noSync := range []bool{false, true} {
			r := restoreRow
			if noSync {
				r = noSyncRow
			}
			variants = append(variants, variant{name: map[bool]string{false: "sessionstore", true: "sessionstore-nosync"}[noSync], rows: []*row{r}, run: func(ctx context.Context, dir string) error {
				rep, err := st.Restore(ctx, sid, ssEvents[restoreAt], dir, sessionstore.RestoreOptions{NoSync: noSync})
				if err == nil && (len(rep.Written) != len(tree.files) || len(rep.Removed) != 0) {
					err = fmt.Errorf("restore wrote %d files and removed %d; want %d and 0", len(rep.Written), len(rep.Removed), len(tree.files))
				}
				return err
			}})
		}
	}
	if useGit {
		variants = append(variants, variant{name: gitPeerName, rows: []*row{restoreRow, noSyncRow}, run: func(ctx context.Context, dir string) error {
			_, err := g.run(ctx, "worktree", "add", "-q", "--detach", dir, commits[restoreAt])
			return err
		}})
	}
	restoreParent := filepath.Join(root, "restore")
	for rep := range e.reps {
		order := slices.Clone(variants)
		if len(order) > 0 {
			r := rep % len(order)
			order = append(order[r:], order[:r]...)
		}
		for _, v := range order {
			dir := filepath.Join(restoreParent, fmt.Sprintf("%s-%d", v.name, rep))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			// Start from a clean page cache: the previous side's dirty
			// pages and removals written back, not the next's to pay.
			syscall.Sync()
			var (
				err error
				d   time.Duration
			)
			label := map[string]string{"sessionstore": "workspace/sessionstore/restore", "sessionstore-nosync": "workspace/sessionstore/restore-nosync", gitPeerName: "workspace/git/restore"}[v.name]
			timed(e.ctx, label, func(ctx context.Context) {
				t0 := time.Now()
				err = v.run(ctx, dir)
				d = time.Since(t0)
			})
			if err != nil {
				return fmt.Errorf("%s: restore: %w", v.name, err)
			}
			if rep == 0 {
				got, nf, err := treeDigest(dir)
				if err != nil {
					return err
				}
				if got != wantDigest || nf != wantFiles {
					return fmt.Errorf("%s: the tree restored as of snapshot %d (%d files, digest %s) is not the tree snapshotted (%d files, %s)", v.name, restoreAt+1, nf, got, wantFiles, wantDigest)
				}
			}
			peer := v.name
			switch v.name {
			case "sessionstore":
				ssSync = append(ssSync, msOf(d))
			case "sessionstore-nosync":
				peer = "sessionstore"
				ssNoSync = append(ssNoSync, msOf(d))
			}
			for _, r := range v.rows {
				r.set(peer, rep, msOf(d))
			}
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			if v.name == gitPeerName {
				if _, err := g.run(e.ctx, "worktree", "prune"); err != nil {
					return err
				}
			}
		}
	}
	if ss && len(ssNoSync) > 0 {
		if v, ok := filesRow.value("sessionstore"); ok {
			fmt.Fprintf(&details, "\nFiles (median over the events above, %s ms) is %.1f%% of the time of a Restore with NoSync (%s ms) and %.1f%% of one synced (%s ms).", format(v), 100*v/median(ssNoSync), format(median(ssNoSync)), 100*v/median(ssSync), format(median(ssSync)))
		}
	}
	fmt.Fprintf(&details, "\n\nRestore: the whole tree as of snapshot %d of %d, into a new empty directory, %d times each, the order rotating (sessionstore synced, NoSync, git; then NoSync, git, synced; ...), `sync(2)` before each so none pays for the previous one's writeback; the first of each checked against the tree as it was snapshotted (paths and contents). git: `git worktree add --detach <dir> <commit>` (a checkout of the commit into the directory, with its own index, as harnesses isolate agents), removed with `git worktree prune` after. git never fsyncs a work-tree file (core.fsync has no such component); Restore syncs each file and directory unless NoSync.", restoreAt+1, snaps, e.reps)
	if useGit {
		var cfg []string
		for _, kv := range gitConfig {
			cfg = append(cfg, kv[0]+"="+kv[1])
		}
		fmt.Fprintf(&details, " git: %s (%s); repository configuration %s, nothing else (GIT_CONFIG_GLOBAL=/dev/null, GIT_CONFIG_NOSYSTEM=1); each git command one process started by the harness (os/exec), its start counted in its time; .git inside the tree (SnapshotDir never walks a .git). Durability differs: SnapshotDir returns with the new contents and the manifest synced (each blob file and its directory, then the chunk line's fdatasync), while git's default core.fsync (committed,-loose-object: packs only) syncs none of what a commit writes (loose objects, index, refs). CPU profile labels: timed=workspace/<sessionstore or git>/<snapshot, files, restore, restore-nosync>.", gitPath, gitVersion, strings.Join(cfg, ", "))
	}
	e.res.detail("%s", details.String())
	if ss {
		err := st.Close()
		st = nil
		return err
	}
	return nil
}
