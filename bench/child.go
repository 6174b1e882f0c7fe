package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// childCommand is the hidden subcommand that runs one measurement in a
// fresh process: go run . __child '<json childSpec>'.
const childCommand = "__child"

type childSpec struct {
	Op      string // "openload" or "tree"
	Peer    string
	Dir     string
	Session uuid.UUID
	Expect  int       // events the path or tree must hold
	Head    uuid.UUID // openload: the last event of the path (HEAD)
	// CPUProfile, if set, makes the child repeat the operation Loops times
	// under the CPU profiler and write the profile there.
	CPUProfile string
	Loops      int
}

type childResult struct {
	Ms           float64 // open + load (or open + tree), in the child
	Events       int
	PeakHeap     int64  // max heap object bytes sampled during the operation, less the heap before it
	RetainedHeap int64  // heap object bytes after a GC with the result alive, less the heap before
	PeakRSS      int64  // VmHWM at the end
	Payload      int64  // payload bytes of the loaded path, or summed node sizes
	Hash         string // openload: payloadHash of the loaded path, for the harness to compare with the fixture's
}

// runChild runs spec in a new process of this binary and decodes its
// result.
func runChild(ctx context.Context, exe string, spec childSpec) (childResult, error) {
	var res childResult
	arg, err := json.Marshal(spec)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, childCommand, string(arg))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return res, fmt.Errorf("child %s %s: %w", spec.Op, spec.Peer, err)
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return res, fmt.Errorf("child %s %s: %w (output %q)", spec.Op, spec.Peer, err, out)
	}
	return res, nil
}

// childMain is the child's entry point.
func childMain(arg string) error {
	var spec childSpec
	if err := json.Unmarshal([]byte(arg), &spec); err != nil {
		return err
	}
	p, ok := peerByName(spec.Peer)
	if !ok {
		return fmt.Errorf("no peer %q", spec.Peer)
	}
	ctx := context.Background()
	if spec.CPUProfile != "" {
		return childProfile(ctx, p, spec)
	}
	var (
		res childResult
		err error
	)
	switch spec.Op {
	case "openload":
		res, err = childOpenLoad(ctx, p, spec)
	case "tree":
		res, err = childTree(ctx, p, spec)
	default:
		err = fmt.Errorf("unknown child op %q", spec.Op)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

func childOpenLoad(ctx context.Context, p Peer, spec childSpec) (childResult, error) {
	var res childResult
	t0 := time.Now()
	st, err := p.OpenRead(spec.Dir)
	if err != nil {
		return res, err
	}
	path, err := st.Load(ctx, spec.Session)
	res.Ms = float64(time.Since(t0).Nanoseconds()) / 1e6
	if err != nil {
		st.Close()
		return res, err
	}
	res.Events = len(path)
	res.Payload = payloadBytes(path)
	res.Hash = payloadHash(path)
	if res.Events != spec.Expect {
		st.Close()
		return res, fmt.Errorf("%s loaded %d events, want %d", p.Name, res.Events, spec.Expect)
	}
	if path[len(path)-1].ID != spec.Head || path[0].ParentID != uuid.Nil {
		st.Close()
		return res, fmt.Errorf("%s loaded a path from %s to %s, want one from a root to HEAD %s", p.Name, path[0].ID, path[len(path)-1].ID, spec.Head)
	}
	for i := 1; i < len(path); i++ {
		if path[i].ParentID != path[i-1].ID {
			st.Close()
			return res, fmt.Errorf("%s: event %d of the path is not a child of the one before", p.Name, i)
		}
	}
	return res, st.Close()
}

// heapObjects reads the bytes of heap objects (live and not yet swept)
// without stopping the world.
func heapObjects() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

func childTree(ctx context.Context, p Peer, spec childSpec) (childResult, error) {
	var res childResult
	runtime.GC()
	base := heapObjects()
	var peak atomic.Int64
	peak.Store(base)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // sample the heap every millisecond
		defer close(done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if h := heapObjects(); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	t0 := time.Now()
	st, err := p.OpenRead(spec.Dir)
	if err != nil {
		return res, err
	}
	nodes, err := st.Tree(ctx, spec.Session)
	res.Ms = float64(time.Since(t0).Nanoseconds()) / 1e6
	close(stop)
	<-done
	if h := heapObjects(); h > peak.Load() {
		peak.Store(h)
	}
	if err != nil {
		st.Close()
		return res, err
	}
	runtime.GC()
	res.RetainedHeap = heapObjects() - base
	res.PeakHeap = peak.Load() - base
	res.PeakRSS = peakRSS()
	res.Events = len(nodes)
	for _, n := range nodes {
		res.Payload += n.Size
	}
	runtime.KeepAlive(nodes)
	if res.Events != spec.Expect {
		st.Close()
		return res, fmt.Errorf("%s tree has %d nodes, want %d", p.Name, res.Events, spec.Expect)
	}
	return res, st.Close()
}

// childProfile repeats the operation under the CPU profiler.
func childProfile(ctx context.Context, p Peer, spec childSpec) error {
	stop, err := startCPUProfile(spec.CPUProfile)
	if err != nil {
		return err
	}
	defer stop()
	var res childResult
	for range max(1, spec.Loops) {
		var r childResult
		switch spec.Op {
		case "openload":
			r, err = childOpenLoad(ctx, p, spec)
		case "tree":
			r, err = childTree(ctx, p, spec)
		default:
			err = fmt.Errorf("unknown child op %q", spec.Op)
		}
		if err != nil {
			return err
		}
		res.Ms += r.Ms / float64(max(1, spec.Loops))
		res.Events, res.Payload, res.Hash = r.Events, r.Payload, r.Hash
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// startCPUProfile starts the CPU profiler writing to path; stop ends it
// and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
